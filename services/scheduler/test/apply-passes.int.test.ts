import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { fileURLToPath } from 'node:url';
import { migrate, openDatabase, type Database } from '@dws/db';
import { hashStepId } from '@dws/protocol';
import { openTestDb, preparedPlan, testInfra } from '@dws/testing';
import { applyCheckpoints, applyPass, applyPasses, insertHeldRuns, renewLeases, type ApplyPass, type NewFrame } from '../src/store/runs.js';

const MIGRATIONS = fileURLToPath(new URL('../src/store/migrations', import.meta.url));
const OWNER = 'scheduler-test';
const WS = 'ws_apply';

const modes = testInfra() ? (['real', 'embedded'] as const) : (['embedded'] as const);

/** One of each kind of pass the group commit takes: a step and the next pass, a Score, a park until a time, a retry, a stale reply. */
function passes(prefix: string): ApplyPass[] {
  const base = (id: string) => ({ runId: `${prefix}_${id}`, workspaceId: WS, owner: OWNER, attempt: 1, transportFailures: 0, noRunnerSinceMs: null, resultJson: null, error: null });
  const step = (name: string, idx: number, extra: Record<string, unknown> = {}) => ({
    op: 'StepRun', id: hashStepId(name), name, status: 'succeeded', dataJson: JSON.stringify({ name }), attempts: 1, idx, ...extra,
  });
  const frame = (seq: number, name: string) => ({ seq, kind: 'step_status' as const, fields: { name, status: 'succeeded' } });
  return [
    { ...base('cont'), pass: 0, status: 'running', lease: { kind: 'hold', ms: 30_000 }, newSteps: 1, nextSeq: 4, steps: [step('a', 0)], frames: [frame(3, 'a')] },
    {
      ...base('score'), pass: 0, status: 'running', lease: { kind: 'hold', ms: 30_000 }, newSteps: 1, nextSeq: 4,
      steps: [{ ...step('q', 0), op: 'Score', dataJson: JSON.stringify({ name: 'quality', value: 0.9 }) }], frames: [frame(3, 'q')],
    },
    {
      ...base('park'), pass: 0, status: 'waiting', lease: { kind: 'at', atMs: Date.now() + 3_600_000 }, newSteps: 1, nextSeq: 4,
      steps: [{ ...step('z', 0), op: 'Sleep', status: 'sleeping', dataJson: undefined, wakeAtMs: Date.now() + 3_600_000 }], frames: [frame(3, 'z')],
    },
    { ...base('retry'), pass: 0, status: 'waiting', attempt: 2, transportFailures: 1, noRunnerSinceMs: 1_700_000_000_000, lease: { kind: 'delay', ms: 5000 }, newSteps: 0, nextSeq: 3, steps: [], frames: [] },
    { ...base('paused'), pass: 0, status: 'running', lease: { kind: 'hold', ms: 30_000 }, newSteps: 1, nextSeq: 4, steps: [step('p', 0)], frames: [frame(3, 'p')] },
    { ...base('stale'), pass: 7, status: 'running', lease: { kind: 'hold', ms: 30_000 }, newSteps: 1, nextSeq: 4, steps: [step('s', 0)], frames: [frame(3, 's')] },
  ] as ApplyPass[];
}

/**
 * Group commit of passes: applyPasses applies several runs' passes in one
 * statement and must write exactly what it writes for each alone (applyPass,
 * a batch of one)
 * (the same guard on pass and lease, a pause asked meanwhile taking effect,
 * leases held, parked, delayed; steps, scores and frames).
 */
