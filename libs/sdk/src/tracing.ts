import type * as OTel from '@opentelemetry/api';
import type { InvokeRequestBody } from '@dws/protocol';

type Api = typeof OTel;

/** The OTel API once looked for: undefined before, null when it is not installed. */
let api: Api | null | undefined;
let loading: Promise<void> | undefined;

/**
 * Look for `@opentelemetry/api` once, on the first invoke. It is an optional
 * peer dependency: a runner without it runs exactly as before, and one with
 * it but no tracer provider registered makes no-op spans only (the API's own
 * no-ops, which `startPassTrace` notices and then drops). Undefined once
 * settled, so later invokes pay nothing.
 */
export function loadOtel(): Promise<void> | undefined {
  if (api !== undefined) return undefined;
  loading ??= import('@opentelemetry/api').then(
    (m) => {
      api = m;
    },
    () => {
      api = null;
    },
  );
  return loading;
}

/** The spans of one pass on the runner. */
export interface PassTrace {
  /** Run a new step's function inside its `step.run` span, which is the active context meanwhile (the user's own spans nest in it). */
  step(name: string, id: string, fn: () => unknown): Promise<unknown>;
  /** End `workflow.pass` with the reply's status (4xx and 5xx are errors: `error` is what the handler threw). */
  end(status: number, error?: unknown): void;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * `workflow.pass` for this invoke, continuing `ctx.traceparent` (the
 * service's invoke span), or undefined when tracing is off here (no OTel
 * API, or no tracer provider registered: the span would not record).
 */
export function startPassTrace(ctx: InvokeRequestBody['ctx']): PassTrace | undefined {
  const o = api;
  if (!o) return undefined;
  const tracer = o.trace.getTracer('@dws/sdk');
  let parent = o.context.active();
  const m = typeof ctx.traceparent === 'string' ? TRACEPARENT.exec(ctx.traceparent) : null;
  if (m) parent = o.trace.setSpanContext(parent, { traceId: m[1]!, spanId: m[2]!, traceFlags: parseInt(m[3]!, 16) & 1, isRemote: true });
  const pass = tracer.startSpan(
    'workflow.pass',
    {
      kind: o.SpanKind.SERVER,
      attributes: { 'dws.run.id': ctx.runId, 'dws.workflow': ctx.workflow, 'dws.attempt': ctx.attempt, ...(ctx.app ? { 'dws.app': ctx.app } : {}) },
    },
    parent,
  );
  if (!pass.isRecording()) {
    pass.end();
    return undefined;
  }
  const passCtx = o.trace.setSpan(parent, pass);
  const fail = (span: OTel.Span, err: unknown) => {
    span.recordException(err instanceof Error ? err : String(err));
    span.setStatus({ code: o.SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
  };
  return {
    async step(name, id, fn) {
      const span = tracer.startSpan('step.run', { attributes: { 'dws.step.name': name, 'dws.step.id': id } }, passCtx);
      try {
        return await o.context.with(o.trace.setSpan(passCtx, span), fn);
      } catch (err) {
        fail(span, err);
        throw err;
      } finally {
        span.end();
      }
    },
    end(status, error) {
      pass.setAttribute('dws.reply.status', status);
      if (status >= 400) fail(pass, error ?? `invoke reply ${status}`);
      pass.end();
    },
  };
}
