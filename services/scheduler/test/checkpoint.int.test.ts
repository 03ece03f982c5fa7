import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Bus } from '@dws/bus';
import { create, fromBinary, InvokeRequestSchema, InvokeResult_Outcome, InvokeResultSchema, toBinary } from '@dws/proto';
import { hashStepId } from '@dws/protocol';
import { modes, ScriptedInvoker, startHarness, type Harness } from './harness.js';

jest.setTimeout(60_000);

const enc = new TextEncoder();
const dec = new TextDecoder();

/** What one pass of the hand-played runner does, given the invoke body; it may checkpoint through `cp`. */
type Pass = (body: any, cp: (name: string, data: unknown) => Promise<{ status: number; body: any }>) => Promise<{ status: number; body: any }>;

const stepRun = (name: string, data: unknown) => ({ op: 'StepRun', id: hashStepId(name), name, data });

/**
 * Checkpoints: a runner stores each finished step with the scheduler driving
 * its pass (`runs.checkpoint`, as the gateway and the invoker forward it)
 * and goes on in the same pass once it is durable.
 */
describe.each(modes())('scheduler checkpoints (%s)', (mode) => {
  let h: Harness;
  let pass: Pass;
  const bodies: any[] = [];
  beforeAll(async () => {
    const invoker = new ScriptedInvoker({});
    // Played by hand: each pass may call back into the scheduler before it replies.
    invoker.serve = (bus: Bus) =>
      bus.respond('invoker.invoke', 'invoker', async (data) => {
        const req = fromBinary(InvokeRequestSchema, data);
        const body = JSON.parse(dec.decode(req.body));
        bodies.push(body);
        const cp = (name: string, value: unknown) =>
          h.call('runs.checkpoint', { params: { id: body.ctx.runId }, body: { token: body.ctx.checkpoint, opcodes: [stepRun(name, value)], logs: [] } }).catch((err: any) => ({
            status: err.status as number,
            body: { error: { code: err.code } },
          }));
        const reply = await pass(body, cp);
        return toBinary(InvokeResultSchema, create(InvokeResultSchema, { outcome: InvokeResult_Outcome.REPLY, status: reply.status, body: enc.encode(JSON.stringify(reply.body)) }));
      });
    h = await startHarness(mode, invoker);
  });
  afterAll(async () => h?.close());

  const passesOf = (runId: string) => bodies.filter((b) => b.ctx.runId === runId);

  it('stores each checkpointed step at once, and a whole run takes one pass', async () => {
    const seen: number[] = [];
    pass = async (body, cp) => {
      const memo = Object.keys(body.steps).length;
      for (let i = 0; i < 3; i++) {
        const r = await cp(`s${i}`, { i });
        expect(r).toMatchObject({ status: 200, body: { stored: true } });
        // Durable before the runner goes on: the step reads back already.
        const steps = (await h.call('runs.steps', { params: { id: body.ctx.runId } })).body;
        seen.push(steps.length);
      }
      return { status: 200, body: { data: { memo }, logs: [] } };
    };
    const id = await h.start('cp');
    const run = await h.waitFor(id, ['succeeded']);
    expect(run.result).toEqual({ memo: 0 });
    expect(passesOf(id)).toHaveLength(1);
    expect(seen).toEqual([1, 2, 3]);
    const steps = (await h.call('runs.steps', { params: { id } })).body;
    expect(steps.map((s: any) => [s.name, s.status, s.output])).toEqual([0, 1, 2].map((i) => [`s${i}`, 'succeeded', { i }]));
    // Gap-free timeline, one step_status per step.
    const frames = (await h.db.query<{ seq: number; kind: string }>('select seq, kind from scheduler.frames where run_id = $1 order by seq', [id])).map((f) => Number(f.seq));
    expect(frames).toEqual(frames.map((_, i) => i + 1));
    const stepFrames = await h.db.query('select 1 from scheduler.frames where run_id = $1 and kind = $2', [id, 'step_status']);
    expect(stepFrames).toHaveLength(3);
  });

  // A run's stored status is `running` only once a pass of it applied: one that was queued (flow
  // control, children, replays) or parked (a sleep) is claimed under its old status. Its checkpoints
  // must be taken all the same, or every such run pays one pass more.
  it('takes the checkpoints of a run claimed from the queue, and of one woken from a sleep, in that same pass', async () => {
    const statuses: string[] = [];
    pass = async (body, cp) => {
      if (!body.steps[hashStepId('nap')]) return { status: 206, body: { opcodes: [{ op: 'Sleep', id: hashStepId('nap'), name: 'nap', sleepMs: 50 }], logs: [] } };
      for (let i = 0; i < 2; i++) {
        expect(await cp(`w${i}`, i)).toMatchObject({ status: 200, body: { stored: true } });
        statuses.push((await h.call('runs.get', { params: { id: body.ctx.runId } })).body.status);
      }
      return { status: 200, body: { data: 'woke', logs: [] } };
    };
    const slept = await h.start('cp-sleep');
    expect((await h.waitFor(slept, ['succeeded'])).result).toBe('woke');
    expect(passesOf(slept)).toHaveLength(2);
    expect(statuses).toEqual(['running', 'running']);

    pass = async (body, cp) => {
      for (let i = 0; i < 2; i++) expect(await cp(`q${i}`, i)).toMatchObject({ status: 200, body: { stored: true } });
      return { status: 200, body: { data: 'from the queue', logs: [] } };
    };
    const queued = await h.start('cp-queued', {}, { flow: { concurrencyLimit: 5, concurrencyKey: `k-${Date.now()}` } });
    expect((await h.waitFor(queued, ['succeeded'])).result).toBe('from the queue');
    expect(passesOf(queued)).toHaveLength(1);
    const frames = await h.db.query<{ seq: number; kind: string; status: string | null }>(
      `select seq, kind, payload->>'status' as status from scheduler.frames where run_id = $1 order by seq`,
      [queued],
    );
    expect(frames.map((f) => Number(f.seq))).toEqual(frames.map((_, i) => i + 1));
    expect(frames.filter((f) => f.kind === 'run_status').map((f) => f.status)).toEqual(['queued', 'running', 'succeeded']);
  });

  it('a runner that dies after its checkpoints re-runs only the step in flight', async () => {
    const ran: string[] = [];
    let first = true;
    pass = async (body, cp) => {
      for (let i = 0; i < 4; i++) {
        const name = `s${i}`;
        if (body.steps[hashStepId(name)]) continue;
        ran.push(name);
        if (first && i === 2) {
          // Dies mid-step: the transport error the invoker would report.
          first = false;
          return { status: 503, body: { error: { message: 'runner died' }, logs: [] } };
        }
        await cp(name, i);
      }
      return { status: 200, body: { data: 'done', logs: [] } };
    };
    const id = await h.start('cp');
    await h.waitFor(id, ['succeeded'], 20_000);
    expect(ran).toEqual(['s0', 's1', 's2', 's2', 's3']);
    // The retried pass was sent the checkpointed steps.
    const second = passesOf(id)[1];
    expect(Object.keys(second.steps).sort()).toEqual([hashStepId('s0'), hashStepId('s1')].sort());
  });

  it('refuses a checkpoint of another pass, a stale token, an ended pass and anything but finished steps', async () => {
    let token = '';
    let results: any[] = [];
    pass = async (body, cp) => {
      token = body.ctx.checkpoint;
      const [replica, n, mac] = token.split('.');
      const call = (b: unknown) =>
        h.call('runs.checkpoint', { params: { id: body.ctx.runId }, body: b }).then(
          (r) => r.status,
          (err: any) => `${err.status} ${err.code}`,
        );
      results = [
        // Another pass under this pass's MAC: forged.
        await call({ token: `${replica}.${Number(n) + 1}.${mac}`, opcodes: [stepRun('x', 1)] }),
        await call({ token: `scheduler-00000000-0000-0000-0000-000000000000.${n}.${mac}`, opcodes: [stepRun('x', 1)] }),
        await call({ token: 'nonsense', opcodes: [stepRun('x', 1)] }),
        await call({ token, opcodes: [{ op: 'Sleep', id: hashStepId('nap'), name: 'nap', sleepMs: 10 }] }),
        await call({ token, opcodes: [{ ...stepRun('y', 1), error: { message: 'no' } }] }),
        await call({ token, opcodes: [] }),
        await cp('ok', 1).then((r) => r.status),
      ];
      return { status: 200, body: { data: null, logs: [] } };
    };
    const id = await h.start('cp');
    await h.waitFor(id, ['succeeded']);
    expect(results).toEqual([
      '400 invalid_checkpoint',
      '409 pass_not_current',
      '400 invalid_checkpoint',
      '400 invalid_checkpoint',
      '400 invalid_checkpoint',
      '400 invalid_checkpoint',
      200,
    ]);
    // The pass is over: its token no longer stores anything.
    await expect(h.call('runs.checkpoint', { params: { id }, body: { token, opcodes: [stepRun('late', 1)] } })).rejects.toMatchObject({ status: 409 });
    const steps = (await h.call('runs.steps', { params: { id } })).body;
    expect(steps.map((s: any) => s.name)).toEqual(['ok']);
  });

  it('a checkpoint repeated after its answer was lost stores the step once; the reply repeating it changes nothing', async () => {
    pass = async (body, cp) => {
      if (Object.keys(body.steps).length > 0) return { status: 200, body: { data: 'again', logs: [] } };
      await cp('a', 1);
      await cp('a', 1);
      // The reply carries it too (the runner never heard the answer).
      return { status: 206, body: { opcodes: [stepRun('a', 1)], logs: [] } };
    };
    const id = await h.start('cp');
    await h.waitFor(id, ['succeeded']);
    const steps = (await h.call('runs.steps', { params: { id } })).body;
    expect(steps.map((s: any) => s.name)).toEqual(['a']);
    const stepFrames = await h.db.query('select 1 from scheduler.frames where run_id = $1 and kind = $2', [id, 'step_status']);
    expect(stepFrames).toHaveLength(1);
  });

  it('a pause asked for mid-pass refuses the next checkpoint: the run stops at that step boundary', async () => {
    const statuses: number[] = [];
    pass = async (body, cp) => {
      if (Object.keys(body.steps).length > 0) return { status: 200, body: { data: 'resumed', logs: [] } };
      statuses.push((await cp('a', 1)).status);
      await h.call('runs.pause', { params: { id: body.ctx.runId } });
      const r = await cp('b', 2);
      statuses.push(r.status);
      // Not stored: the reply carries it.
      return { status: 206, body: { opcodes: [stepRun('b', 2)], logs: [] } };
    };
    const id = await h.start('cp');
    await h.waitFor(id, ['paused']);
    expect(statuses).toEqual([200, 409]);
    const steps = (await h.call('runs.steps', { params: { id } })).body;
    expect(steps.map((s: any) => s.name)).toEqual(['a', 'b']);
    await h.call('runs.resume', { params: { id } });
    expect((await h.waitFor(id, ['succeeded'])).result).toBe('resumed');
  });

  it('with two replicas, a checkpoint reaching the other one is relayed to the replica driving the pass', async () => {
    const replica = await h.replica();
    try {
      const codes: number[] = [];
      pass = async (_body, cp) => {
        for (let i = 0; i < 12; i++) codes.push((await cp(`r${i}`, i)).status);
        return { status: 200, body: { data: 'ok', logs: [] } };
      };
      const ids = await Promise.all([0, 1, 2].map(() => h.start('cp')));
      for (const id of ids) await h.waitFor(id, ['succeeded']);
      expect(codes.every((c) => c === 200)).toBe(true);
      for (const id of ids) expect((await h.call('runs.steps', { params: { id } })).body).toHaveLength(12);
    } finally {
      await replica.handle.stop();
    }
  });
});
