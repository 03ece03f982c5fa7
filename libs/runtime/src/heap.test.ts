import { describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { collectWhenQuiet, QUIET_GARBAGE_BYTES, quietCollectionDue } from './heap.js';

const MiB = 1024 * 1024;
const run = promisify(execFile);

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

/** What a scenario saw: the live-heap readings before and after, the quiet collections run (first, and in all), the held arrays. */
interface Seen {
  liveBefore: number;
  liveAfter?: number;
  callsAtFirst?: number;
  calls: number;
  held: number;
}

/** Runs one of quiet-gc-process.ts's scenarios in a fresh process (why there: its header), returns what it saw. */
async function scenario(name: 'quiet' | 'busy'): Promise<Seen> {
  const tsx = createRequire(import.meta.url).resolve('tsx');
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'test', 'quiet-gc-process.ts');
  const { stdout } = await run(process.execPath, ['--import', tsx, script, name], { timeout: 30_000 });
  return JSON.parse(stdout) as Seen;
}

describe('collectWhenQuiet', () => {
  it('collects the garbage of a quiet process, and then waits for more', async () => {
    const seen = await scenario('quiet');
    expect(seen.callsAtFirst).toBe(1);
    // That collection found the 8 MiB live: nothing more past it, so no second one.
    expect(seen.liveAfter).toBeGreaterThanOrEqual(seen.liveBefore + 6 * MiB);
    expect(seen.calls).toBe(1);
    expect(seen.held).toBe(1_000);
  }, 40_000);

  it('leaves a busy process alone', async () => {
    const seen = await scenario('busy');
    expect(seen.calls).toBe(0);
    expect(seen.held).toBe(1_000);
  }, 40_000);

  it('is off at 0', () => {
    let calls = 0;
    collectWhenQuiet(0, () => calls++)();
    expect(calls).toBe(0);
  });
});
