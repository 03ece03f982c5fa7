import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { createLogger } from '@dws/log';
import { create, fromBinary, ResolveStepSchema, StepHandoffSchema, toBinary, WorkspaceUpsertedSchema } from '@dws/proto';
import { ids, Retention, streams, subjects } from '@dws/runtime';
import { uniqueName } from '@dws/testing';
import { invokerRetention } from '../src/store/retention.js';
import { modes, startHarness, until, type Harness } from './harness.js';

jest.setTimeout(120_000);

const enc = new TextEncoder();
const dec = new TextDecoder();

describe.each(modes())('invoker retention (%s)', (mode) => {
  let h: Harness;
  const ws = uniqueName('ws_inf');
  const wsLong = uniqueName('ws_long');
  const resolved: { runId: string; stepId: string; data?: any; error?: string }[] = [];

  beforeAll(async () => {
    h = await startHarness(mode);
    await h.bus.consume({ stream: streams.schedulerCmds.name, durable: 'test-resolves', filterSubject: subjects.resolveStep }, async (m) => {
      const r = fromBinary(ResolveStepSchema, m.data);
      resolved.push({ runId: r.runId, stepId: r.stepId, ...(r.errorMessage ? { error: r.errorMessage } : { data: JSON.parse(dec.decode(r.data)) }) });
    });
  }, 60_000);
  afterAll(async () => h?.close(), 30_000);

  /** A stored answer of an Infer step, written `days` ago. */
  const seed = async (days: number, workspaceId = ws) => {
    const runId = ids.run();
    await h.db.query(
      `insert into invoker.inferences (run_id, step_id, workspace_id, outcome, created_at)
       values ($1, 'ask', $2, $3::jsonb, now() - make_interval(days => $4::int))`,
      [runId, workspaceId, JSON.stringify({ data: { text: `answer of ${runId}` }, usage: { model: 'm', tokensIn: 1, tokensOut: 1 } }), days],
    );
    return runId;
  };
  const left = async (runIds: string[]) =>
    (await h.db.query<{ run_id: string }>('select run_id from invoker.inferences where run_id = any($1::text[])', [runIds])).map((r) => r.run_id).sort();

  it('deletes only stored Infer answers past the window; a hand-off delivered again during the pass still gets its stored answer', async () => {
    await h.bus.ensureStream(streams.gatewayFacts);
    await h.bus.publish(
      subjects.workspaceUpserted,
      toBinary(WorkspaceUpsertedSchema, create(WorkspaceUpsertedSchema, { workspaceId: wsLong, name: 'long', signingKey: 'k', retentionDays: 60 })),
    );
    await until('retention projection', async () => (await h.db.query('select 1 from invoker.retention where workspace_id = $1 and days = 60', [wsLong])).length === 1 || undefined);

    const old: string[] = [];
    for (let i = 0; i < 11; i++) old.push(await seed(40));
    const fresh = [await seed(0), await seed(29)];
    const keptLong = await seed(40, wsLong);
    const goneLong = await seed(61, wsLong);

    const retention = new Retention({ db: h.db, log: createLogger({ level: 'silent' }), schema: 'invoker', targets: invokerRetention }, { batch: 4 });
    // The scheduler hands a fresh step over again while the pass runs: answered from storage (no provider is configured here).
    const again = create(StepHandoffSchema, {
      workspaceId: ws, runId: fresh[0]!, stepId: 'ask', stepName: 'ask', workflow: 'w', app: 'a',
      opcode: enc.encode(JSON.stringify({ op: 'Infer', id: 'ask', name: 'ask', data: { model: 'm', prompt: 'hi' } })),
    });
    const [deleted] = await Promise.all([retention.sweep(), h.bus.publish(subjects.requestInference, toBinary(StepHandoffSchema, again), { msgId: uniqueName('again') })]);
    const answer = await until('the ResolveStep of the repeated hand-off', () => resolved.find((r) => r.runId === fresh[0]));
    expect(answer).toMatchObject({ stepId: 'ask', data: { text: `answer of ${fresh[0]}` } });

    expect(deleted).toEqual({ inferences: old.length + 1 });
    expect(await left([...old, goneLong])).toEqual([]);
    expect(await left([...fresh, keptLong])).toEqual([...fresh, keptLong].sort());
    expect(await retention.sweep()).toEqual({ inferences: 0 });
  });

  it("a replica's pass at start deletes old answers", async () => {
    const old = [await seed(31), await seed(35)];
    const fresh = await seed(1);
    await h.replica();
    await until("the replica's start pass", async () => ((await left(old)).length === 0 ? true : undefined), 20_000);
    expect(await left([fresh])).toEqual([fresh]);
  });
});
