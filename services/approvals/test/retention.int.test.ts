import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { createLogger } from '@dws/log';
import { create, toBinary, WorkspaceUpsertedSchema } from '@dws/proto';
import { Retention, streams, subjects } from '@dws/runtime';
import { uniqueName } from '@dws/testing';
import { approvalsRetention } from '../src/store/retention.js';
import { modes, startHarness, until, type Harness } from './harness.js';

jest.setTimeout(120_000);

const OP = { tool: 'wire', data: { amount: 10 } };

describe.each(modes())('approvals retention (%s)', (mode) => {
  let h: Harness;
  const wsLong = uniqueName('ws_long');
  beforeAll(async () => {
    h = await startHarness(mode);
  });
  afterAll(async () => h?.close());

  /** A gated approval of a new run, once recorded: its id and run. */
  const request = async (ws?: string) => {
    const { runId, stepId } = await h.handoff(OP, { ws });
    const a = await h.approvalOf(runId);
    return { id: a.id as string, runId, stepId };
  };
  const decide = async (a: { id: string }, status: 'approved' | 'denied', ws?: string) =>
    expect((await h.call('approvals.decide', { params: { id: a.id }, body: { status } }, ws ? { workspaceId: ws } : {})).status).toBe(200);
  /** As if requested `days` ago (and decided then, if it was). */
  const age = (approvalIds: string[], days: number) =>
    h.db.query(
      `update approvals.approvals set requested_at = now() - make_interval(days => $2::int),
              decided_at = case when decided_at is not null then now() - make_interval(days => $2::int) end
        where id = any($1::text[])`,
      [approvalIds, days],
    );
  const left = async (approvalIds: string[]) =>
    (await h.db.query<{ id: string }>('select id from approvals.approvals where id = any($1::text[])', [approvalIds])).map((r) => r.id).sort();

  it('deletes only closed approvals past the window, never an open one, while approvals are requested and decided', async () => {
    await h.bus.ensureStream(streams.gatewayFacts);
    await h.bus.publish(
      subjects.workspaceUpserted,
      toBinary(WorkspaceUpsertedSchema, create(WorkspaceUpsertedSchema, { workspaceId: wsLong, name: 'long', signingKey: 'k', retentionDays: 60 })),
    );
    await until(async () => (await h.db.query('select 1 from approvals.retention where workspace_id = $1 and days = 60', [wsLong])).length === 1, 10_000, 'retention projection');

    const closed: string[] = [];
    for (let i = 0; i < 9; i++) {
      const a = await request();
      await decide(a, i % 2 ? 'approved' : 'denied');
      closed.push(a.id);
    }
    const cancelled = await request();
    await h.runFinished(cancelled.runId, 'cancelled');
    await until(async () => (await h.approvalOf(cancelled.runId)).status === 'cancelled', 10_000, 'the cancelled approval');
    closed.push(cancelled.id);
    const pending = await request();
    const escalated = await request();
    await h.db.query(`update approvals.approvals set status = 'escalated', timer_at = null where id = $1`, [escalated.id]);
    const decidedLate = await request();
    await decide(decidedLate, 'approved');
    const fresh = await request();
    await decide(fresh, 'denied');
    const keptLong = await request(wsLong);
    await decide(keptLong, 'approved', wsLong);
    const goneLong = await request(wsLong);
    await decide(goneLong, 'approved', wsLong);
    await age([...closed, pending.id, escalated.id, keptLong.id], 40);
    await age([goneLong.id], 61);
    // Requested long ago, decided yesterday: kept until its decision is past the window.
    await h.db.query(`update approvals.approvals set requested_at = now() - interval '40 days', decided_at = now() - interval '1 day' where id = $1`, [decidedLate.id]);

    const retention = new Retention({ db: h.db, log: createLogger({ level: 'silent' }), schema: 'approvals', targets: approvalsRetention }, { batch: 3 });
    const working = (async () => {
      const done: { id: string; runId: string; stepId: string }[] = [];
      for (let i = 0; i < 5; i++) {
        const a = await request();
        await decide(a, 'approved');
        done.push(a);
      }
      return done;
    })();
    const [deleted, during] = await Promise.all([retention.sweep(), working]);

    const gone = [...closed, goneLong.id];
    const kept = [pending.id, escalated.id, decidedLate.id, fresh.id, keptLong.id, ...during.map((a) => a.id)];
    expect(deleted).toEqual({ approvals: gone.length });
    expect(await left(gone)).toEqual([]);
    expect(await left(kept)).toEqual([...kept].sort());
    expect((await h.call('approvals.get', { params: { id: closed[0]! } })).status).toBe(404);
    // The approvals decided during the pass resumed their runs.
    for (const a of during) expect((await h.resolved(a.runId, a.stepId))[0]!.data).toMatchObject({ status: 'approved' });
    // An old pending approval is still decidable.
    await decide(pending, 'approved');
    expect(await retention.sweep()).toEqual({ approvals: 0 });
  });

  it("a replica's pass at start deletes old closed approvals", async () => {
    const old = [await request(), await request()];
    for (const a of old) await decide(a, 'denied');
    const open = await request();
    await age([...old.map((a) => a.id), open.id], 31);
    await h.replica();
    await until(async () => (await left(old.map((a) => a.id))).length === 0, 20_000, "the replica's start pass");
    expect(await left([open.id])).toEqual([open.id]);
  });
});
