import { parseWorkflowPolicy, runFields } from '@dws/cel';

/** The flow-control columns of a run the scheduler itself inserts (children, onFailure runs, replays). */
export interface SlotFields {
  /** null: no limit. */
  concurrencyKey: string | null;
  concurrencyLimit: number;
  concurrencyKey2: string | null;
  concurrencyLimit2: number;
  concurrencyShared2: boolean;
  priority: number;
  /** A queued singleton: holds its slot from admission to its end. */
  holdsSlots: boolean;
}

/**
 * A child run's flow control (SPEC RunWorkflow): its workflow's concurrency
 * constraints, priority and a queued singleton's slot, each key evaluated
 * over the child's input as `event.data` (a child has no event: `event.id`
 * and `event.name` are ''), as ingest evaluates them over an event.
 * Singleton skip and cancel, throttle, rate limits, debounce, batching and
 * idempotency decide whether and when an event starts a run: a child the
 * parent asked for starts, so they do not apply. Undefined when nothing
 * applies.
 */
export function invokedRunSlots(config: unknown, inputJson: string, nowMs: number): SlotFields | undefined {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) return undefined;
  const { policy } = parseWorkflowPolicy(config as Record<string, unknown>);
  if (!policy.concurrency && policy.singleton?.mode !== 'queue' && !policy.priority) return undefined;
  const f = runFields(policy, { event: { id: '', name: '', data: JSON.parse(inputJson) as unknown, ts: nowMs } });
  const limited = f.concurrencyLimit > 0;
  return {
    concurrencyKey: limited ? f.concurrencyKey : null,
    concurrencyLimit: f.concurrencyLimit,
    concurrencyKey2: limited && f.concurrencyLimit2 > 0 ? f.concurrencyKey2 : null,
    concurrencyLimit2: limited ? f.concurrencyLimit2 : 0,
    concurrencyShared2: limited && f.concurrencyLimit2 > 0 && f.concurrencyShared2,
    priority: Number(f.priority),
    holdsSlots: limited && f.singletonMode === 'queue',
  };
}
