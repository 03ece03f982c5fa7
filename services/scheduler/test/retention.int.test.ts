import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Database } from '@dws/db';
import { createLogger } from '@dws/log';
import { create, toBinary, WorkspaceUpsertedSchema } from '@dws/proto';
import { ids, Retention, streams, subjects } from '@dws/runtime';
import { schedulerRetention } from '../src/store/retention.js';
import { modes, ScriptedInvoker, startHarness, until, WS, type Harness } from './harness.js';

jest.setTimeout(120_000);

const invoker = new ScriptedInvoker({
  work: () => [{ run: 'a' }, { sleep: 'nap', ms: 30 }, { run: 'b' }, { score: 'grade', name: 'quality', value: 1 }],
});

interface SeedRun {
  ws?: string;
  status: string;
  /** Days since it ended (terminal) or was created (not ended). */
  daysAgo: number;
  parent?: string;
  onFailureOf?: string;
}

/** A run as the engine leaves it, written straight into the tables: two steps, three frames (one a log line), a score, a waiter. */
async function seedRun(db: Database, r: SeedRun): Promise<string> {
  const id = ids.run();
  const ws = r.ws ?? WS;
  const ended = ['succeeded', 'failed', 'cancelled'].includes(r.status);
  await db.query(
    `insert into scheduler.runs (id, workspace_id, workflow, app, status, trigger_kind, input, parent_run_id, on_failure_of,
                                 created_at, started_at, ended_at, lease_until)
     values ($1, $2, 'old', 'app', $3, 'event', '{}', $4, $5, now() - make_interval(days => $6::int) - interval '1 minute',
             now() - make_interval(days => $6::int) - interval '1 minute',
             case when $7::boolean then now() - make_interval(days => $6::int) end,
             case when $3 = 'waiting' then now() + interval '60 days' end)`,
    [id, ws, r.status, r.parent ?? null, r.onFailureOf ?? null, r.daysAgo, ended],
  );
  for (const [i, step] of ['s1', 's2'].entries()) {
    await db.query(
      `insert into scheduler.steps (run_id, step_id, workspace_id, name, op, idx, status, data) values ($1, $2, $3, $2, 'StepRun', $4, 'succeeded', '1')`,
      [id, step, ws, i],
    );
  }
  for (const seq of [1, 2, 3]) {
    await db.query(
      `insert into scheduler.frames (run_id, seq, workspace_id, kind, payload, log_key) values ($1, $2, $3, $4, '{}'::jsonb, $5)`,
      [id, seq, ws, seq === 3 ? 'log' : 'step_status', seq === 3 ? '1:@root:0' : null],
    );
  }
  await db.query(`insert into scheduler.scores (run_id, step_id, workspace_id, step, name, value, data) values ($1, 's2', $2, 's2', 'q', '1'::jsonb, '{}'::jsonb)`, [id, ws]);
  await db.query(`insert into scheduler.waiters (workspace_id, event_name, run_id, step_id) values ($1, 'never', $2, 's9')`, [ws, id]);
  return id;
}

async function seedAudit(db: Database, a: { ws?: string; runId: string | null; daysAgo: number }): Promise<number> {
  const rows = await db.query<{ id: number }>(
    `insert into scheduler.control_actions (workspace_id, action, run_id, actor, created_at)
     values ($1, 'cancel', $2, 'op', now() - make_interval(days => $3::int)) returning id`,
    [a.ws ?? WS, a.runId, a.daysAgo],
  );
  return Number(rows[0]!.id);
}

/** Rows left per table for these runs: all five tables must agree on what went. */
async function rowsOf(db: Database, runIds: string[]) {
  const count = async (table: string) =>
    Number((await db.query<{ n: number }>(`select count(*)::int as n from scheduler.${table} where ${table === 'runs' ? 'id' : 'run_id'} = any($1::text[])`, [runIds]))[0]!.n);
  return { runs: await count('runs'), steps: await count('steps'), frames: await count('frames'), scores: await count('scores'), waiters: await count('waiters') };
}

const whole = (n: number) => ({ runs: n, steps: 2 * n, frames: 3 * n, scores: n, waiters: n });

