import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { modes, ScriptedInvoker, startHarness, until, type Harness } from './harness.js';

jest.setTimeout(60_000);

/**
 * A rolling restart: a scheduler told to stop finishes the pass in flight,
 * applies it, and hands the run back (no lease left) so another replica
 * takes it at once rather than after its lease.
 */
describe.each(modes())('scheduler drain on stop (%s)', (mode) => {
  let h: Harness;
  let release: () => void = () => undefined;
  let inFlight = false;
  const invoker = new ScriptedInvoker({ two: () => [{ run: 'a' }, { run: 'b' }] });
  beforeAll(async () => {
    h = await startHarness(mode, invoker, { SERVICE_RUN_LEASE_MS: '60000' });
    invoker.hold = async () => {
      inFlight = true;
      await new Promise<void>((r) => (release = r));
    };
  });
  afterAll(async () => h?.close());

  it('finishes the pass in flight, stores it, and leaves the run unleased', async () => {
    const id = await h.start('two');
    await until(() => inFlight, 10_000, 'a pass in flight');
    const stopping = h.scheduler.stop();
    // The pass still gets applied after stop began.
    await new Promise((r) => setTimeout(r, 100));
    release();
    await stopping;
    const [run] = await h.db.query<{ status: string; lease_owner: string | null; step_count: number; due: boolean }>(
      'select status, lease_owner, step_count, lease_until <= now() as due from scheduler.runs where id = $1',
      [id],
    );
    expect(run).toMatchObject({ status: 'running', lease_owner: null, due: true });
    expect(Number(run!.step_count)).toBe(1);
  });
});
