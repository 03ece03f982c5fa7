import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { testInfra } from '@dws/testing';
import { ScriptedInvoker, startHarness, type Harness } from './harness.js';

jest.setTimeout(60_000);

const invoker = new ScriptedInvoker({ ten: () => Array.from({ length: 10 }, (_, i) => ({ run: `s${i + 1}` })) });

// A replica with its own connections can die in-process: its pool and bus connection are cut
// while the reply to pass 5 is on its way, so the reply is received but never applied.
const d = testInfra() ? describe : describe.skip;
if (!testInfra()) console.warn('\n!!! Postgres/NATS missing: the scheduler crash test is SKIPPED !!!\n');

d('a scheduler that dies between receiving a reply and applying it (real Postgres + NATS)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness('real', invoker);
  });
  afterAll(async () => h?.close());

  it('loses nothing: another replica takes the run over after the lease and re-runs only the unapplied step', async () => {
    await h.scheduler.stop(); // only the victim drives
    const victim = await h.replica();
    let killed = false;
    invoker.hold = async (_runId, body) => {
      if (killed || body.ctx.workflow !== 'ten' || Object.keys(body.steps).length !== 4) return;
      killed = true;
      // Step s5 has run on the runner; its reply is in flight. Cut the victim off before it applies it.
      void victim.crash();
      await new Promise((r) => setTimeout(r, 200));
    };
    const id = await h.start('ten');
    for (let i = 0; i < 200 && !killed; i++) await new Promise((r) => setTimeout(r, 25));
    expect(killed).toBe(true);
    const steps = await h.db.query<{ name: string }>('select name from scheduler.steps where run_id = $1 order by idx', [id]);
    expect(steps.map((s) => s.name)).toEqual(['s1', 's2', 's3', 's4']); // s5 was never persisted
    invoker.hold = undefined;
    await h.replica(); // a survivor: it claims the run once the victim's lease (1 s) lapses
    const run = await h.waitFor(id, ['succeeded'], 20_000);
    expect(run.status).toBe('succeeded');
    const counts = Array.from({ length: 10 }, (_, i) => invoker.count(id, `s${i + 1}`));
    expect(counts).toEqual([1, 1, 1, 1, 2, 1, 1, 1, 1, 1]);
  });
});
