/**
 * Group commit: items submitted in the same event-loop turn, or while a
 * write is in flight, go together in the next write. The first item of a
 * quiet moment is written at the end of its turn (no timer); under load,
 * one statement carries what queued meanwhile, so a batch costs one round
 * trip, one WAL flush and one wake-up of Postgres instead of one each.
 *
 * `write` gets a batch with at most one item per key (so a batch never
 * holds two writes of the same row: the scheduler's checkpoints by run, the
 * gateway's run ends by run) and answers each item in order. Without
 * `keyOf` any items go together (reads batched the same way: each is
 * answered by a statement sent after it was submitted). When a batch fails,
 * each of its items is written alone, so one bad item fails only its own caller.
 */
export class GroupCommit<T, R> {
  private queue: { item: T; resolve: (r: R) => void; reject: (err: unknown) => void }[] = [];
  private writing = false;

  constructor(
    private readonly write: (items: T[]) => Promise<R[]>,
    private readonly keyOf?: (item: T) => string,
    private readonly maxBatch = 200,
  ) {}

  submit(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      // The first item of a quiet moment waits only for the rest of this event-loop turn
      // (items that arrived together go together).
      this.queue.push({ item, resolve, reject });
      if (!this.writing) {
        this.writing = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = this.take();
        try {
          const out = await this.write(batch.map((b) => b.item));
          batch.forEach((b, i) => b.resolve(out[i]!));
        } catch (err) {
          if (batch.length === 1) {
            batch[0]!.reject(err);
            continue;
          }
          for (const b of batch) await this.write([b.item]).then((out) => b.resolve(out[0]!), b.reject);
        }
      }
    } finally {
      this.writing = false;
    }
  }

  /** Up to maxBatch queued items, one per key; the rest stay queued in order. */
  private take(): typeof this.queue {
    const keys = new Set<string>();
    const batch: typeof this.queue = [];
    const rest: typeof this.queue = [];
    for (const q of this.queue) {
      const key = this.keyOf?.(q.item);
      if (batch.length < this.maxBatch && (key === undefined || !keys.has(key))) {
        if (key !== undefined) keys.add(key);
        batch.push(q);
      } else rest.push(q);
    }
    this.queue = rest;
    return batch;
  }
}
