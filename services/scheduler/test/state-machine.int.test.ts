import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { seededRandom } from '@dws/testing';
import { modes, ScriptedInvoker, startHarness, type Harness, type ScriptStep } from './harness.js';

jest.setTimeout(120_000);

// A seeded PRNG so a failing case can be replayed from its seed.
const rng = seededRandom;

/**
 * A random but deterministic workflow for a seed: steps, flaky steps, sleeps, waits, parallel groups,
 * and (not in a child) child runs, so cancels, wakes and timeouts race across parent and child.
 */
function randomScript(seed: number, child = false): ScriptStep[] {
  const r = rng(seed);
  const steps: ScriptStep[] = [];
  const n = 3 + Math.floor(r() * 6);
  for (let i = 0; i < n; i++) {
    const k = r();
    if (k < 0.35) steps.push({ run: `run-${i}` });
    else if (k < 0.5) steps.push({ run: `flaky-${i}`, fn: (attempt) => { if (attempt === 1) throw new Error('first attempt fails'); return attempt; } });
    else if (k < 0.65) steps.push({ sleep: `sleep-${i}`, ms: 20 + Math.floor(r() * 200) });
    else if (k < 0.8) steps.push({ wait: `wait-${i}`, event: 'fz.go', timeoutMs: 100 + Math.floor(r() * 500) });
    else if (k < 0.86) steps.push({ parallel: [`par-${i}-a`, `par-${i}-b`, `par-${i}-c`].slice(0, 2 + Math.floor(r() * 2)) });
    else if (k < 0.93 && !child) steps.push({ child: `kid-${i}`, workflow: 'fuzzKid', data: { seed: seed * 100 + i } });
    else steps.push({ run: `fatal-${i}`, fn: () => { throw new Error('fatal'); }, retriable: r() < 0.5 });
  }
  return steps;
}

const invoker = new ScriptedInvoker({
  fuzz: (event) => randomScript(event.data.seed as number),
  fuzzKid: (event) => randomScript(event.data.seed as number, true),
});
const TERMINAL = ['succeeded', 'failed', 'cancelled'];

