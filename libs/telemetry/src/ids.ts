import { createHash } from 'node:crypto';
import { TraceFlags, type SpanContext } from '@opentelemetry/api';

/**
 * The ids of a run's trace, derived from the run id alone: the trace id
 * (the first 16 bytes of SHA-256(runId)) and the span id of its root span
 * (the next 8). Every process that handles the run (ingest, any scheduler
 * replica on any pass, the invoker, approvals...) finds the run's trace
 * without anything stored or carried, and an operator finds it from the
 * run id. The trace id is the one runners have always received in
 * `ctx.traceparent` for the run.
 */
export function runTraceIds(runId: string): { traceId: string; rootSpanId: string } {
  const hex = createHash('sha256').update(runId).digest('hex');
  const rootSpanId = hex.slice(32, 48);
  // W3C: all-zero ids are invalid (2^-64: never in practice, but never invalid either).
  return { traceId: hex.slice(0, 32), rootSpanId: rootSpanId === '0000000000000000' ? '0000000000000001' : rootSpanId };
}

/** The trace id of a run (see runTraceIds). */
export const runTraceId = (runId: string): string => runTraceIds(runId).traceId;

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE = '00000000000000000000000000000000';
const ZERO_SPAN = '0000000000000000';

/** A W3C `traceparent` value as a remote span context; undefined when it is not a valid one. */
export function parseTraceparent(value: unknown): SpanContext | undefined {
  if (typeof value !== 'string') return undefined;
  const m = TRACEPARENT.exec(value.trim());
  if (!m || m[1] === 'ff' || m[2] === ZERO_TRACE || m[3] === ZERO_SPAN) return undefined;
  return { traceId: m[2]!, spanId: m[3]!, traceFlags: parseInt(m[4]!, 16) & TraceFlags.SAMPLED, isRemote: true };
}

/** The W3C `traceparent` value of a span context (version 00). */
export function formatTraceparent(sc: SpanContext): string {
  return `00-${sc.traceId}-${sc.spanId}-${sc.traceFlags & TraceFlags.SAMPLED ? '01' : '00'}`;
}
