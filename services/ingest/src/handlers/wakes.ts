import type { Bus } from '@dws/bus';
import type { Logger } from '@dws/log';
import { isServiceError } from '@dws/protocol';
import { callApi, WAKE_BATCH_MAX, type Caller } from '@dws/runtime';

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
  resolve: (o: WakeOutcome) => void;
}

/** Calls in flight per workspace; events arriving meanwhile wait for the next. */
const MAX_IN_FLIGHT = 2;
/** A call in flight longer than this no longer holds back the next batch. */
const SLOW_CALL_MS = 50;
/**
 * When the last call (of any workspace) left longer ago than this, it is a
 * quiet moment: the next event's call goes at once. Otherwise the events of
 * a turn go together at its end. "No call in flight" alone is no sign of
 * quiet in one process, where an answer comes back within the turn: every
 * event went in a call of its own (embedded W5 one at a time 3x slower).
 */
const QUIET_AFTER_MS = 1;
/** How long an old scheduler (no `waiters.wakeMany`, mid-upgrade) is asked one event at a time before trying again. */
const SINGLE_FOR_MS = 60_000;

/**
 * The wakes of ingested events, asked of the scheduler in batches: the
 * events of a workspace that arrive in one event-loop turn, or while its
 * calls are in flight, go in one `waiters.wakeMany` (one request and one
 * indexed read for all of them, where each event used to cost its own).
 * In a quiet moment the call goes at once (the 202 waits for its answer),
 * with all the events of the request that brought them. A batch carries
 * its first event's caller (workspace and request id): the others' traces
 * do not link to it.
 */
export class Wakes {
  private readonly queues = new Map<string, { items: Pending[]; inFlight: number }>();
  /** performance.now() of the last call: what tells a quiet moment. */
  private lastCall = -Infinity;
  private singleUntil = 0;

  constructor(private readonly d: { bus: Bus; log: Logger }) {}

  /** Never rejects: a wake that cannot be asked now comes back deferred. */
  wake(caller: Caller, body: string): Promise<WakeOutcome> {
    return new Promise((resolve) => {
      let q = this.queues.get(caller.workspaceId);
      if (!q) this.queues.set(caller.workspaceId, (q = { items: [], inFlight: 0 }));
      q.items.push({ caller, body, resolve });
      if (q.items.length > 1 || q.inFlight >= MAX_IN_FLIGHT) return;
      // In a quiet moment the call goes as soon as the caller's synchronous part is done (all the events of
      // one POST): ahead of the event's statement, as the 202 waits for its answer. Otherwise the events of
      // this turn go together at its end.
      const quiet = q.inFlight === 0 && performance.now() - this.lastCall > QUIET_AFTER_MS;
      if (quiet) queueMicrotask(() => this.drain(caller.workspaceId));
      else setImmediate(() => this.drain(caller.workspaceId));
    });
  }

  private drain(workspaceId: string): void {
    const q = this.queues.get(workspaceId);
    if (!q) return;
    while (q.items.length > 0 && q.inFlight < MAX_IN_FLIGHT) {
      const batch = q.items.splice(0, WAKE_BATCH_MAX);
      q.inFlight++;
      this.lastCall = performance.now();
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        clearTimeout(slow);
        q.inFlight--;
        if (q.items.length > 0) this.drain(workspaceId);
        else if (q.inFlight === 0 && this.queues.get(workspaceId) === q) this.queues.delete(workspaceId);
      };
      // A slow call (an event with many waiters to resume) gives up its slot: the events behind it do not wait for it.
      const slow = setTimeout(release, SLOW_CALL_MS);
      void this.send(batch).then((outcomes) => {
        batch.forEach((p, i) => p.resolve(outcomes[i]!));
        release();
      });
    }
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