describe.each(modes())('run state machine under random replies, timers, control and replicas (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode, invoker);
    await h.register('app', [{ name: 'fuzz', retry: { maxAttempts: 2 } }]);
  });
  afterAll(async () => h?.close());

  it('never leaves a run in an impossible state', async () => {
    const base = Number(process.env.FUZZ_SEED ?? Date.now() % 100_000);
    const replica = await h.replica();
    const r = rng(base);
    const runs: string[] = [];
    for (let i = 0; i < 40; i++) runs.push(await h.start('fuzz', { seed: base + i }));
    // Chaos while they run: control actions, events for the waiters, redelivered start commands.
    const deadline = Date.now() + 3_000;
    let targets = runs;
    for (let round = 0; Date.now() < deadline; round++) {
      // Their children too: a child's cancel locks child then parent, a parent's the other way.
      if (round % 20 === 0) {
        const kids = await h.db.query<{ id: string }>('select id from scheduler.runs where parent_run_id = any($1::text[])', [runs]);
        targets = [...runs, ...kids.map((k) => k.id)];
      }
      const id = targets[Math.floor(r() * targets.length)]!;
      const k = r();
      const swallow = (p: Promise<unknown>) => p.catch((e: { status?: number }) => { if (!e.status || e.status >= 500) throw e; });
      if (k < 0.08) await swallow(h.call('runs.cancel', { params: { id } }));
      else if (k < 0.3) await swallow(h.call('runs.pause', { params: { id } }));
      else if (k < 0.55) await swallow(h.call('runs.resume', { params: { id } }));
      else if (k < 0.75) await h.call('waiters.wake', { body: { name: 'fz.go', data: { k } } });
      else await new Promise((res) => setTimeout(res, 20));
    }
    // Let everything finish: resume what is paused (children too: a parent waits for its child) until all are terminal.
    const until = Date.now() + 60_000;
    for (;;) {
      const rows = await h.db.query<{ id: string; status: string }>(
        'select id, status from scheduler.runs where id = any($1::text[]) or parent_run_id = any($1::text[])',
        [runs],
      );
      const open = rows.filter((x) => !TERMINAL.includes(x.status));
      if (open.length === 0) break;
      if (Date.now() > until) {
        const ids = open.map((o) => o.id);
        const detail = await h.db.query(
          `select r.id, r.status, r.parent_run_id, r.lease_owner, r.lease_until, r.wake_pending, r.pass,
                  (select json_agg(json_build_object('step', s.step_id, 'name', s.name, 'status', s.status, 'op', s.op, 'wake', s.wake_at)) from scheduler.steps s where s.run_id = r.id) as steps,
                  (select json_agg(json_build_object('id', c.id, 'status', c.status, 'step', c.parent_step_id)) from scheduler.runs c where c.parent_run_id = r.id) as kids
             from scheduler.runs r where r.id = any($1::text[])`,
          [ids],
        );
        throw new Error(`seed ${base}: runs stuck: ${JSON.stringify(detail, null, 1)}`);
      }
      for (const x of open.filter((o) => o.status === 'paused')) await h.call('runs.resume', { params: { id: x.id } }).catch(() => undefined);
      await h.call('waiters.wake', { body: { name: 'fz.go', data: {} } });
      await new Promise((res) => setTimeout(res, 100));
    }
    await replica.handle.stop();

    const all = await h.db.query<{ id: string; status: string; lease_owner: string | null; lease_until: unknown; next_seq: number; ended_at: unknown }>(
      `select id, status, lease_owner, lease_until, next_seq, ended_at from scheduler.runs where id = any($1::text[]) or parent_run_id = any($1::text[])`,
      [runs],
    );
    for (const run of all) {
      const ctx = `seed ${base}, run ${run.id} (${run.status})`;
      const steps = await h.db.query<{ status: string }>('select status from scheduler.steps where run_id = $1', [run.id]);
      const frames = await h.db.query<{ seq: number; kind: string; payload: any }>('select seq, kind, payload from scheduler.frames where run_id = $1 order by seq', [run.id]);
      const waiters = await h.db.query('select 1 from scheduler.waiters where run_id = $1', [run.id]);
      // Frames: gap-free from 1, next_seq one past the last, the last run_status is the run's status, one terminal frame.
      expect({ ctx, seqs: frames.map((f) => f.seq) }).toEqual({ ctx, seqs: frames.map((_, i) => i + 1) });
      expect({ ctx, next: run.next_seq }).toEqual({ ctx, next: frames.length + 1 });
      const statuses = frames.filter((f) => f.kind === 'run_status').map((f) => f.payload.status);
      expect({ ctx, last: statuses.at(-1) }).toEqual({ ctx, last: run.status });
      expect({ ctx, terminalFrames: statuses.filter((s) => TERMINAL.includes(s)).length }).toEqual({ ctx, terminalFrames: 1 });
      // A finished run holds no lease, has an end time and no waiter; a succeeded one has nothing pending or retrying.
      expect({ ctx, owner: run.lease_owner, until: run.lease_until, ended: run.ended_at !== null, waiters: waiters.length }).toEqual({
        ctx, owner: null, until: null, ended: true, waiters: 0,
      });
      if (run.status === 'succeeded') {
        expect({ ctx, open: steps.filter((s) => !['succeeded', 'failed'].includes(s.status)).length }).toEqual({ ctx, open: 0 });
      }
    }
    // Every step ran once, except those that failed and were retried (maxAttempts 2: at most twice).
    for (const { id } of all) {
      for (const [key, n] of invoker.executions) {
        if (!key.startsWith(`${id}/`)) continue;
        const retried = key.includes('/flaky-') || key.includes('/fatal-');
        expect({ key, n }).toEqual({ key, n: retried ? Math.min(n, 2) : 1 });
      }
    }
  });
});
