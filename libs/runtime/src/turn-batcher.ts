/** How a TurnBatcher groups its items into calls. */
export interface TurnBatcherOptions<T> {
  /** Items per call. */
  maxItems: number;
  /** Calls in flight per key; items arriving meanwhile wait for the next. @default 2 */
  maxInFlight?: number;
  /** A call in flight longer than this no longer holds back the next one. @default 50 */
  slowCallMs?: number;
  /**
   * When the last call (of any key) left, and the last answer came, longer
   * ago than this, it is a quiet moment: the next item's call goes at once.
   * Otherwise the items of a turn go together at its end. "No call in
   * flight" alone is no sign of quiet in one process, where an answer comes
   * back within the turn, nor is a call that left a while ago when its
   * answer took that long to work out on the same thread. @default 1
   */
  quietAfterMs?: number;
  /** An item's weight (its bytes, say): a call holds at most `maxWeight`, or one item whatever it weighs. */
  weigh?: (item: T) => number;
  maxWeight?: number;
}

interface Pending<T, R> {
  item: T;
  resolve: (r: R) => void;
  reject: (err: unknown) => void;
}

/**
 * Items that arrive in one event-loop turn, or while their key's calls are
 * in flight, go out together in one call (`send`: one result per item, in
 * order; a rejection fails every item of the call). In a quiet moment an
 * item's call goes at once, with whatever the caller adds in the same
 * synchronous part, so a lone request pays no wait; under load the calls
 * grow instead of multiplying, which is what makes one-at-a-time traffic
 * cheap for whoever answers them (one message, one dispatch, one statement).
 */
export class TurnBatcher<T, R> {
  private readonly queues = new Map<string, { items: Pending<T, R>[]; inFlight: number }>();
  /** performance.now() of the last call sent or answered: what tells a quiet moment. */
  private lastBusy = -Infinity;
  private readonly maxInFlight: number;
  private readonly slowCallMs: number;
  private readonly quietAfterMs: number;

  constructor(
    private readonly send: (key: string, items: T[]) => Promise<R[]>,
    private readonly opts: TurnBatcherOptions<T>,
  ) {
    this.maxInFlight = opts.maxInFlight ?? 2;
    this.slowCallMs = opts.slowCallMs ?? 50;
    this.quietAfterMs = opts.quietAfterMs ?? 1;
  }

  add(key: string, item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      let q = this.queues.get(key);
      if (!q) this.queues.set(key, (q = { items: [], inFlight: 0 }));
      q.items.push({ item, resolve, reject });
      // A drain is already due (items waiting) or will follow a call's answer (slots full).
      if (q.items.length > 1 || q.inFlight >= this.maxInFlight) return;
      const quiet = q.inFlight === 0 && performance.now() - this.lastBusy > this.quietAfterMs;
      if (quiet) queueMicrotask(() => this.drain(key));
      else setImmediate(() => this.drain(key));
    });
  }

  private drain(key: string): void {
    const q = this.queues.get(key);
    if (!q) return;
    while (q.items.length > 0 && q.inFlight < this.maxInFlight) {
      const batch = q.items.splice(0, this.takeCount(q.items));
      q.inFlight++;
      this.lastBusy = performance.now();
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        clearTimeout(slow);
        q.inFlight--;
        if (q.items.length > 0) this.drain(key);
        else if (q.inFlight === 0 && this.queues.get(key) === q) this.queues.delete(key);
      };
      // A slow call gives up its slot: the items behind it do not wait for it.
      const slow = setTimeout(release, this.slowCallMs);
      let sent: Promise<R[]>;
      try {
        sent = this.send(key, batch.map((p) => p.item));
      } catch (err) {
        sent = Promise.reject(err);
      }
      sent.then(
        (results) => {
          this.lastBusy = performance.now();
          batch.forEach((p, i) => p.resolve(results[i]!));
          release();
        },
        (err: unknown) => {
          this.lastBusy = performance.now();
          for (const p of batch) p.reject(err);
          release();
        },
      );
    }
  }

  /** How many of the waiting items the next call takes: up to maxItems and maxWeight, at least one. */
  private takeCount(items: Pending<T, R>[]): number {
    const { weigh, maxWeight } = this.opts;
    const n = Math.min(items.length, this.opts.maxItems);
    if (!weigh || maxWeight === undefined) return n;
    let total = weigh(items[0]!.item);
    let i = 1;
    for (; i < n; i++) {
      total += weigh(items[i]!.item);
      if (total > maxWeight) break;
    }
    return i;
  }
}
