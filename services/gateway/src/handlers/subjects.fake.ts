import type { Listen } from './run-timelines.js';

const enc = new TextEncoder();

/** For unit tests: listeners by subject, as LiveHub keeps them, and a way to emit a frame to them. */
export class FakeSubjects implements Listen {
  readonly fns = new Map<string, Set<(data: Uint8Array) => void>>();
  listen(subject: string, fn: (data: Uint8Array) => void): () => void {
    const set = this.fns.get(subject) ?? new Set();
    set.add(fn);
    this.fns.set(subject, set);
    return () => {
      set.delete(fn);
      if (set.size === 0) this.fns.delete(subject);
    };
  }
  emit(subject: string, frame: unknown): void {
    for (const fn of this.fns.get(subject) ?? []) fn(enc.encode(JSON.stringify(frame)));
  }
}
