import { celKey, type EventVars } from '@dws/cel';

/**
 * The idempotency key, or undefined when it does not evaluate: an event
 * without the field is not deduplicated against every other such event.
 */
export function idempotencyKey(expr: string, vars: EventVars): string | undefined {
  const k = celKey(expr, vars);
  return k === undefined || k === '' ? undefined : k;
}

/**
 * GCRA parameters (the generic cell rate algorithm): one admission per
 * `intervalMs` on average, with `toleranceMs` of burst.
 * - rateLimit: `limit` per `period`, a burst of `limit`; the excess is dropped.
 * - throttle: `limit` per `period` spread evenly, a burst of `burst` (default 1); the excess waits.
 */
export function gcraParams(g: { limit: number; periodMs: number; burst?: number }, kind: 'rate_limit' | 'throttle'): { intervalMs: number; toleranceMs: number } {
  const intervalMs = Math.max(1, Math.floor(g.periodMs / g.limit));
  const burst = kind === 'rate_limit' ? g.limit : (g.burst ?? 1);
  return { intervalMs, toleranceMs: intervalMs * (burst - 1) };
}

/** One entry of the 202's `triggered` (SPEC POST /events): the run, or why there is none. */
export interface TriggeredEntry {
  workflow: string;
  app: string;
  /** Absent when no run starts for it (dropped, skipped, deduped, suspended, paused). */
  runId?: string;
  skipped: boolean;
  dropped: boolean;
  debounced: boolean;
  batched: boolean;
  deduped: boolean;
  /** The workflow is paused: the event starts no run of it. Present only then. */
  paused?: true;
  /** Paused with `hold`: the match is kept, and admitted once the workflow is resumed. Present only then. */
  held?: true;
}

export const entry = (app: string, workflow: string, over: Partial<TriggeredEntry> = {}): TriggeredEntry => ({
  workflow, app, skipped: false, dropped: false, debounced: false, batched: false, deduped: false, ...over,
});
