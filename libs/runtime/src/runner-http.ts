import { Pool } from 'undici';
import { checkProtocolVersion, errorBody, PROTOCOL_HEADER, PROTOCOL_VERSION, SIGNATURE_HEADER, signInvoke } from '@dws/protocol';
import { runTraceId } from '@dws/telemetry';
import { randomPooled } from './ids.js';

/** SPEC Limits: an invoke reply over 1 MiB fails the invoke. */
export const MAX_REPLY_BYTES = 1024 * 1024;

/**
 * The body of the 413 handed on for a reply over the limit: a 4xx, so the run
 * fails with this reason instead of retrying a reply that will not shrink.
 */
export function tooLargeBody(bytes: number): string {
  return JSON.stringify({
    error: { code: 'invoke_reply_too_large', message: `The runner's invoke reply is ${bytes > 0 ? `${bytes} bytes, ` : ''}over the 1 MiB limit.` },
    logs: [],
  });
}

/**
 * W3C trace context of one invoke while tracing is off: the run's trace id
 * (derived from the run id: every pass of a run lands in one trace, see
 * @dws/telemetry runTraceIds) and a span id of this invoke's. With tracing
 * on, callers pass the traceparent of their own invoke span instead.
 */
export function traceparentFor(runId: string): string {
  return `00-${runTraceId(runId)}-${randomPooled(8).toString('hex')}-01`;
}

/** Connection-level failures: the request never reached the runner, so another runner may take it at once. */
const NEVER_SENT = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

function errorCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; cause?: { code?: unknown } };
  if (typeof e?.cause?.code === 'string') return e.cause.code;
  return typeof e?.code === 'string' ? e.code : undefined;
}

/** What one signed POST to a serve runner came to. */
export type RunnerPost =
  | { kind: 'reply'; status: number; body: Uint8Array }
  /** `neverSent`: the runner cannot have seen the invoke (refused, unresolvable), so another may take it at once. */
  | { kind: 'failed'; error: string; code: string | undefined; neverSent: boolean };

/**
 * POSTs signed invoke bodies to serve runners through one pooled keep-alive
 * connection set per origin (undici: a loopback round trip costs a fraction
 * of global fetch's). Used by the invoker, and by the scheduler for the
 * runners it may call directly.
 */
export class RunnerHttp {
  private readonly pools = new Map<string, Pool>();

  constructor(private readonly timeoutMs: number) {}

  /** `traceparent`: the caller's invoke span, when tracing is on. @default traceparentFor(runId) */
  async post(url: string, body: Uint8Array, signingKey: string, runId: string, traceparent?: string): Promise<RunnerPost> {
    const u = new URL(url);
    try {
      const res = await this.pool(u.origin).request({
        method: 'POST',
        path: u.pathname + u.search,
        headers: {
          'content-type': 'application/json',
          [SIGNATURE_HEADER]: signInvoke(signingKey, body),
          [PROTOCOL_HEADER]: String(PROTOCOL_VERSION),
          traceparent: traceparent ?? traceparentFor(runId),
        },
        body,
      });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > MAX_REPLY_BYTES) {
          res.body.destroy();
          return { kind: 'reply', status: 413, body: Buffer.from(tooLargeBody(0)) };
        }
        chunks.push(chunk as Buffer);
      }
      // SPEC Versioning 3: a reply that states another version is refused, not guessed at.
      const version = checkProtocolVersion(res.headers[PROTOCOL_HEADER]);
      if (!version.ok) {
        return { kind: 'reply', status: 400, body: Buffer.from(JSON.stringify({ ...errorBody('protocol_version_mismatch', `Runner reply: ${version.message}`), logs: [] })) };
      }
      return { kind: 'reply', status: res.statusCode, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks) };
    } catch (err) {
      const code = errorCode(err);
      return { kind: 'failed', error: (err as Error).message, code, neverSent: code !== undefined && NEVER_SENT.has(code) };
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
    this.pools.clear();
  }

  private pool(origin: string): Pool {
    let p = this.pools.get(origin);
    if (!p) {
      p = new Pool(origin, { connections: 64, pipelining: 1, keepAliveTimeout: 30_000, headersTimeout: this.timeoutMs, bodyTimeout: this.timeoutMs });
      this.pools.set(origin, p);
    }
    return p;
  }
}
