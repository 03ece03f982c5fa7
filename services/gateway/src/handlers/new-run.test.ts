import { describe, expect, it } from '@jest/globals';
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
    let calls = 0;
    let signal!: () => void;
    const stored = new Promise<void>((r) => (signal = r));
    const t0 = Date.now();
    setTimeout(signal, 5);
    const got = await awaitNewRun(ids.run(), async () => (++calls === 1 ? Promise.reject(missing()) : 'found'), { waitMs: 5000, stored: () => stored });
    expect(got).toBe('found');
    expect(calls).toBe(2);
    expect(Date.now() - t0).toBeLessThan(45); // the first backoff with a signal is 50 ms
  });

  it('without a signal, backs off from 2 ms and gives up with the 404 at the deadline', async () => {
    let calls = 0;
    const t0 = Date.now();
    await expect(awaitNewRun(ids.run(), async () => (calls++, Promise.reject(missing())), { waitMs: 150 })).rejects.toBeInstanceOf(ServiceError);
    expect(calls).toBeGreaterThan(3);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(150);
  });

  it('does not wait for an old or foreign id, nor on other errors', async () => {
    let calls = 0;
    await expect(awaitNewRun('run_not_an_id', async () => (calls++, Promise.reject(missing())), { waitMs: 1000 })).rejects.toBeInstanceOf(ServiceError);
    await expect(awaitNewRun(ids.run(), async () => (calls++, Promise.reject(new Error('boom'))), { waitMs: 1000 })).rejects.toThrow('boom');
    expect(calls).toBe(2);
  });
});
