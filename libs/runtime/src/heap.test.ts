import { describe, expect, it } from '@jest/globals';
import { collectWhenQuiet, fullCollection, heapLiveBytes, QUIET_GARBAGE_BYTES, quietCollectionDue } from './heap.js';

const MiB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('quietCollectionDue', () => {
  it('collects a quiet process holding garbage past its last full collection', () => {
    expect(quietCollectionDue({ utilization: 0.02, usedBytes: 30 * MiB, liveBytes: 20 * MiB })).toBe(true);
    expect(quietCollectionDue({ utilization: 0.02, usedBytes: 20 * MiB + QUIET_GARBAGE_BYTES, liveBytes: 20 * MiB })).toBe(true);
  });

  it('leaves a busy process, or one with little garbage, to V8', () => {
    expect(quietCollectionDue({ utilization: 0.5, usedBytes: 60 * MiB, liveBytes: 20 * MiB })).toBe(false);
    expect(quietCollectionDue({ utilization: 0.02, usedBytes: 23 * MiB, liveBytes: 20 * MiB })).toBe(false);
  });
});

/** 8 MiB the last full collection did not see, promoted to the old generation (scavenges only promote what survived two). */
function heldInOldGeneration(): number[][] {
  const held = Array.from({ length: 1_000 }, (_, i) => new Array<number>(1000).fill(i));
  // Short-lived garbage (kept in a ring, so the compiler cannot elide it) for a few scavenges.
  const ring: unknown[] = new Array(1024);
  for (let i = 0; i < 400_000; i++) ring[i % 1024] = { i, a: [i, i + 1] };
  return held;
}

describe('collectWhenQuiet', () => {
  // A real full collection, counted: what the process keeps alive is read off the gc entries it makes.
  const counted = () => {
    const gc = fullCollection();
    const c = { calls: 0, collect: () => (c.calls++, gc()) };
    return c;
  };

  it('collects the garbage of a quiet process, and then waits for more', async () => {
    fullCollection()();
    await sleep(50);
    const c = counted();
    let held: number[][] | undefined = heldInOldGeneration();
    const stop = collectWhenQuiet(100, c.collect);
    try {
      for (let i = 0; i < 50 && c.calls === 0; i++) await sleep(20);
      expect(c.calls).toBe(1);
      // The collection's reading counts them as live now: no garbage, no second collection.
      for (let i = 0; i < 50 && heapLiveBytes() < 8 * MiB; i++) await sleep(20);
      await sleep(350);
      expect(c.calls).toBe(1);
      expect(held.length).toBe(1_000);
    } finally {
      stop();
      held = undefined;
    }
  });

  it('leaves a busy process alone', async () => {
    fullCollection()();
    await sleep(50);
    const c = counted();
    let held: number[][] | undefined = heldInOldGeneration();
    const stop = collectWhenQuiet(100, c.collect);
    try {
      // Busy 30 ms of every ~35 for a second: well past the quiet share.
      const until = Date.now() + 1_000;
      while (Date.now() < until) {
        const spin = Date.now() + 30;
        while (Date.now() < spin);
        await sleep(5);
      }
      expect(c.calls).toBe(0);
      expect(held.length).toBe(1_000);
    } finally {
      stop();
      held = undefined;
    }
  });

  it('is off at 0', () => {
    const c = counted();
    collectWhenQuiet(0, c.collect)();
    expect(c.calls).toBe(0);
  });
});
