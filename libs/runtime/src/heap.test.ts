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

/**
 * Runs `body` with 8 MiB held in the old generation since the last full collection and
 * collectWhenQuiet(100 ms) watching, given the count of collections it ran (each a real one).
 */
async function withHeldMemory(body: (a: { calls: () => number; liveBefore: number }) => Promise<void>): Promise<void> {
  const gc = fullCollection();
  const earlier = heapLiveBytes();
  gc();
  // Young garbage made before the collection's reading arrives, as a busy process or a loaded jest
  // worker makes it: it is not what the collection kept (it hid the held 8 MiB on CI).
  const junk: unknown[] = [];
  for (let i = 0; i < 60_000; i++) junk.push({ i, pad: [i, i, i, i, i, i, i, i, i, i, i, i, i, i] });
  junk.length = 0;
  // This collection's reading (a performance entry) arrives a little after it, later under load: an
  // earlier collection's, taken for it, may count what that one found (the held 8 MiB look counted).
  const deadline = Date.now() + 20_000;
  while (heapLiveBytes() === earlier && Date.now() < deadline) await sleep(20);
  const liveBefore = heapLiveBytes();
  let calls = 0;
  let held: number[][] | undefined = heldInOldGeneration();
  const stop = collectWhenQuiet(100, () => {
    calls++;
    gc();
  });
  try {
    await body({ calls: () => calls, liveBefore });
    expect(held.length).toBe(1_000);
  } finally {
    stop();
    held = undefined;
  }
}

describe('collectWhenQuiet', () => {
  it('collects the garbage of a quiet process, and then waits for more', () =>
    withHeldMemory(async ({ calls, liveBefore }) => {
      for (let i = 0; i < 50 && calls() === 0; i++) await sleep(20);
      expect(calls()).toBe(1);
      // That collection found the 8 MiB live: nothing more past it, so no second one.
      for (let i = 0; i < 50 && heapLiveBytes() < liveBefore + 6 * MiB; i++) await sleep(20);
      expect(heapLiveBytes()).toBeGreaterThanOrEqual(liveBefore + 6 * MiB);
      await sleep(350);
      expect(calls()).toBe(1);
    }));

  it('leaves a busy process alone', () =>
    withHeldMemory(async ({ calls }) => {
      // Busy 30 ms of every ~35 for a second: well past the quiet share.
      const until = Date.now() + 1_000;
      while (Date.now() < until) {
        const spin = Date.now() + 30;
        while (Date.now() < spin);
        await sleep(5);
      }
      expect(calls()).toBe(0);
    }));

  it('is off at 0', () => {
    let calls = 0;
    collectWhenQuiet(0, () => calls++)();
    expect(calls).toBe(0);
  });
});