describe.each(modes())('scheduler retention (%s)', (mode) => {
  let h: Harness;
  const sfx = ids.run().slice(-8);
  const wsLong = `ws_long_${sfx}`;
  const wsShort = `ws_short_${sfx}`;
  const wsReset = `ws_reset_${sfx}`;

  beforeAll(async () => {
    h = await startHarness(mode, invoker);
  });
  afterAll(async () => h?.close());

  const announce = (workspaceId: string, retentionDays: number) =>
    h.bus.publish(
      subjects.workspaceUpserted,
      toBinary(WorkspaceUpsertedSchema, create(WorkspaceUpsertedSchema, { workspaceId, name: workspaceId, signingKey: 'k', retentionDays })),
    );
  const windowOf = async (workspaceId: string) =>
    (await h.db.query<{ days: number }>('select days from scheduler.retention where workspace_id = $1', [workspaceId]))[0]?.days;

  it('deletes only ended runs past the window, with all their rows, while new runs execute', async () => {
    // Windows from the gateway's facts, through the scheduler's own durable.
    await h.bus.ensureStream(streams.gatewayFacts);
    await announce(wsLong, 60);
    await announce(wsShort, 1);
    await announce(wsReset, 60);
    await announce(wsReset, 0);
    await until(async () => (await windowOf(wsLong)) === 60 && (await windowOf(wsShort)) === 1 && (await windowOf(wsReset)) === 0, 10_000, 'retention projection');

    const oldEnded: string[] = [];
    for (let i = 0; i < 30; i++) oldEnded.push(await seedRun(h.db, { status: ['succeeded', 'failed', 'cancelled'][i % 3]!, daysAgo: 40 }));
    const fresh = [await seedRun(h.db, { status: 'succeeded', daysAgo: 0 }), await seedRun(h.db, { status: 'failed', daysAgo: 29 })];
    // Old but not over: never deleted, nor what they need.
    const liveParent = await seedRun(h.db, { status: 'waiting', daysAgo: 45 });
    const paused = await seedRun(h.db, { status: 'paused', daysAgo: 45 });
    const childOfLive = await seedRun(h.db, { status: 'succeeded', daysAgo: 41, parent: liveParent });
    const failedWithLiveHandler = await seedRun(h.db, { status: 'failed', daysAgo: 41 });
    await seedRun(h.db, { status: 'paused', daysAgo: 40, onFailureOf: failedWithLiveHandler });
    // Old and over, both: both go.
    const endedParent = await seedRun(h.db, { status: 'failed', daysAgo: 42 });
    const childOfEnded = await seedRun(h.db, { status: 'cancelled', daysAgo: 42, parent: endedParent });
    const failedWithEndedHandler = await seedRun(h.db, { status: 'failed', daysAgo: 43 });
    const endedHandler = await seedRun(h.db, { status: 'succeeded', daysAgo: 43, onFailureOf: failedWithEndedHandler });
    // Per-workspace windows.
    const keptLong = await seedRun(h.db, { ws: wsLong, status: 'succeeded', daysAgo: 40 });
    const goneLong = await seedRun(h.db, { ws: wsLong, status: 'succeeded', daysAgo: 61 });
    const goneShort = await seedRun(h.db, { ws: wsShort, status: 'succeeded', daysAgo: 2 });
    const keptShort = await seedRun(h.db, { ws: wsShort, status: 'succeeded', daysAgo: 0 });
    const goneReset = await seedRun(h.db, { ws: wsReset, status: 'succeeded', daysAgo: 31 });
    // Audit rows by their own age; those of a run not yet over stay.
    const auditGone = [await seedAudit(h.db, { runId: oldEnded[0]!, daysAgo: 40 }), await seedAudit(h.db, { runId: null, daysAgo: 35 }), await seedAudit(h.db, { ws: wsShort, runId: null, daysAgo: 2 })];
    const auditKept = [
      await seedAudit(h.db, { runId: oldEnded[1]!, daysAgo: 1 }),
      await seedAudit(h.db, { runId: paused, daysAgo: 40 }),
      await seedAudit(h.db, { ws: wsLong, runId: null, daysAgo: 40 }),
    ];

    // The pass, in batches of 7 (several statements per workspace), while runs start and finish through the engine.
    const retention = new Retention({ db: h.db, log: createLogger({ level: 'silent' }), schema: 'scheduler', targets: schedulerRetention }, { batch: 7 });
    const starting = Promise.all(Array.from({ length: 12 }, () => h.start('work')));
    const [deleted, live] = await Promise.all([retention.sweep(), starting]);
    for (const id of live) await h.waitFor(id, ['succeeded'], 60_000);

    const gone = [...oldEnded, endedParent, childOfEnded, failedWithEndedHandler, endedHandler, goneLong, goneShort, goneReset];
    expect(deleted).toEqual({ runs: gone.length, control_actions: auditGone.length });
    expect(await rowsOf(h.db, gone)).toEqual(whole(0));
    const kept = [...fresh, liveParent, paused, childOfLive, failedWithLiveHandler, keptLong, keptShort];
    expect(await rowsOf(h.db, kept)).toEqual(whole(kept.length));
    const audit = (await h.db.query<{ id: string }>('select id from scheduler.control_actions')).map((r) => Number(r.id));
    expect(audit.filter((id) => auditGone.includes(id))).toEqual([]);
    expect(auditKept.every((id) => audit.includes(id))).toBe(true);

    // The runs that executed during the pass are whole and readable.
    for (const id of live) {
      const steps = (await h.call('runs.steps', { params: { id } })).body;
      expect(JSON.stringify(steps)).toContain('grade');
      expect(Number((await h.db.query<{ n: number }>('select count(*)::int as n from scheduler.scores where run_id = $1', [id]))[0]!.n)).toBe(1);
    }
    // Nothing left to do: a second pass deletes nothing.
    expect(await retention.sweep()).toEqual({ runs: 0, control_actions: 0 });
  });

  it("a replica's pass at start deletes old ended runs; two replicas' passes never take the same rows", async () => {
    const old: string[] = [];
    for (let i = 0; i < 40; i++) old.push(await seedRun(h.db, { status: 'succeeded', daysAgo: 35 }));
    const fresh = await seedRun(h.db, { status: 'succeeded', daysAgo: 1 });
    // Two passes at once (as two replicas would), each in batches of 5: together they delete each run once.
    const log = createLogger({ level: 'silent' });
    const a = new Retention({ db: h.db, log, schema: 'scheduler', targets: schedulerRetention }, { batch: 5 });
    const b = new Retention({ db: h.db, log, schema: 'scheduler', targets: schedulerRetention }, { batch: 5 });
    const [ra, rb] = await Promise.all([a.sweep(), b.sweep()]);
    expect(ra.runs! + rb.runs!).toBe(old.length);
    expect(await rowsOf(h.db, old)).toEqual(whole(0));

    // The service's own loop: a replica started now runs a pass at start.
    const more: string[] = [];
    for (let i = 0; i < 3; i++) more.push(await seedRun(h.db, { status: 'cancelled', daysAgo: 50 }));
    await h.replica();
    await until(async () => (await rowsOf(h.db, more)).runs === 0, 20_000, 'the replica\'s start pass');
    expect(await rowsOf(h.db, more)).toEqual(whole(0));
    expect(await rowsOf(h.db, [fresh])).toEqual(whole(1));
  });
});
