import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Context, type Link, type Span, type SpanOptions, type Tracer } from '@opentelemetry/api';
import { formatTraceparent, parseTraceparent, runTraceIds } from './ids.js';

/** The tracer of this process once startTracing turned tracing on; undefined while it is off. */
let current: Tracer | undefined;
let started: Promise<Tracing> | undefined;

/**
 * The tracer to make spans with, or undefined when tracing is off. The one
 * check every instrumented hot path makes first: with tracing off nothing
 * else runs (no span objects, no ids, no clock reads).
 */
export function tracer(): Tracer | undefined {
  return current;
}

export interface TracingOptions {
  /** `service.name` of the spans this process exports (e.g. `scheduler`). */
  serviceName: string;
  /**
   * The environment to read: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full
   * URL) or `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL, `/v1/traces` is
   * appended) turn tracing on; `OTEL_SDK_DISABLED=true` or
   * `OTEL_TRACES_EXPORTER=none` keep it off. The OTel SDK itself also reads
   * its standard variables from the process environment (`OTEL_BSP_*`,
   * `OTEL_TRACES_SAMPLER`, `OTEL_EXPORTER_OTLP_HEADERS`...).
   */
  env: Readonly<Record<string, string | undefined>>;
}

export interface Tracing {
  /** True when spans are exported. */
  readonly enabled: boolean;
  /** Where spans go (OTLP/HTTP, JSON), when enabled. */
  readonly endpoint?: string;
  /** Export what is buffered now (the batch processor otherwise sends every few seconds). */
  flush(): Promise<void>;
  /** Export what is buffered, then stop: spans made afterwards are dropped. */
  shutdown(): Promise<void>;
}

const OFF: Tracing = { enabled: false, flush: async () => {}, shutdown: async () => {} };

/** The OTLP/HTTP traces URL the environment names, or undefined when tracing stays off. */
export function tracesEndpoint(env: TracingOptions['env']): string | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  if (env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === 'none') return undefined;
  const full = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (full) return full;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!base) return undefined;
  return `${base.replace(/\/+$/, '')}/v1/traces`;
}

/**
 * Turn tracing on for this process when the environment names an OTLP
 * endpoint (see TracingOptions.env): a tracer provider with a batch span
 * processor and the OTLP/HTTP exporter, registered as the global one. With
 * no endpoint it does nothing at all: the SDK and the exporter are not even
 * loaded, and the OTel API stays its no-op self. Once per process: a second
 * call returns the first one's handle.
 */
export function startTracing(opts: TracingOptions): Promise<Tracing> {
  const url = tracesEndpoint(opts.env);
  if (!url) return Promise.resolve(OFF);
  started ??= load(url, opts.serviceName);
  return started;
}

/**
 * These packages are CommonJS: node hands their exports over as named
 * exports, but a bundle's split chunk (dist/, scripts/build.mjs) only as
 * `default`. Either way, the exports.
 */
function commonJs<T extends object>(mod: T): T {
  const d = (mod as { default?: unknown }).default;
  return d !== null && typeof d === 'object' ? ({ ...(d as object), ...mod } as T) : mod;
}

async function load(url: string, serviceName: string): Promise<Tracing> {
  const [sdk, otlp, resources] = await Promise.all([
    import('@opentelemetry/sdk-trace-base').then(commonJs),
    import('@opentelemetry/exporter-trace-otlp-http').then(commonJs),
    import('@opentelemetry/resources').then(commonJs),
  ]);
  const random = new sdk.RandomIdGenerator();
  const provider = new sdk.BasicTracerProvider({
    resource: resources.defaultResource().merge(resources.resourceFromAttributes({ 'service.name': serviceName, 'service.namespace': 'dws' })),
    // A run's root span takes the run's own ids (startRunRoot); every other id is random.
    idGenerator: {
      generateTraceId: () => forced?.traceId ?? random.generateTraceId(),
      generateSpanId: () => forced?.spanId ?? random.generateSpanId(),
    },
    spanProcessors: [new sdk.BatchSpanProcessor(new otlp.OTLPTraceExporter({ url }))],
  });
  // Global, so code on the OTel API in this process (the runner SDK, a user's
  // instrumentation) exports through it too. Ours is used either way.
  trace.setGlobalTracerProvider(provider);
  current = provider.getTracer('dws');
  return {
    enabled: true,
    endpoint: url,
    flush: () => provider.forceFlush(),
    async shutdown() {
      current = undefined;
      started = undefined;
      await provider.shutdown();
      trace.disable();
    },
  };
}

let forced: { traceId: string; spanId: string } | undefined;

/** Now, as a fractional epoch-ms timestamp (span start times taken before the span is made). */
export const nowMs = (): number => performance.timeOrigin + performance.now();

/**
 * Start the root span of a run's trace, with the run's own trace id and
 * root span id (runTraceIds): the span every pass of the run hangs under
 * (runContext). Made by whoever creates the run; `links` tie it to the
 * request that caused it when that request came with a trace of its own.
 */
export function startRunRoot(t: Tracer, name: string, runId: string, options: SpanOptions = {}): Span {
  const ids = runTraceIds(runId);
  forced = { traceId: ids.traceId, spanId: ids.rootSpanId };
  try {
    // Synchronous: the provider's id generator reads `forced` inside this call.
    return t.startSpan(name, { ...options, root: true }, ROOT_CONTEXT);
  } finally {
    forced = undefined;
  }
}

/** A context whose parent is the root span of the run's trace (see startRunRoot). */
export function runContext(runId: string): Context {
  const ids = runTraceIds(runId);
  return trace.setSpanContext(ROOT_CONTEXT, { traceId: ids.traceId, spanId: ids.rootSpanId, traceFlags: TraceFlags.SAMPLED, isRemote: true });
}

/** The `traceparent` of the root span of the run's trace: a message about the run continues it. */
export function runTraceparent(runId: string): string {
  const ids = runTraceIds(runId);
  return formatTraceparent({ traceId: ids.traceId, spanId: ids.rootSpanId, traceFlags: TraceFlags.SAMPLED });
}

/** A context continuing a W3C `traceparent` value; undefined when there is none or it is malformed. */
export function contextOf(traceparent: unknown): Context | undefined {
  const sc = parseTraceparent(traceparent);
  return sc && trace.setSpanContext(ROOT_CONTEXT, sc);
}

/** The W3C `traceparent` of a span: what a callee continues. */
export const traceparentOf = (span: Span): string => formatTraceparent(span.spanContext());

/** Bus or HTTP headers carrying a span's context to the next process. */
export const headersOf = (span: Span): Record<string, string> => ({ traceparent: traceparentOf(span) });

/** The context carried by a message's headers (see headersOf), if any. */
export const contextFromHeaders = (headers: Readonly<Record<string, string>> | undefined): Context | undefined =>
  headers?.traceparent === undefined ? undefined : contextOf(headers.traceparent);

/** A link to the span a context carries (a run's root links to the request that started it). */
export function linkTo(ctx: Context | undefined): Link[] {
  const sc = ctx && trace.getSpanContext(ctx);
  return sc ? [{ context: sc }] : [];
}

/** End a span, marking it failed with `error` when one is given. */
export function endSpan(span: Span, error?: unknown): void {
  if (error !== undefined) {
    span.recordException(error instanceof Error ? error : String(error));
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  }
  span.end();
}

export { SpanKind, SpanStatusCode, trace, type Context, type Span, type Tracer };
