import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { modes, ScriptedInvoker, startHarness, until, type Harness } from './harness.js';

jest.setTimeout(60_000);

/**
 * A replica whose lease on a run lapsed while it still drives it (a renewal
 * that came late: a stalled database, a blocked event loop) must not claim
 * that run again: a second drive under the same owner and pass passes every
 * guard, so the runner would get two passes and the run two writers.
 */
describe.each(modes())('scheduler leases (%s)', (mode) => {
  let h: Harness;
  let release: () => void = () => undefined;
  let held = false;
  const invoker = new ScriptedInvoker({ two: () => [{ run: 'a' }, { run: 'b' }] });
  beforeAll(async () => {
    // Renewals every 20 s: none comes while the test holds the pass.
    h = await startHarness(mode, invoker, { SERVICE_RUN_LEASE_MS: '60000' });
  });
  afterAll(async () => {
    release();
    await h?.close();
  });

  it('never claims a run it is driving, even with its lease lapsed', async () => {
    invoker.hold = async () => {
      held = true;
      await new Promise<void>((r) => (release = r));
    };
    const id = await h.start('two');
    await until(() => held, 10_000, 'a pass in flight');
    invoker.hold = undefined;
    await h.db.query(`update scheduler.runs set lease_until = now() - interval '1 second' where id = $1`, [id]);
    // Several claims go by with the run due: each throttled start makes the replica claim at once.
    for (let i = 0; i < 5; i++) {
      await h.start('two', {}, { flow: { notBeforeMs: BigInt(Date.now() + 3_600_000) }, direct: true });
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(invoker.bodies.filter((b) => b.ctx.runId === id)).toHaveLength(1);
    release();
    const run = await h.waitFor(id, ['succeeded']);
    expect(run.status).toBe('succeeded');
    expect([invoker.count(id, 'a'), invoker.count(id, 'b')]).toEqual([1, 1]);
  });
});
