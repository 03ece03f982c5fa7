import { parseWorkflowPolicy, runFields } from '@dws/cel';
import { slotFields, type SlotFields } from './slot-fields.js';

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
  return slotFields({ ...f, holdsSlots: f.singletonMode === 'queue' });
}
