import { describe, expect, it } from '@jest/globals';
import { untilReachable } from './until-reachable.js';

function clock() {
  let t = 0;
  return { now: () => t, sleep: async (ms: number) => void (t += ms) };
}

describe('untilReachable', () => {
  it('retries with a doubling wait until the attempt succeeds, saying why each time', async () => {
    const c = clock();
    const warned: { attempt: number; retryInMs: number; err: string }[] = [];
    let calls = 0;
    const v = await untilReachable(
      'nats',
      async () => {
        if (++calls < 4) throw new Error('connection refused');
        return 'up';
      },
      { ...c, timeoutMs: 60_000, warn: (f) => warned.push(f) },
    );
    expect(v).toBe('up');
    expect(warned.map((w) => w.retryInMs)).toEqual([200, 400, 800]);
    expect(warned.every((w) => w.err === 'connection refused')).toBe(true);
  });

  it('gives up with the last error once the time is out, never waiting past it', async () => {
    const c = clock();
    const waits: number[] = [];
    let n = 0;
    const failed = untilReachable(
      'postgres',
      async () => {
        throw new Error(`refused ${++n}`);
      },
      { ...c, timeoutMs: 5_000, warn: (f) => waits.push(f.retryInMs) },
    );
    await expect(failed).rejects.toThrow('refused 6');
    expect(c.now()).toBe(5_000);
    expect(waits).toEqual([200, 400, 800, 1600, 2000]);
  });
});
