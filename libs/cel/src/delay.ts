import { parseDuration } from './policy.js';

/** How far ahead an event may be delayed: a year, as far as a sleep or a run's timeout reaches. */
export const MAX_DELAY_MS = 365 * 86_400_000;
/** An absolute time: an RFC 3339 timestamp with its zone. */
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/i;

/** Date.parse rolls Feb 31 over into March: the day must exist in its month. */
function realDate(ts: string): boolean {
  const [y, m, d] = ts.slice(0, 10).split('-').map(Number) as [number, number, number];
  return new Date(Date.UTC(y, m - 1, d)).getUTCDate() === d;
}

/**
 * An event's `delay` (Trigger.dev's name; POST /events and step.emit): a
 * duration (ms, or text like "30s", "2h", "1d") or an RFC 3339 timestamp,
 * at most a year ahead. A time already past, or no delay, is now.
 * @returns the due time (epoch ms) when it is in the future, or the reason it is refused
 */
export function parseDelay(v: unknown, nowMs: number): { ok: true; dueAtMs?: number } | { ok: false; error: string } {
  if (v === undefined || v === null) return { ok: true };
  let at: number;
  if (typeof v === 'string' && TIMESTAMP.test(v.trim())) {
    at = Date.parse(v.trim());
    if (Number.isNaN(at) || !realDate(v.trim())) return { ok: false, error: `delay "${v}" is not a valid timestamp.` };
  } else {
    const ms = parseDuration(v);
    if (ms === undefined) {
      return { ok: false, error: 'delay must be a duration (ms, or text like "30s", "2h", "1d") or an RFC 3339 timestamp with its zone ("2026-12-24T09:00:00Z").' };
    }
    at = nowMs + ms;
  }
  if (at - nowMs > MAX_DELAY_MS) return { ok: false, error: 'delay is more than a year ahead (365 days at most).' };
  return at > nowMs ? { ok: true, dueAtMs: at } : { ok: true };
}
