import { celInt, celKey, type ConcurrencySpec, type WorkflowPolicy } from '@dws/cel';

/** What CEL keys, filters and priorities read: `event.id`, `event.name`, `event.data`, `event.ts` (epoch ms). */
export type EventVars = {
  event: { id: string; name: string; data: unknown; ts: number };
};

/**
 * A flow-control key over the event: '' without an expression, and '' when
 * it fails to evaluate (a missing field): such events share one bucket
 * rather than escaping the limit.
 */
export function gateKey(expr: string | undefined, vars: EventVars): string {
  return expr ? (celKey(expr, vars) ?? '') : '';
}

/**
 * The idempotency key, or undefined when it does not evaluate: an event
 * without the field is not deduplicated against every other such event.
 */
export function idempotencyKey(expr: string, vars: EventVars): string | undefined {
  const k = celKey(expr, vars);
  return k === undefined || k === '' ? undefined : k;
}

/** The StartRun fields the scheduler enforces (concurrency, priority, singleton). */
export interface RunFields {
  concurrencyKey: string;
  concurrencyLimit: number;
  concurrencyKey2: string;
  concurrencyLimit2: number;
  concurrencyShared2: boolean;
  priority: bigint;
  singletonKey: string;
  singletonMode: string;
}

/** A first constraint that never holds a run back: the slot an env-scoped constraint alone is checked beside. */
const UNLIMITED = 2_147_483_647;

/**
 * The scheduler's two slots: a workflow's own constraints first, and an
 * env-scoped one (shared by the workspace's workflows) always second, the
 * slot whose holders it counts across workflows; alone, it gets an
 * unlimited first.
 */
export function constraintsInSlots(cs: ConcurrencySpec[]): (ConcurrencySpec | undefined)[] {
  const own = cs.filter((c) => c.scope !== 'env');
  const shared = cs.find((c) => c.scope === 'env');
  if (!shared) return own;
  return [own[0] ?? { limit: UNLIMITED }, shared];
}

export function runFields(policy: WorkflowPolicy | undefined, vars: EventVars): RunFields {
  // A queued singleton is a slot of limit 1 per key (never beside concurrency: the policy refuses that),
  // which the scheduler lets its run hold from start to end.
  const queued = policy?.singleton?.mode === 'queue' ? [{ limit: 1, ...(policy.singleton.key && { key: policy.singleton.key }) }] : [];
  const [c1, c2] = constraintsInSlots(policy?.concurrency ?? queued);
  return {
    concurrencyKey: c1 ? gateKey(c1.key, vars) : '',
    concurrencyLimit: c1?.limit ?? 0,
    concurrencyKey2: c2 ? gateKey(c2.key, vars) : '',
    concurrencyLimit2: c2?.limit ?? 0,
    concurrencyShared2: c2?.scope === 'env',
    priority: BigInt(policy?.priority ? (celInt(policy.priority, vars) ?? 0) : 0),
    singletonKey: policy?.singleton ? gateKey(policy.singleton.key, vars) : '',
    singletonMode: policy?.singleton?.mode ?? '',
  };
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
  /** Absent when no run starts for it (dropped, skipped, deduped, suspended). */
  runId?: string;
  skipped: boolean;
  dropped: boolean;
  debounced: boolean;
  batched: boolean;
  deduped: boolean;
}

export const entry = (app: string, workflow: string, over: Partial<TriggeredEntry> = {}): TriggeredEntry => ({
  workflow, app, skipped: false, dropped: false, debounced: false, batched: false, deduped: false, ...over,
});
