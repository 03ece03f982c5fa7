import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { createLogger } from '@dws/log';
import { subjects, type Outbox } from '@dws/runtime';
import { recordingDb } from '@dws/testing';
import { Engine } from '../src/engine/engine.js';
import type { WorkflowConfigs } from '../src/engine/workflow-configs.js';
import type { CheckpointTokens } from '../src/domain/checkpoint-token.js';
import { modes, ScriptedInvoker, startHarness, until, type Harness } from './harness.js';

jest.setTimeout(60_000);

/** Every replica here looks for due runs on its own once a minute: what it claims sooner, it was woken for. */
const MINUTE = { claimPollMs: 60_000 };

/**
 * The claim loop sleeps until the next run is due instead of asking the
 * database twice every 250 ms: a sleep, a backoff and the runs a stopping
 * replica hands back are claimed on time all the same.
 */
describe.each(modes())('scheduler claims (%s)', (mode) => {
  let h: Harness;
  const invoker = new ScriptedInvoker({
    napper: () => [{ run: 'before' }, { sleep: 'nap', ms: 700 }, { run: 'after' }],
    flaky: () => [{ run: 'flaky', fn: (n) => { if (n < 3) throw new Error(`attempt ${n} failed`); return { ok: n }; } }],
    waiter: () => [{ wait: 'go', event: 'never.sent' }, { run: 'after' }],
  });
  beforeAll(async () => {
    h = await startHarness(mode, invoker, {}, MINUTE);
    await h.register('app', [{ name: 'flaky', retry: { maxAttempts: 3 } }]);
  });
  afterAll(async () => h?.close());

  it('with nothing due, looks once (one statement) and sleeps', async () => {
    // First in the file: no run exists yet.
    const { db, calls } = recordingDb(h.db);
    const engine = new Engine({
      db,
      bus: h.bus,
      log: createLogger({ level: 'silent' }),
      outbox: {} as Outbox,
      owner: 'probe',
      tokens: {} as CheckpointTokens,
      workflows: {} as WorkflowConfigs,
      leaseMs: 60_000,
      invokeTimeoutMs: 1000,
    });
    engine.start(); // the default longest sleep
    try {
      await until(() => calls.length > 0, 5_000, 'the first look');
      await new Promise((r) => setTimeout(r, 1000)); // two statements every 250 ms before
      expect(calls).toEqual(['query']);
    } finally {
      await engine.stop(0);
    }
  });

  it('a run that sleeps is claimed when its sleep ends', async () => {
    const t0 = Date.now();
    const id = await h.start('napper');
    const run = await h.waitFor(id, ['succeeded'], 10_000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(700);
    expect(run.result.results.after).toEqual({ step: 'after' });
  });

  it('a step retried after a backoff is claimed when the backoff ends', async () => {
    const id = await h.start('flaky');
    const run = await h.waitFor(id, ['succeeded'], 15_000); // two backoffs of 0.5-1 and 1-2 s
    expect(run.result.results.flaky).toEqual({ ok: 3 });
  });

  it('a replica wakes for runs another hands back (scheduler.runs.due), and a stopping replica says so', async () => {
    const id = await h.start('waiter');
    await until(async () => (await h.db.query('select 1 from scheduler.waiters where run_id = $1', [id])).length > 0, 10_000, 'the run parked');
    await new Promise((r) => setTimeout(r, 300)); // the replica has looked since: nothing is due for a minute
    const passes = () => invoker.bodies.filter((b) => b.ctx.runId === id).length;
    const before = passes();
    // What a stopping replica's releaseLeases leaves: the run due now, no owner.
    await h.db.query('update scheduler.runs set lease_owner = null, lease_until = now() where id = $1', [id]);
    h.bus.emit(subjects.runsDue, new Uint8Array());
    await until(() => passes() > before, 3_000, 'the handed-back run claimed');

    const said = new Promise<void>((resolve) => {
      const sub = h.bus.subscribe(subjects.runsDue, () => {
        void sub.stop();
        resolve();
      });
    });
    await h.stopScheduler();
    await said;
  });
});
