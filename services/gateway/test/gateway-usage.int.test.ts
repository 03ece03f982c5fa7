import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createLogger } from '@dws/log';
import { create, fromBinary, ModelCeilingReachedSchema, RunFinishedSchema, toBinary, WorkspaceUpsertedSchema } from '@dws/proto';
import { Outbox, streams, subjects } from '@dws/runtime';
import { uniqueName } from '@dws/testing';
import { UsageMeter } from '../src/handlers/usage-meter.js';
import { consumeOnce } from './consume.js';
import { http, infraAvailable, startTestGateway, type TestGateway } from './harness.js';

if (!infraAvailable) console.warn('\n!!! Postgres/NATS missing: gateway usage tests SKIPPED !!!\n');
const d = infraAvailable ? describe : describe.skip;

/**
 * Usage ceilings (SPEC Limits: "Usage or plan ceiling | metered | Workspace
 * becomes suspended"): the gateway on real Postgres and NATS, driven by
 * RunFinished facts published onto the bus as the scheduler would, with its
 * clock held in March 2026 and moved to April for the rollover.
 */
d('gateway usage ceilings', () => {
  let g: TestGateway;
  let clock = Date.UTC(2026, 2, 15, 12);
  let stopFacts: () => Promise<void>;
  const announced: { workspaceId: string; suspended: boolean; modelTokensPerMonth: number; modelCostPerMonth: number }[] = [];

  beforeAll(async () => {
    g = await startTestGateway({ gateway: { usage: { now: () => clock, sweepMs: 100 } } });
    g.stub('scheduler', { 'runs.replay': async () => ({ status: 201, body: { id: 'run_new', status: 'queued' } }) });
    await g.bus.ensureStream(streams.gatewayFacts);
    stopFacts = await consumeOnce(g.bus, subjects.workspaceUpserted, (data) => {
      const f = fromBinary(WorkspaceUpsertedSchema, data);
      announced.push({ workspaceId: f.workspaceId, suspended: f.suspended, modelTokensPerMonth: f.modelTokensPerMonth, modelCostPerMonth: f.modelCostPerMonth });
    });
  }, 60_000);
  afterAll(async () => {
    await stopFacts?.();
    await g?.stop();
  }, 30_000);

  const admin = (method: string, path: string, body?: unknown) => http(g.base, method, `/v1/admin/workspaces${path}`, { key: g.adminToken, body });
  const workspace = async (runsPerMonth?: number) => {
    const ws = (await admin('POST', '', { name: uniqueName('usage') })).body as { id: string; secretKey: string };
    if (runsPerMonth !== undefined) expect((await admin('PATCH', `/${ws.id}`, { limits: { runsPerMonth } })).status).toBe(200);
    return ws;
  };
  const read = async (id: string) => (await admin('GET', `/${id}`)).body;
  /** A RunFinished as the scheduler publishes it (msgId `finished:<run>`), unless the test forges a repeat. */
  const finish = (workspaceId: string, o: { runId?: string; atMs?: number; msgId?: string } = {}) => {
    const runId = o.runId ?? uniqueName('run');
    const fact = create(RunFinishedSchema, { workspaceId, runId, workflow: 'wf', app: 'app', status: 'succeeded', atMs: BigInt(o.atMs ?? clock) });
    return g.bus.publish(subjects.runFinished, toBinary(RunFinishedSchema, fact), { msgId: o.msgId ?? `finished:${runId}` }).then(() => runId);
  };
  /** A meter of its own on `db` (the handler driven directly, as a redelivery or a second replica would). */
  const meterOn = (db: typeof g.tdb.db) =>
    new UsageMeter({
      db,
      bus: g.bus,
      outbox: new Outbox({ db: g.tdb.db, bus: g.bus, schema: 'gateway', log: createLogger({ level: 'silent' }) }),
      sealKey: Buffer.alloc(32),
      log: createLogger({ level: 'silent' }),
      now: () => clock,
      onSuspensionChange: () => undefined,
    });
  const replay = async (ws: { secretKey: string }) => (await http(g.base, 'POST', '/v1/runs/r/replay', { key: ws.secretKey })).status;

  it('suspends a workspace when its runs reach runsPerMonth, announces it, and refuses run-creating calls', async () => {
    const ws = await workspace(3);
    expect(await read(ws.id)).toMatchObject({ suspended: false, suspendedReason: null, limits: { runsPerMonth: 3 }, usage: { month: '2026-03', runs: 0 } });
    await finish(ws.id);
    await finish(ws.id);
    await eventually(async () => (await read(ws.id)).usage.runs === 2);
    expect((await read(ws.id)).suspended).toBe(false);
    expect(await replay(ws)).toBe(201);

    await finish(ws.id);
    await eventually(async () => (await read(ws.id)).suspended === true);
    expect(await read(ws.id)).toMatchObject({ suspended: true, suspendedReason: 'usage_limit', usage: { month: '2026-03', runs: 3 } });
    await eventually(async () => announced.some((f) => f.workspaceId === ws.id && f.suspended));
    expect(await replay(ws)).toBe(403);

    // Runs already under way when the ceiling was reached still end, and still count.
    await finish(ws.id);
    await eventually(async () => (await read(ws.id)).usage.runs === 4);
    expect(await read(ws.id)).toMatchObject({ suspended: true, suspendedReason: 'usage_limit' });
  });

  it('counts a run once however often its fact arrives', async () => {
    const ws = await workspace(100);
    // The same run twice on the stream (an outbox republish after the bus's duplicate window), then a sentinel.
    const once = await finish(ws.id, { msgId: uniqueName('m') });
    await finish(ws.id, { runId: once, msgId: uniqueName('m') });
    await finish(ws.id, { runId: once }); // the scheduler's own msgId: dropped by the bus or counted nothing
    await finish(ws.id);
    await eventually(async () => (await read(ws.id)).usage.runs === 2);

    // A redelivery as the handler sees it (same message, same seq), and two replicas racing on one fact.
    const meter = meterOn(g.tdb.db);
    const message = (runId: string, seq: number) => {
      const data = toBinary(RunFinishedSchema, create(RunFinishedSchema, { workspaceId: ws.id, runId, status: 'failed', atMs: BigInt(clock) }));
      return { subject: subjects.runFinished, data, seq, msgId: `finished:${runId}`, deliveryCount: 2, working: () => undefined };
    };
    await meter.handle(message(once, 1));
    const fresh = uniqueName('run');
    await meter.handle(message(fresh, 2));
    await meter.handle(message(fresh, 2));
    const raced = uniqueName('run');
    await Promise.all([meter.handle(message(raced, 3)), meter.handle(message(raced, 3))]);
    expect((await read(ws.id)).usage).toEqual({ month: '2026-03', runs: 4 });
  });

  it('counts a burst of run ends, several workspaces and months, in one statement, each run once', async () => {
    const [a, b] = [await workspace(), await workspace()];
    let statements = 0;
    const db = { ...g.tdb.db, query: ((text: string, params?: unknown[]) => (statements++, g.tdb.db.query(text, params))) as typeof g.tdb.db.query };
    const meter = meterOn(db);
    const february = Date.UTC(2026, 1, 27);
    const message = (workspaceId: string, runId: string, atMs: number) => ({
      subject: subjects.runFinished,
      data: toBinary(RunFinishedSchema, create(RunFinishedSchema, { workspaceId, runId, status: 'succeeded', atMs: BigInt(atMs) })),
      seq: 1,
      msgId: `finished:${runId}`,
      deliveryCount: 1,
      working: () => undefined,
    });
    const facts = [
      ...Array.from({ length: 12 }, (_, i) => message(a.id, `${a.id}-r${i}`, clock)),
      ...Array.from({ length: 5 }, (_, i) => message(b.id, `${b.id}-r${i}`, clock)),
      ...Array.from({ length: 3 }, (_, i) => message(b.id, `${b.id}-feb${i}`, february)),
    ];
    await Promise.all(facts.map((m) => meter.handle(m)));
    expect(statements).toBe(1);
    // The same facts again (redeliveries): nothing more counted.
    await Promise.all(facts.slice(0, 6).map((m) => meter.handle(m)));
    const usage = await g.tdb.db.query<{ workspace_id: string; month: string; runs: number }>(
      'select workspace_id, month, runs::int as runs from gateway.usage where workspace_id = any($1::text[]) order by workspace_id, month',
      [[a.id, b.id]],
    );
    expect(usage).toEqual(
      [
        { workspace_id: a.id, month: '2026-03', runs: 12 },
        { workspace_id: b.id, month: '2026-02', runs: 3 },
        { workspace_id: b.id, month: '2026-03', runs: 5 },
      ].sort((x, y) => (x.workspace_id + x.month < y.workspace_id + y.month ? -1 : 1)),
    );
  });

  it('lifts a usage suspension when the limit is raised or removed, and suspends at once when it is lowered to the usage', async () => {
    const ws = await workspace(2);
    await finish(ws.id);
    await finish(ws.id);
    await eventually(async () => (await read(ws.id)).suspended === true);

    const raised = await admin('PATCH', `/${ws.id}`, { limits: { runsPerMonth: 5 } });
    expect(raised.body).toMatchObject({ suspended: false, suspendedReason: null, limits: { runsPerMonth: 5 }, usage: { runs: 2 } });
    await eventually(async () => announced.filter((f) => f.workspaceId === ws.id).at(-1)?.suspended === false);
    expect(await replay(ws)).toBe(201);

    const lowered = await admin('PATCH', `/${ws.id}`, { limits: { runsPerMonth: 2 } });
    expect(lowered.body).toMatchObject({ suspended: true, suspendedReason: 'usage_limit' });
    await eventually(async () => announced.filter((f) => f.workspaceId === ws.id).at(-1)?.suspended === true);
    expect(await replay(ws)).toBe(403);

    // Lifting the suspension alone does not lift a ceiling that is still reached.
    expect((await admin('PATCH', `/${ws.id}`, { suspended: false })).body).toMatchObject({ suspended: true, suspendedReason: 'usage_limit' });

    const removed = await admin('PATCH', `/${ws.id}`, { limits: { runsPerMonth: null } });
    expect(removed.body).toMatchObject({ suspended: false, suspendedReason: null, limits: {} });
    expect(await replay(ws)).toBe(201);
  });

  it("never lifts an operator's suspension through limits or usage", async () => {
    const ws = await workspace();
    expect((await admin('PATCH', `/${ws.id}`, { suspended: true, limits: { runsPerMonth: 1 } })).body).toMatchObject({ suspended: true, suspendedReason: 'operator' });
    await finish(ws.id);
    await finish(ws.id);
    await eventually(async () => (await read(ws.id)).usage.runs === 2);
    expect(await read(ws.id)).toMatchObject({ suspended: true, suspendedReason: 'operator' });
    expect((await admin('PATCH', `/${ws.id}`, { limits: { runsPerMonth: 10 } })).body).toMatchObject({ suspended: true, suspendedReason: 'operator' });
    expect((await admin('PATCH', `/${ws.id}`, { limits: { runsPerMonth: null } })).body).toMatchObject({ suspended: true, suspendedReason: 'operator' });
    expect(await replay(ws)).toBe(403);
    // The operator lifts it; limits still hold.
    expect((await admin('PATCH', `/${ws.id}`, { suspended: false, limits: { runsPerMonth: 10 } })).body).toMatchObject({ suspended: false, suspendedReason: null });

    // An operator's suspend on top of a usage suspension takes it over: raising the limit leaves it.
    const other = await workspace(1);
    await finish(other.id);
    await eventually(async () => (await read(other.id)).suspendedReason === 'usage_limit');
    expect((await admin('PATCH', `/${other.id}`, { suspended: true })).body).toMatchObject({ suspended: true, suspendedReason: 'operator' });
    expect((await admin('PATCH', `/${other.id}`, { limits: { runsPerMonth: 50 } })).body).toMatchObject({ suspended: true, suspendedReason: 'operator' });
  });

  it('announces model ceilings, suspends when the scheduler reports one reached, and lifts when it is raised', async () => {
    const ws = await workspace();
    const patched = await admin('PATCH', `/${ws.id}`, { limits: { modelTokensPerMonth: 1000, modelCostPerMonth: 2.5 } });
    expect(patched.body).toMatchObject({ suspended: false, limits: { modelTokensPerMonth: 1000, modelCostPerMonth: 2.5 } });
    expect(patched.body.usage.model).toBeUndefined();
    await eventually(async () => announced.some((f) => f.workspaceId === ws.id && f.modelTokensPerMonth === 1000 && f.modelCostPerMonth === 2.5));

    const report = (month: string, tokens: number, cost: number) =>
      g.bus.publish(
        subjects.modelCeilingReached,
        toBinary(ModelCeilingReachedSchema, create(ModelCeilingReachedSchema, { workspaceId: ws.id, month, tokens, cost, atMs: BigInt(clock) })),
        { msgId: uniqueName('ceiling') },
      );
    await report('2026-03', 1100, 0.5);
    await eventually(async () => (await read(ws.id)).suspended === true);
    expect(await read(ws.id)).toMatchObject({ suspendedReason: 'usage_limit', usage: { month: '2026-03', runs: 0, model: { tokens: 1100, cost: 0.5 } } });
    await eventually(async () => announced.some((f) => f.workspaceId === ws.id && f.suspended));
    expect(await replay(ws)).toBe(403);

    // A report arriving late with smaller figures does not lower them.
    await report('2026-03', 900, 0.1);
    await new Promise((r) => setTimeout(r, 300)); // its own consumer: nothing to wait on that it would change
    expect((await read(ws.id)).usage.model).toEqual({ tokens: 1100, cost: 0.5 });

    // Raised above what was used: lifted. Lowered to it (a fractional cost ceiling): suspended again at once.
    expect((await admin('PATCH', `/${ws.id}`, { limits: { modelTokensPerMonth: 5000 } })).body).toMatchObject({ suspended: false, suspendedReason: null });
    expect(await replay(ws)).toBe(201);
    expect((await admin('PATCH', `/${ws.id}`, { limits: { modelCostPerMonth: 0.25 } })).body).toMatchObject({ suspended: true, suspendedReason: 'usage_limit' });
    expect((await admin('PATCH', `/${ws.id}`, { limits: { modelCostPerMonth: null } })).body).toMatchObject({
      suspended: false,
      limits: { modelTokensPerMonth: 5000 },
    });
    await eventually(async () => announced.filter((f) => f.workspaceId === ws.id).at(-1)?.modelCostPerMonth === 0);

    // Another month's report suspends nothing now.
    await report('2026-02', 99_999, 99);
    await eventually(async () => (await g.tdb.db.query(`select 1 from gateway.usage where workspace_id = $1 and month = '2026-02'`, [ws.id])).length === 1);
    expect(await read(ws.id)).toMatchObject({ suspended: false, usage: { month: '2026-03', model: { tokens: 1100 } } });

    for (const limits of [{ modelTokensPerMonth: 1.5 }, { modelTokensPerMonth: 0 }, { modelCostPerMonth: 0 }, { modelCostPerMonth: -1 }, { modelCostPerMonth: '1' }]) {
      const r = await admin('PATCH', `/${ws.id}`, { limits });
      expect({ limits, status: r.status, code: r.body?.error?.code }).toEqual({ limits, status: 400, code: 'invalid_body' });
    }
  });

  it('refuses unknown limit names and values that are not positive integers with 400 and the error body', async () => {
    const ws = await workspace(7);
    const unknown = await admin('PATCH', `/${ws.id}`, { limits: { steps: 5 } });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toEqual({ error: { code: 'invalid_body', message: expect.stringContaining('steps') } });
    for (const limits of [{ runsPerMonth: 0 }, { runsPerMonth: -1 }, { runsPerMonth: 1.5 }, { runsPerMonth: '5' }, { runsPerMonth: 5, eventsPerDay: 1 }, [1]]) {
      const r = await admin('PATCH', `/${ws.id}`, { limits });
      expect({ limits, status: r.status, code: r.body?.error?.code }).toEqual({ limits, status: 400, code: 'invalid_body' });
    }
    expect((await read(ws.id)).limits).toEqual({ runsPerMonth: 7 });
  });

  it("lifts last month's usage suspension when the UTC month turns; a late fact counts in its own month", async () => {
    const ws = await workspace(1);
    await finish(ws.id);
    await eventually(async () => (await read(ws.id)).suspended === true);

    const march = clock;
    clock = Date.UTC(2026, 3, 1, 0, 0, 5);
    await eventually(async () => (await read(ws.id)).suspended === false); // the sweep, no event needed
    expect(await read(ws.id)).toMatchObject({ suspendedReason: null, usage: { month: '2026-04', runs: 0 } });
    await eventually(async () => announced.filter((f) => f.workspaceId === ws.id).at(-1)?.suspended === false);

    // A run that ended in March, reported late: March's count, not April's.
    await finish(ws.id, { atMs: march });
    await finish(ws.id, { atMs: march + 1 });
    const marker = await finish(uniqueName('ws_other'));
    await eventually(async () => (await g.tdb.db.query('select 1 from gateway.metered_runs where run_id = $1', [marker])).length === 1);
    expect(await read(ws.id)).toMatchObject({ suspended: false, usage: { month: '2026-04', runs: 0 } });
    const [row] = await g.tdb.db.query<{ runs: number }>(`select runs from gateway.usage where workspace_id = $1 and month = '2026-03'`, [ws.id]);
    expect(Number(row!.runs)).toBe(3);

    // April's own ceiling applies as usual.
    await finish(ws.id);
    await eventually(async () => (await read(ws.id)).suspended === true);
    expect(await read(ws.id)).toMatchObject({ suspendedReason: 'usage_limit', usage: { month: '2026-04', runs: 1 } });
  });
});

async function eventually(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}
