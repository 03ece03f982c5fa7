import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One span as an OTLP receiver got it. */
export interface ReceivedSpan {
  /** `service.name` of the resource that exported it. */
  service: string;
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's kind number: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string }[];
  startMs: number;
  endMs: number;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: number;
}

export interface OtlpReceiver {
  /** Base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it (`/v1/traces` is appended by exporters). */
  readonly url: string;
  /** Every span received so far, in arrival order. */
  readonly spans: ReceivedSpan[];
  /** Export requests received (including empty ones). */
  readonly requests: number;
  close(): Promise<void>;
}

type AnyValue = {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
  arrayValue?: { values?: AnyValue[] };
  kvlistValue?: { values?: KeyValue[] };
};
type KeyValue = { key: string; value?: AnyValue };
type OtlpSpan = {
  traceId?: string;
  spanId?: string;
  parentSpanId?: string;
  name?: string;
  kind?: number;
  startTimeUnixNano?: string | number;
  endTimeUnixNano?: string | number;
  attributes?: KeyValue[];
  links?: { traceId?: string; spanId?: string }[];
  status?: { code?: number };
};
type ExportRequest = { resourceSpans?: { resource?: { attributes?: KeyValue[] }; scopeSpans?: { spans?: OtlpSpan[] }[] }[] };

/** OTLP/JSON carries ids as hex; some encoders send base64 (the protobuf JSON mapping): both come out hex. */
function hexId(v: string | undefined): string {
  if (!v) return '';
  return /^[0-9a-f]+$/i.test(v) && (v.length === 32 || v.length === 16) ? v.toLowerCase() : Buffer.from(v, 'base64').toString('hex');
}

function valueOf(v: AnyValue | undefined): unknown {
  if (!v) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(valueOf);
  if (v.kvlistValue) return attributesOf(v.kvlistValue.values);
  return undefined;
}

const attributesOf = (kvs: KeyValue[] | undefined): Record<string, unknown> => Object.fromEntries((kvs ?? []).map((kv) => [kv.key, valueOf(kv.value)]));

/** Decode an OTLP/JSON ExportTraceServiceRequest into flat spans. */
export function decodeOtlpJson(body: unknown): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of (body as ExportRequest).resourceSpans ?? []) {
    const service = String(attributesOf(rs.resource?.attributes)['service.name'] ?? '');
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          service,
          traceId: hexId(s.traceId),
          spanId: hexId(s.spanId),
          parentSpanId: hexId(s.parentSpanId),
          name: s.name ?? '',
          kind: s.kind ?? 0,
          attributes: attributesOf(s.attributes),
          links: (s.links ?? []).map((l) => ({ traceId: hexId(l.traceId), spanId: hexId(l.spanId) })),
          startMs: Number(BigInt(s.startTimeUnixNano ?? 0) / 1000n) / 1000,
          endMs: Number(BigInt(s.endTimeUnixNano ?? 0) / 1000n) / 1000,
          status: s.status?.code ?? 0,
        });
      }
    }
  }
  return out;
}

/**
 * A tiny OTLP/HTTP traces receiver for tests: listens on 127.0.0.1 (a free
 * port), accepts `POST /v1/traces` with a JSON body (what
 * `@opentelemetry/exporter-trace-otlp-http` sends) and records the spans.
 * Protobuf bodies are refused with 415.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  let requests = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url?.split('?')[0] !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      if (!String(req.headers['content-type'] ?? '').includes('json')) {
        res.writeHead(415).end();
        return;
      }
      try {
        spans.push(...decodeOtlpJson(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
        requests++;
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } catch {
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    get requests() {
      return requests;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
