import { describe, expect, it, jest } from '@jest/globals';
import { notFound, ServiceError } from '@dws/protocol';
import { ids } from '@dws/runtime';
import { awaitNewRun } from './new-run.js';

const missing = () => {
  const e = notFound('run');
  if (e.code !== 'run_not_found') throw new Error(`notFound('run') is ${e.code}`);
  return e;
};

describe('awaitNewRun', () => {
  it('re-reads a fresh run at once when it is signalled stored, not after its backoff', async () => {
    // Timers are frozen: the backoff's (50 ms with a signal) never fires, so only the signal can
    // let the re-read go (a wall-clock bound here failed under a loaded CI machine).
    jest.useFakeTimers({ doNotFake: ['Date', 'setImmediate', 'nextTick', 'queueMicrotask'] });
    try {
      let calls = 0;
      let signal!: () => void;
      const stored = new Promise<void>((r) => (signal = r));
      let got: string | undefined;
      const done = awaitNewRun(ids.run(), async () => (++calls === 1 ? Promise.reject(missing()) : 'found'), { waitMs: 5000, stored: () => stored }).then(
        (v) => (got = v),
      );
      const settle = () => new Promise((r) => setImmediate(r));
      await settle();
      expect(calls).toBe(1);
      signal();
      await settle();
      expect(got).toBe('found');
      expect(calls).toBe(2);
      await done;
    } finally {
      jest.useRealTimers();
    }
  });

  it('without a signal, backs off from 2 ms and gives up with the 404 at the deadline', async () => {
    let calls = 0;
    const t0 = Date.now();
    await expect(awaitNewRun(ids.run(), async () => (calls++, Promise.reject(missing())), { waitMs: 150 })).rejects.toBeInstanceOf(ServiceError);
    // 2, 4, 8, 16, 32, 64 ms apart: a handful of reads, not a busy loop of them.
    expect(calls).toBeGreaterThan(3);
    expect(calls).toBeLessThanOrEqual(10);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(150);
  });

  it('does not wait for an old or foreign id, nor on other errors', async () => {
    let calls = 0;
    await expect(awaitNewRun('run_not_an_id', async () => (calls++, Promise.reject(missing())), { waitMs: 1000 })).rejects.toBeInstanceOf(ServiceError);
    await expect(awaitNewRun(ids.run(), async () => (calls++, Promise.reject(new Error('boom'))), { waitMs: 1000 })).rejects.toThrow('boom');
    expect(calls).toBe(2);
  });
});
