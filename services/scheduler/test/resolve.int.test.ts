import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { create, fromBinary, ResolveStepSchema, RunFinishedSchema, StepHandoffSchema, toBinary } from '@dws/proto';
import { hashStepId } from '@dws/protocol';
import { streams, subjects } from '@dws/runtime';
import { listApproval, modes, ScriptedInvoker, startHarness, until, WS, type Harness } from './harness.js';

jest.setTimeout(60_000);

const enc = new TextEncoder();
const dec = new TextDecoder();

const invoker = new ScriptedInvoker({
  gated: () => [{ run: 'before' }, { approval: 'sign-off', timeoutMs: 300 }, { run: 'after' }],
});

const STEP = hashStepId('sign-off');

describe.each(modes())('scheduler: steps resolved from outside (ResolveStep) (%s)', (mode) => {
  let h: Harness;
  const handoffs: { runId: string; stepId: string; stepName: string; opcode: any }[] = [];
  /** Runs whose end the scheduler sent approvals (`approvals.cmd.close`). */
  const closed: { runId: string; status: string }[] = [];
  let n = 0;
  const resolve = (runId: string, r: { data?: unknown; error?: string }) => {
    const msg = create(ResolveStepSchema, {
      workspaceId: WS,
      runId,
      stepId: STEP,
      ...(r.error !== undefined ? { errorMessage: r.error } : { data: enc.encode(JSON.stringify(r.data)) }),
    });
    // A distinct msgId each time: the scheduler itself must absorb a repeat, not only the stream's dedupe.
    return h.bus.publish(subjects.resolveStep, toBinary(ResolveStepSchema, msg), { msgId: `t${++n}` });
  };
  /**
   * The run parked on its approval: the hand-off went out; the run reads needsAttention only once the
   * approvals service (played here) says the approval is listed, and the workspace's run stream says so.
   */
  const parked = async (id: string) => {
    await until(() => handoffs.some((x) => x.runId === id), 10_000, `the hand-off of ${id}`);
    const before = (await h.call('runs.get', { params: { id } })).body;
    expect(before).toMatchObject({ status: 'waiting' });
    expect(before.needsAttention).toBeUndefined();
    const frames: any[] = [];
    const live = h.bus.subscribe(subjects.workspaceRuns(WS), (data) => void frames.push(JSON.parse(dec.decode(data))));
    try {
      await listApproval(h.bus, id, STEP);
      await until(async () => (await h.call('runs.get', { params: { id } })).body.needsAttention === true, 10_000, `${id} needing attention`);
      await until(() => frames.some((f) => f.runId === id && f.needsAttention === true), 10_000, `the run_status frame of ${id}`);
      expect(frames.find((f) => f.runId === id)).toMatchObject({ kind: 'run_status', status: 'waiting', workflow: 'gated' });
    } finally {
      await live.stop();
    }
  };

  beforeAll(async () => {
    h = await startHarness(mode, invoker);
    await h.bus.consume({ stream: streams.approvalsCmds.name, durable: 'test-approvals', filterSubject: subjects.requestApproval }, async (m) => {
      const x = fromBinary(StepHandoffSchema, m.data);
      handoffs.push({ runId: x.runId, stepId: x.stepId, stepName: x.stepName, opcode: JSON.parse(dec.decode(x.opcode)) });
    });
    await h.bus.consume({ stream: streams.approvalsCmds.name, durable: 'test-close', filterSubject: subjects.closeApprovals }, async (m) => {
      const f = fromBinary(RunFinishedSchema, m.data);
      closed.push({ runId: f.runId, status: f.status });
    });
  });
  afterAll(async () => h?.close());

  it('a run parks on an Approval with no deadline, needs attention, and resumes with the decision it is sent', async () => {
    const id = await h.start('gated');
    await parked(id);
    const handoff = handoffs.find((x) => x.runId === id)!;
    expect(handoff).toMatchObject({ stepId: STEP, stepName: 'sign-off', opcode: { op: 'Approval', id: STEP, timeoutMs: 300 } });
    // The approvals service owns the timeout: the step has no wake time and the run no lease to wake it.
    const [step] = await h.db.query<{ status: string; wake_at: unknown }>('select status, wake_at from scheduler.steps where run_id = $1 and step_id = $2', [id, STEP]);
    expect(step).toEqual({ status: 'waiting', wake_at: null });
    const [run] = await h.db.query<{ lease_until: unknown }>('select lease_until from scheduler.runs where id = $1', [id]);
    expect(run!.lease_until).toBeNull();
    const listed = (await h.call('runs.list', { query: { status: 'waiting' } })).body.find((r: any) => r.id === id);
    expect(listed).toMatchObject({ status: 'waiting', needsAttention: true });

    const decision = { gated: true, approvalId: 'apr_1', status: 'approved', args: { amount: 5 }, decidedBy: 'alice', decidedVia: 'console' };
    await resolve(id, { data: decision });
    const done = await h.waitFor(id, ['succeeded']);
    expect(done.result.results['sign-off']).toEqual(decision);
    expect(done.needsAttention).toBeUndefined();
    expect(invoker.count(id, 'after')).toBe(1);
  });

  it('a repeated ResolveStep is a no-op: the step keeps its first result and the run is not driven again', async () => {
    const id = await h.start('gated');
    await parked(id);
    await resolve(id, { data: { first: true } });
    await h.waitFor(id, ['succeeded']);
    const passes = invoker.bodies.filter((b) => b.ctx.runId === id).length;
    await resolve(id, { data: { second: true } });
    await resolve(id, { error: 'late error' });
    // A marker resolved after the repeats: once it is applied, the repeats were handled too.
    const marker = await h.start('gated');
    await parked(marker);
    await resolve(marker, { data: { marker: true } });
    await h.waitFor(marker, ['succeeded']);
    const [step] = await h.db.query<{ status: string; data: string }>('select status, data from scheduler.steps where run_id = $1 and step_id = $2', [id, STEP]);
    expect(step).toEqual({ status: 'succeeded', data: JSON.stringify({ first: true }) });
    expect((await h.call('runs.get', { params: { id } })).body.status).toBe('succeeded');
    expect(invoker.bodies.filter((b) => b.ctx.runId === id)).toHaveLength(passes);
  });

  it('approvals hears of a run that ends with its Approval open, and of no other run', async () => {
    const resolved = await h.start('gated');
    await parked(resolved);
    await resolve(resolved, { data: { ok: true } });
    await h.waitFor(resolved, ['succeeded']);
    const cancelled = await h.start('gated');
    await until(() => handoffs.some((x) => x.runId === cancelled), 10_000, `the hand-off of ${cancelled}`);
    expect((await h.call('runs.cancel', { params: { id: cancelled } })).body.status).toBe('cancelled');
    await until(() => closed.some((c) => c.runId === cancelled), 15_000, `approvals told that ${cancelled} ended`);
    expect(closed.filter((c) => c.runId === cancelled)).toEqual([{ runId: cancelled, status: 'cancelled' }]);
    // Ended earlier with nothing open: approvals never hears of it.
    expect(closed.some((c) => c.runId === resolved)).toBe(false);
  });

  it('a ResolveStep carrying an error fails the step, and the run with it when the workflow does not catch it', async () => {
    const id = await h.start('gated');
    await parked(id);
    await resolve(id, { error: 'Approval apr_2 (refund) timed out: onTimeout is fail.' });
    const run = await h.waitFor(id, ['failed']);
    expect(run.error.message).toBe('Approval apr_2 (refund) timed out: onTimeout is fail.');
    const steps = (await h.call('runs.steps', { params: { id } })).body;
    expect(steps.find((s: any) => s.name === 'sign-off')).toMatchObject({ status: 'failed', error: { message: 'Approval apr_2 (refund) timed out: onTimeout is fail.' } });
    expect(steps.some((s: any) => s.name === 'after')).toBe(false);
  });
});
