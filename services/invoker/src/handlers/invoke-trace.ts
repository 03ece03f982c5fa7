import { contextFromHeaders, endSpan, runContext, SpanKind, traceparentOf, tracer, type Span } from '@dws/telemetry';

export interface TracedOptions {
  /** The requester's bus headers: the span continues the context they carry. */
  headers?: Readonly<Record<string, string>>;
  /** Without a context in `headers`, the span hangs under this run's root (its ids come from the run id). */
  runId?: string;
  attributes?: Record<string, string | number | boolean>;
  /** @default SpanKind.SERVER */
  kind?: SpanKind;
}

/**
 * Run an invoker handler inside a span (docs/tracing.md): it continues the
 * requester's trace (the scheduler's `runner.invoke`), or hangs under the
 * run's root when the request carried none. `fn` gets the span, to
 * describe what it did, and the traceparent the calls it makes carry on
 * (to a runner, to another replica). With tracing off it only calls
 * `fn(undefined, undefined)`.
 */
export async function traced<T>(name: string, o: TracedOptions, fn: (span: Span | undefined, traceparent: string | undefined) => Promise<T>): Promise<T> {
  const t = tracer();
  if (!t) return fn(undefined, undefined);
  const parent = contextFromHeaders(o.headers) ?? (o.runId ? runContext(o.runId) : undefined);
  const span = t.startSpan(name, { kind: o.kind ?? SpanKind.SERVER, ...(o.attributes && { attributes: o.attributes }) }, parent);
  let err: unknown;
  try {
    return await fn(span, traceparentOf(span));
  } catch (e) {
    err = e;
    throw e;
  } finally {
    endSpan(span, err);
  }
}
