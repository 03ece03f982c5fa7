import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Gates } from '@dws/testing';
import { ids } from '@dws/runtime';
import { hashStepId } from '@dws/protocol';
import { listApproval, modes, ScriptedInvoker, startHarness, until, WS, type Harness } from './harness.js';

jest.setTimeout(60_000);

const HOUR = 3_600_000;
const invoker = new ScriptedInvoker({
  sleeper: () => [{ run: 'first' }, { sleep: 'nap', ms: HOUR }],
  waiter: () => [{ wait: 'settled', event: 'bank/settled', if: 'event.data.id == "c-1"', timeoutMs: HOUR }],
  gated: () => [{ approval: 'refund-gate' }],
  parent: () => [{ child: 'kid', workflow: 'sleeper' }],
  flaky: () => [{ run: 'charge', fn: () => { throw new Error('card declined'); } }],
  quick: () => [{ run: 'only' }],
  // One workflow, so its runs share a key's slots: one executes a step until the test lets it go (holding
  // its slot meanwhile), one sleeps, one is quick.
  limited: (event) =>
    event.data.as === 'worker' ? [{ run: 'first' }, { work: 'busy', until: () => gates.wait(event.data.key) }]
    : event.data.as === 'sleeper' ? [{ run: 'first' }, { sleep: 'nap', ms: HOUR }]
    : [{ run: 'only' }],
});
const gates = new Gates();

/**
 * "Why is it not moving?" end to end on the scheduler: runs driven by the
 * real engine into each parked state, then GET /runs/{id} (runs.get) must
 * name what each waits for. The no-runner state is written as the engine
 * writes it (the scripted invoker always has a runner).
 */
