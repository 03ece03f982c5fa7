import { describe, expect, it } from '@jest/globals';
import { runScenario } from '../test/scenario.js';
import { collectWhenQuiet, QUIET_GARBAGE_BYTES, quietCollectionDue } from './heap.js';

const MiB = 1024 * 1024;

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

/** What a quiet-gc-process.ts scenario saw: the live-heap readings before and after, the quiet collections run (first, and in all), the held arrays. */
interface Seen {
  liveBefore: number;
  liveAfter?: number;
  callsAtFirst?: number;
  calls: number;
  held: number;
}

describe('collectWhenQuiet', () => {
  it('collects the garbage of a quiet process, and then waits for more', async () => {
    const seen = await runScenario<Seen>('quiet-gc-process.ts', 'quiet');
    expect(seen.callsAtFirst).toBe(1);
    // That collection found the 8 MiB live: nothing more past it, so no second one.
    expect(seen.liveAfter).toBeGreaterThanOrEqual(seen.liveBefore + 6 * MiB);
    expect(seen.calls).toBe(1);
    expect(seen.held).toBe(1_000);
  }, 60_000);

  it('leaves a busy process alone', async () => {
    const seen = await runScenario<Seen>('quiet-gc-process.ts', 'busy');
    expect(seen.calls).toBe(0);
    expect(seen.held).toBe(1_000);
  }, 60_000);

  it('is off at 0', () => {
    let calls = 0;
    collectWhenQuiet(0, () => calls++)();
    expect(calls).toBe(0);
  });
});
