import type { Bus } from '@dws/bus';
import type { Logger } from '@dws/log';
import { isServiceError } from '@dws/protocol';
import { callApi, TurnBatcher, WAKE_BATCH_MAX, type Caller } from '@dws/runtime';

/** What asking the scheduler to wake an event's waiters came to. */
export interface WakeOutcome {
  woke: number;
  /** The scheduler could not be asked now: the wake rides the outbox (durable, applied later). */
  wakeDeferred: boolean;
}

/** One event's wake, as `waiters.wake` takes it (the JSON text of { name, data, id, ts }). */
interface Pending {
  caller: Caller;
  body: string;
}

/** How long an old scheduler (no `waiters.wakeMany`, mid-upgrade) is asked one event at a time before trying again. */
const SINGLE_FOR_MS = 60_000;

/**
 * The wakes of ingested events, asked of the scheduler in batches
 * (TurnBatcher, per workspace): the events of a workspace that arrive in one
 * event-loop turn, or while its calls are in flight, go in one
 * `waiters.wakeMany` (one request and one indexed read for all of them,
 * where each event used to cost its own). In a quiet moment the call goes
 * at once (the 202 waits for its answer), with all the events of the
 * request that brought them. A batch carries its first event's caller
 * (workspace and request id): the others' traces do not link to it.
 */
export class Wakes {
  private singleUntil = 0;
  private readonly batches = new TurnBatcher<Pending, WakeOutcome>((_ws, batch) => this.send(batch), { maxItems: WAKE_BATCH_MAX });

  constructor(private readonly d: { bus: Bus; log: Logger }) {}

  /** Never rejects: a wake that cannot be asked now comes back deferred. */
  wake(caller: Caller, body: string): Promise<WakeOutcome> {
    return this.batches.add(caller.workspaceId, { caller, body });
  }

  private async send(batch: Pending[]): Promise<WakeOutcome[]> {
    if (Date.now() < this.singleUntil) return Promise.all(batch.map((p) => this.one(p)));
    try {
      const res = await callApi(this.d.bus, 'scheduler', 'waiters.wakeMany', batch[0]!.caller, { rawBody: `{"events":[${batch.map((p) => p.body).join(',')}]}` });
      const woke = (JSON.parse(res.bodyJson ?? '{}') as { woke?: unknown }).woke;
      return batch.map((_, i) => ({ woke: Array.isArray(woke) && typeof woke[i] === 'number' ? woke[i] : 0, wakeDeferred: false }));
    } catch (err) {
      if (isServiceError(err) && err.code === 'route_not_found') {
        this.d.log.warn('the scheduler has no waiters.wakeMany (an older version): waking one event at a time for a minute');
        this.singleUntil = Date.now() + SINGLE_FOR_MS;
        return Promise.all(batch.map((p) => this.one(p)));
      }
      const outcome = this.failed(err, batch.length);
      return batch.map(() => outcome);
    }
  }

  private async one(p: Pending): Promise<WakeOutcome> {
    try {
      const res = await callApi(this.d.bus, 'scheduler', 'waiters.wake', p.caller, { rawBody: p.body });
      return { woke: (JSON.parse(res.bodyJson ?? '{}') as { woke?: number }).woke ?? 0, wakeDeferred: false };
    } catch (err) {
      return this.failed(err, 1);
    }
  }

  /**
   * A refusal (4xx) is the scheduler's answer: nothing to retry. Anything
   * else (no answer, or it failed on its side) may not have woken anyone:
   * the wake is queued durably, and applying it again wakes no one twice.
   */
  private failed(err: unknown, events: number): WakeOutcome {
    if (isServiceError(err) && err.status < 500) return { woke: 0, wakeDeferred: false };
    this.d.log.warn({ err, events }, 'waking waiters now failed; the wakes are queued durably');
    return { woke: 0, wakeDeferred: true };
  }
}
