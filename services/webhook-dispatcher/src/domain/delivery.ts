import type { AttemptRow, DeliveryRow } from '../store/deliveries.js';

/** SPEC Webhook delivery statuses. */
export const STATUSES = ['pending', 'delivering', 'succeeded', 'failed', 'exhausted', 'dead'] as const;

const iso = (v: Date | string): string => new Date(v).toISOString();

/** The read shape of a delivery (SPEC Webhook delivery); nextAttemptAt only while it awaits a retry. */
export function deliveryRecord(r: DeliveryRow): Record<string, unknown> {
  return {
    id: r.id,
    app: r.app,
    ...(r.endpoint_id ? { endpointId: r.endpoint_id } : {}),
    url: r.url,
    eventKind: r.event_kind,
    ...(r.source_run_id && r.event_kind !== 'custom' ? { sourceRunId: r.source_run_id } : {}),
    payload: r.payload,
    status: r.status,
    attemptCount: r.attempt_count,
    maxAttempts: r.max_attempts,
    ...(r.last_status_code !== null ? { lastStatusCode: r.last_status_code } : {}),
    ...(r.status === 'failed' && r.next_attempt_at ? { nextAttemptAt: iso(r.next_attempt_at) } : {}),
    createdAt: iso(r.created_at),
    updatedAt: iso(r.updated_at),
  };
}

export function attemptRecord(a: AttemptRow): Record<string, unknown> {
  return {
    id: a.id,
    attempt: a.attempt,
    outcome: a.outcome,
    ...(a.status_code !== null ? { statusCode: a.status_code } : {}),
    ...(a.response_snippet !== null ? { responseSnippet: a.response_snippet } : {}),
    ...(a.error !== null ? { error: a.error } : {}),
    durationMs: a.duration_ms,
    createdAt: iso(a.created_at),
  };
}
