import { invalid } from '@dws/protocol';

/** A query or body value that names something: a non-empty string, else undefined. */
export const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** A timestamp column (postgres.js gives a Date, PGlite may give text) as RFC 3339. */
export const iso = (v: Date | string): string => (v instanceof Date ? v : new Date(v)).toISOString();

/** SPEC Limits: a log or list page, 100 by default, over 1000 clamped to 1000 (GET /events, /events/scheduled, /schedules). */
export function listLimit(v: unknown): number {
  const n = v === undefined ? 100 : Number(v);
  if (!Number.isInteger(n) || n < 1) throw invalid('invalid_limit', 'limit must be an integer from 1 to 1000.');
  return Math.min(1000, n);
}
