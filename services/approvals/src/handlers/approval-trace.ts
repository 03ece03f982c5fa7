import { contextOf, linkTo, nowMs, runContext, SpanKind, tracer } from '@dws/telemetry';
import type { ApprovalRow } from '../domain/record.js';

export type ApprovalSpan = 'approval.request' | 'approval.decide' | 'approval.timeout';

/**
 * One span in the trace of the run an approval parks (docs/tracing.md),
 * made once the work it describes committed, from `startMs`: the gated call
 * listed (`approval.request`), a human's decision (`approval.decide`, linked
 * to the caller's request when it carried a `traceparent`), a timeout that
 * fired (`approval.timeout`). Between the pass that parked and the pass
 * that resumed, they show who or what the run waited on. A no-op with
 * tracing off.
 */
export function traceApproval(name: ApprovalSpan, runId: string, startMs: number, attributes: Record<string, string>, callerTraceparent?: string): void {
  const t = tracer();
  if (!t) return;
  t.startSpan(
    name,
    {
      kind: name === 'approval.decide' ? SpanKind.SERVER : SpanKind.INTERNAL,
      startTime: startMs,
      links: linkTo(contextOf(callerTraceparent)),
      attributes: { 'dws.run.id': runId, ...attributes },
    },
    runContext(runId),
  ).end(nowMs());
}

/** What the spans say of an approval record, with the status the traced work left it in. */
export const approvalAttributes = (a: ApprovalRow, status: string): Record<string, string> => ({
  'dws.step.name': a.step,
  'dws.approval.id': a.id,
  'dws.approval.tool': a.tool,
  'dws.approval.status': status,
});
