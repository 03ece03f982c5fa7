import { invalid } from '@dws/protocol';

/** SPEC Limits: a log or list page, 100 by default, over 1000 clamped to 1000 (GET /events, /events/scheduled, /schedules). */
export function listLimit(v: unknown): number {
  const n = v === undefined ? 100 : Number(v);
  if (!Number.isInteger(n) || n < 1) throw invalid('invalid_limit', 'limit must be an integer from 1 to 1000.');
  return Math.min(1000, n);
}
