import { isServiceError } from '@dws/protocol';
import { contextOf, endSpan, SpanKind, traceparentOf, tracer, type Span } from '@dws/telemetry';
import type { AuthedCaller } from './auth.js';
import type { RouteSpec } from './route-table.js';

/**
 * The gateway's server span of one forwarded API call (tracing on): under
 * the request's `traceparent` when it carried one, else the root of a trace
 * of its own; the service it forwards to continues it (the caller's
 * traceparent becomes this span's). Undefined with tracing off.
 */
export function startRequestSpan(r: RouteSpec, caller: AuthedCaller): { span: Span; caller: AuthedCaller } | undefined {
  const t = tracer();
  if (!t) return undefined;
  const route = `/v1${r.path}`;
  const method = r.method.toUpperCase();
  const span = t.startSpan(
    `${method} ${route}`,
    { kind: SpanKind.SERVER, attributes: { 'http.request.method': method, 'http.route': route, 'dws.workspace.id': caller.workspaceId, 'dws.caller.via': caller.via ?? 'api' } },
    contextOf(caller.traceparent),
  );
  return { span, caller: { ...caller, traceparent: traceparentOf(span) } };
}

/** End it with the status the caller gets: a 5xx (or a failure that becomes one) marks it failed. */
export function endRequestSpan(span: Span, outcome: { status: number } | { error: unknown }): void {
  const status = 'status' in outcome ? outcome.status : isServiceError(outcome.error) ? outcome.error.status : 503;
  span.setAttribute('http.response.status_code', status);
  endSpan(span, status >= 500 ? ('error' in outcome ? outcome.error : `HTTP ${status}`) : undefined);
}
