/**
 * Reads that are never older than the call: `read(key)` resolves with a
 * value read by a query that started after the call was made, so a write
 * committed before the call is seen. Calls that arrive while a query for
 * their key is running share the next one (one query per key in flight, one
 * queued), so the cost under load is a query per round trip, not per call.
 */
export class FreshRead<V> {
  private readonly slots = new Map<string, { running: Promise<V>; next?: Promise<V> }>();

  constructor(private readonly query: (key: string) => Promise<V>) {}

  read(key: string): Promise<V> {
    const slot = this.slots.get(key);
    if (!slot) return this.start(key);
    // The running query may have started before this call: wait for the one after it.
    slot.next ??= slot.running.then(
      () => this.start(key),
      () => this.start(key),
    );
    return slot.next;
  }

  private start(key: string): Promise<V> {
    const running = this.query(key);
    this.slots.set(key, { running });
    const done = () => {
      if (this.slots.get(key)?.running === running && !this.slots.get(key)?.next) this.slots.delete(key);
    };
    running.then(done, done);
    return running;
  }
}