describe.each(modes())('waitingFor on the run read (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode, invoker);
    await h.register('app', [{ name: 'flaky', retry: { maxAttempts: 5 } }]);
  });
  afterAll(async () => {
    gates.openAll();
    await h?.close();
  });

  /** The run read; undefined until StartRun (published on the bus) is stored. */
  const read = async (id: string) => (await h.call('runs.get', { params: { id } }).catch(() => undefined))?.body;
  /** Poll the read until waitingFor has `kind` (the engine parks asynchronously); fail with the last answer. */
  const waitingFor = async (id: string, kind: string) => {
    const deadline = Date.now() + 15_000;
    let last: any;
    for (;;) {
      last = (await read(id)) ?? {};
      if (last.waitingFor?.kind === kind) return last.waitingFor;
      if (['succeeded', 'failed', 'cancelled'].includes(last.status)) throw new Error(`run ended ${last.status} while waiting for ${kind}`);
      if (Date.now() > deadline) throw new Error(`waitingFor never became ${kind}: ${JSON.stringify(last.waitingFor)} (${last.status})`);
      await new Promise((r) => setTimeout(r, 25));
    }
  };
  const near = (iso: string, atMs: number, slackMs = 10_000) => expect(Math.abs(Date.parse(iso) - atMs)).toBeLessThan(slackMs);

  it('a sleeping run names its step and wake time', async () => {
    const id = await h.start('sleeper');
    const w = await waitingFor(id, 'sleep');
    expect(w.step).toBe('nap');
    near(w.until, Date.now() + HOUR);
  });

  it('a waiting run names the event, its CEL and the timeout', async () => {
    const id = await h.start('waiter');
    const w = await waitingFor(id, 'event');
    expect(w).toMatchObject({ step: 'settled', event: 'bank/settled', if: 'event.data.id == "c-1"' });
    near(w.timeoutAt, Date.now() + HOUR);
  });

  it('a run parked on an approval names the step, and reads as needing attention', async () => {
    const id = await h.start('gated');
    expect(await waitingFor(id, 'approval')).toEqual({ kind: 'approval', step: 'refund-gate' });
    // needsAttention once the approvals service has listed the approval (played here).
    await listApproval(h.bus, id, hashStepId('refund-gate'));
    await until(async () => (await read(id)).needsAttention === true, 10_000, 'needsAttention');
  });

  it('a parent names its child run, which the steps read links too', async () => {
    const id = await h.start('parent');
    const w = await waitingFor(id, 'child');
    expect(w).toMatchObject({ step: 'kid', workflow: 'sleeper' });
    expect((await read(w.childRunId)).workflow).toBe('sleeper');
    const steps = (await h.call('runs.steps', { params: { id } })).body;
    expect(steps.find((s: any) => s.name === 'kid').childRunId).toBe(w.childRunId);
  });

  it('a paused run names who paused it', async () => {
    const id = await h.start('sleeper');
    await waitingFor(id, 'sleep');
    await h.call('runs.pause', { params: { id } });
    const w = await waitingFor(id, 'paused');
    expect(w.by).toBe('tester');
    near(w.since, Date.now());
  });

  it('a run behind a concurrency limit names the key, the limit and the holders', async () => {
    const key = `user-${mode}`;
    const flow = { flow: { concurrencyLimit: 1, concurrencyKey: key } };
    const first = await h.start('limited', { as: 'worker', key }, flow);
    await waitingFor(first, 'running');
    const second = await h.start('limited', { as: 'sleeper' }, flow);
    expect(await waitingFor(second, 'concurrency')).toEqual({ kind: 'concurrency', key, limit: 1, holding: 1 });
    // A sleeping run gives its slot back: once the first ends, the second runs and parks on its nap, holding no slot.
    gates.open(key);
    await h.waitFor(first, ['succeeded']);
    await waitingFor(second, 'sleep');
    const third = await h.start('limited', { as: 'quick' }, flow);
    await h.waitFor(third, ['succeeded']);
  });

  it('a throttled run says when it may start', async () => {
    const at = Date.now() + HOUR;
    const id = await h.start('quick', {}, { flow: { notBeforeMs: BigInt(at) } });
    const w = await waitingFor(id, 'throttle');
    near(w.until, at, 2000);
  });

  it('a step backing off names the attempt, the next try and the error', async () => {
    const id = await h.start('flaky');
    const w = await waitingFor(id, 'retry');
    expect(w).toMatchObject({ step: 'charge', attempt: 1, error: { message: 'card declined' } });
    expect(Date.parse(w.nextTryAt)).toBeGreaterThan(Date.now() - 1000);
    await h.call('runs.cancel', { params: { id } });
  });

  it('a run with no live runner says since when and when it fails; a finished run has no answer', async () => {
    const id = ids.run();
    const since = Date.now() - 60_000;
    // What the engine writes when no capable runner is registered: the stamp, and the lease released until the next try.
    await h.db.query(
      `insert into scheduler.runs (id, workspace_id, workflow, app, runner, status, trigger_kind, input, no_runner_since, lease_until)
       values ($1, $2, 'sleeper', 'app', 'r-9', 'queued', 'event', '{}', to_timestamp($3::bigint / 1000.0), now() + interval '1 hour')`,
      [id, WS, since],
    );
    expect(await waitingFor(id, 'no_runner')).toEqual({ kind: 'no_runner', since: new Date(since).toISOString(), failsAt: new Date(since + 5 * 60_000).toISOString(), runner: 'r-9' });
    const done = await h.start('quick');
    await h.waitFor(done, ['succeeded']);
    expect((await read(done)).waitingFor).toBeUndefined();
  });

  it('another workspace reads none of it', async () => {
    const id = await h.start('sleeper');
    await waitingFor(id, 'sleep');
    const { callApi } = await import('@dws/runtime');
    await expect(callApi(h.bus, 'scheduler', 'runs.get', { workspaceId: 'ws_other', actor: 'x', keyKind: 'secret', requestId: '' }, { params: { id } })).rejects.toMatchObject({ status: 404 });
  });
});