describe.each(modes)('applyPasses: one statement for many runs writes what applyPass writes for each (%s)', (mode) => {
  let db: Database;
  let close: () => Promise<void>;
  beforeAll(async () => {
    if (mode === 'real') {
      const t = await openTestDb('applyp', { migrations: [{ schema: 'scheduler', migrationsDir: MIGRATIONS }] });
      db = t.db;
      close = t.close;
    } else {
      db = await openDatabase({});
      await migrate(db, { schema: 'scheduler', migrationsDir: MIGRATIONS });
      close = () => db.close();
    }
    for (const prefix of ['one', 'many']) {
      for (const p of passes(prefix)) {
        const run = { id: p.runId, workspaceId: WS, workflow: 'wf', app: 'app', runner: '', triggerKind: 'event', eventId: null, eventName: 'go', replayOf: null, inputJson: '{}', createdAtMs: Date.now() };
        const frames: NewFrame[] = [
          { seq: 1, kind: 'run_status', fields: { status: 'queued' } },
          { seq: 2, kind: 'run_status', fields: { status: 'running' } },
        ];
        await insertHeldRuns(db, [{ run, frames }], OWNER, 30_000);
      }
      await db.query(`update scheduler.runs set pause_requested = true where id = $1`, [`${prefix}_paused`]);
    }
    // PGlite's start and migrations alone took over 5 s on a loaded CI machine.
  }, 60_000);
  afterAll(async () => close?.());

  /** What a run's rows say, without the run id's prefix or the clock. */
  async function state(prefix: string) {
    const runs = await db.query<Record<string, unknown>>(
      `select substr(id, length($1) + 2) as id, status, pass::int, step_count, next_seq, attempt, transport_failures, result, error, lease_owner,
              lease_until is not null as leased, lease_until > now() + interval '10 minutes' as parked_long,
              (extract(epoch from no_runner_since) * 1000)::bigint::text as no_runner_since, pause_requested, ended_at is not null as ended
         from scheduler.runs where id like $1 || '\\_%' order by id`,
      [prefix],
    );
    const steps = await db.query(
      `select substr(run_id, length($1) + 2) as run, step_id, name, op, idx, status, data, attempts, wake_at is not null as wakes
         from scheduler.steps where run_id like $1 || '\\_%' order by run_id, step_id`,
      [prefix],
    );
    const scores = await db.query(`select substr(run_id, length($1) + 2) as run, name, value from scheduler.scores where run_id like $1 || '\\_%'`, [prefix]);
    const frames = await db.query(
      `select substr(run_id, length($1) + 2) as run, seq, kind, payload from scheduler.frames where run_id like $1 || '\\_%' order by run_id, seq`,
      [prefix],
    );
    return { runs, steps, scores, frames };
  }

  it('applies each pass as applyPass does alone, and skips the stale one', async () => {
    const single = new Map<string, boolean>();
    for (const p of passes('one')) single.set(p.runId.slice(4), (await applyPass(db, p)).applied);
    const batched = await applyPasses(db, OWNER, passes('many'));

    expect(Object.fromEntries(single)).toEqual({ cont: true, score: true, park: true, retry: true, paused: true, stale: false });
    expect([...batched.entries()].map(([id, a]) => [id.slice(5), a.applied && a.status]).sort()).toEqual(
      [['cont', 'running'], ['park', 'waiting'], ['paused', 'paused'], ['retry', 'waiting'], ['score', 'running']].sort(),
    );
    const [one, many] = [await state('one'), await state('many')];
    expect(many).toEqual(one);
    // And what that is, so the comparison cannot pass on two empty tables.
    const byId = Object.fromEntries(many.runs.map((r) => [r.id, r]));
    expect(byId.cont).toMatchObject({ status: 'running', pass: 1, step_count: 1, next_seq: 4, lease_owner: OWNER, leased: true });
    expect(byId.paused).toMatchObject({ status: 'paused', pass: 1, lease_owner: null, leased: false, pause_requested: false });
    expect(byId.park).toMatchObject({ status: 'waiting', lease_owner: null, parked_long: true });
    expect(byId.retry).toMatchObject({ status: 'waiting', attempt: 2, transport_failures: 1, no_runner_since: '1700000000000', lease_owner: null, leased: true });
    expect(byId.stale).toMatchObject({ status: 'running', pass: 0, step_count: 0 });
    expect(many.scores).toHaveLength(1);
    expect(many.steps.map((s: any) => s.run)).toEqual(['cont', 'park', 'paused', 'score']);
  });

  it('writes each pass\'s outbox rows and answers their ids per run, in the order of its messages', async () => {
    const msg = (runId: string, n: number) => ({ subject: 'scheduler.fact.test', msgId: `${runId}:${n}`, payload: new Uint8Array([n]) });
    const [a, b, stale] = passes('many').filter((p) => ['many_cont', 'many_score', 'many_stale'].includes(p.runId));
    const batch = [a!, b!, stale!].map((p) => ({ ...p, pass: p.pass + (p.runId === 'many_stale' ? 0 : 1), steps: [], frames: [], newSteps: 0, outbox: [msg(p.runId, 1), msg(p.runId, 2)] }));
    // The two live runs' leases were kept by the first test; their pass is now 1.
    const applied = await applyPasses(db, OWNER, batch);
    expect(applied.has('many_stale')).toBe(false);
    const rows = await db.query<{ id: string; msg_id: string; payload: Uint8Array }>(`select id::text, msg_id, payload from scheduler.outbox where msg_id like 'many\\_%' order by id`);
    expect(rows.map((r) => r.msg_id).sort()).toEqual(['many_cont:1', 'many_cont:2', 'many_score:1', 'many_score:2']);
    for (const runId of ['many_cont', 'many_score']) {
      const got = applied.get(runId);
      expect(got).toMatchObject({ applied: true, status: 'running' });
      const ids = (got as { outboxIds: number[] }).outboxIds;
      expect(ids.map((id) => rows.find((r) => Number(r.id) === id)?.msg_id)).toEqual([`${runId}:1`, `${runId}:2`]);
      expect(ids[0]!).toBeLessThan(ids[1]!);
    }
  });

  it('renews the leases of held runs without waiting for a run a batch statement holds (no deadlock with one)', async () => {
    if (mode !== 'real') return; // one connection on PGlite: nothing to wait for
    const [a, b] = ['many_cont', 'many_score'];
    await db.query(`update scheduler.runs set lease_until = now() + interval '1 second' where id = any($1::text[])`, [[a, b]]);
    // Another transaction holds b's row, as a checkpoint statement in flight does.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const holding = new Promise<void>((r) => (locked = r));
    const holder = db.tx(async (tx) => {
      await tx.query('select id from scheduler.runs where id = $1 for update', [b]);
      locked();
      await released;
    });
    await holding;
    try {
      const t0 = Date.now();
      await renewLeases(db, OWNER, [a, b], 600_000);
      expect(Date.now() - t0).toBeLessThan(500);
    } finally {
      release();
      await holder;
    }
    const rows = await db.query<{ id: string; renewed: boolean }>(
      `select id, lease_until > now() + interval '5 minutes' as renewed from scheduler.runs where id = any($1::text[]) order by id`,
      [[a, b]],
    );
    expect(rows).toEqual([{ id: a, renewed: true }, { id: b, renewed: false }]);
    // The next round renews it.
    await renewLeases(db, OWNER, [a, b], 600_000);
    expect((await db.query<{ renewed: boolean }>(`select lease_until > now() + interval '5 minutes' as renewed from scheduler.runs where id = $1`, [b]))[0]!.renewed).toBe(true);
  });

  it('finds the runs of a batch by primary key, not by scanning every run (either statement)', async () => {
    if (mode !== 'real') return; // the planner in question is Postgres'
    await db.query(
      `insert into scheduler.runs (id, workspace_id, workflow, app, status, trigger_kind, input, lease_owner, lease_until)
       select 'bulk_' || g, $1, 'wf', 'app', 'running', 'event', '{}', $2, now() + interval '1 hour' from generate_series(1, 5000) g`,
      [WS, OWNER],
    );
    await db.query('analyze scheduler.runs');
    const plans: string[] = [];
    const explaining = {
      ...db,
      query: async (sql: string, params?: unknown[]) => {
        plans.push(await preparedPlan(db, sql, params ?? []));
        return [];
      },
    } as Database;
    const p = passes('bulk')[0]!;
    await applyPasses(explaining, OWNER, [{ ...p, runId: 'bulk_7' }]);
    await applyCheckpoints(explaining, OWNER, [{ runId: 'bulk_7', pass: 0, newSteps: 0, nextSeq: 3, steps: [], frames: [] }]);
    expect(plans).toHaveLength(2);
    for (const plan of plans) {
      expect(plan).toMatch(/Index Scan (using|on) runs_pkey/);
      expect(plan).not.toMatch(/Seq Scan on runs/);
    }
  });

  it('inserts a batch of held runs in one statement, each with its frames, and skips one that exists', async () => {
    const run = (id: string) => ({ id, workspaceId: WS, workflow: 'wf', app: 'app', runner: '', triggerKind: 'event', eventId: `evt_${id}`, eventName: 'go', replayOf: null, inputJson: `{"n":"${id}"}`, createdAtMs: Date.now() });
    const frames: NewFrame[] = [
      { seq: 1, kind: 'run_status', fields: { status: 'queued', attempt: 1 } },
      { seq: 2, kind: 'run_status', fields: { status: 'running', attempt: 1 } },
    ];
    const first = await insertHeldRuns(db, [{ run: run('held_a'), frames }], OWNER, 30_000);
    expect([...first]).toEqual(['held_a']);
    await db.query(`update scheduler.runs set input = '"touched"' where id = 'held_a'`);
    const batch = await insertHeldRuns(db, ['held_a', 'held_b', 'held_c'].map((id) => ({ run: run(id), frames })), OWNER, 30_000);
    expect([...batch].sort()).toEqual(['held_b', 'held_c']);
    const rows = await db.query<{ id: string; status: string; input: string; next_seq: number; lease_owner: string; event_id: string }>(
      `select id, status, input, next_seq, lease_owner, event_id from scheduler.runs where id like 'held_%' order by id`,
    );
    expect(rows).toEqual([
      { id: 'held_a', status: 'running', input: '"touched"', next_seq: 3, lease_owner: OWNER, event_id: 'evt_held_a' },
      { id: 'held_b', status: 'running', input: '{"n":"held_b"}', next_seq: 3, lease_owner: OWNER, event_id: 'evt_held_b' },
      { id: 'held_c', status: 'running', input: '{"n":"held_c"}', next_seq: 3, lease_owner: OWNER, event_id: 'evt_held_c' },
    ]);
    const stored = await db.query<{ run_id: string; seq: number; status: string }>(
      `select run_id, seq, payload->>'status' as status from scheduler.frames where run_id like 'held_%' order by run_id, seq`,
    );
    expect(stored).toEqual(['held_a', 'held_b', 'held_c'].flatMap((id) => [{ run_id: id, seq: 1, status: 'queued' }, { run_id: id, seq: 2, status: 'running' }]));
  });
});
