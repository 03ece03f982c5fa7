import { celInt, celKey } from './cel.js';
import type { ConcurrencySpec, WorkflowPolicy } from './policy.js';

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

