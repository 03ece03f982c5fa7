import { describe, expect, it } from '@jest/globals';
import { signInvoke, type InvokeRequestBody, type Memo, type RunnerLogLine, type StepRunOpcode } from '@dws/protocol';
import { executePass, type Checkpoint } from './execution.js';
import { handleInvoke, type InvokeTarget } from './serve.js';
import type { WorkflowHandler } from './types.js';

const input = (steps: Memo = {}): InvokeRequestBody => ({
  event: { name: 'e', data: {} },
  steps,
  ctx: { runId: 'run_1', workflow: 'wf', attempt: 0, app: 'default', runner: '', checkpoint: 'scheduler-x.0' },
});

/** A service that stores every checkpoint until `refuseFrom` (1-based call number). */
function service(refuseFrom = Infinity) {
  const stored: StepRunOpcode[] = [];
  const lines: RunnerLogLine[] = [];
  let calls = 0;
  const checkpoint: Checkpoint = async (ops, logs) => {
    calls++;
    await new Promise((r) => setImmediate(r));
    if (calls >= refuseFrom) return false;
    stored.push(...ops);
    lines.push(...logs);
    return true;
  };
  return { checkpoint, stored, lines, calls: () => calls };
}

const chain =
  (n: number, ran: string[] = [], order: string[] = []): WorkflowHandler =>
  async ({ step, logger }) => {
    let total = 0;
    for (let i = 0; i < n; i++) {
      total += await step.run(`s${i}`, () => {
        ran.push(`s${i}`);
        order.push(`run s${i}`);
        logger.info('in step', { i });
        return i;
      });
      order.push(`past s${i}`);
    }
    return total;
  };

describe('checkpoints (steps stored while the pass goes on)', () => {
  it('stores the finished steps before the next one starts, and ends the run in one pass', async () => {
    const svc = service();
    const order: string[] = [];
    const wrapped: Checkpoint = async (ops, logs) => {
      const ok = await svc.checkpoint(ops, logs);
      order.push(`stored ${ops.map((o) => o.name).join(',')}`);
      return ok;
    };
    // No run-ahead budget: the checkpoints alone carry the pass on.
    const r = await executePass(chain(4, [], order), input(), { checkpoint: wrapped, stepBudgetMs: 0 });
    expect(r).toMatchObject({ status: 200, body: { data: 6 } });
    expect(svc.stored.map((o) => [o.name, o.data])).toEqual([0, 1, 2].map((i) => [`s${i}`, i]));
    expect(order.slice(0, 6)).toEqual(['run s0', 'past s0', 'stored s0', 'run s1', 'past s1', 'stored s1']);
    // The last step rides the 200 (no round trip for it); nothing stored is repeated there.
    expect((r.body as { opcodes?: StepRunOpcode[] }).opcodes?.map((o) => o.name)).toEqual(['s3']);
    // Each step's log lines rode the checkpoint that stored it.
    expect(svc.lines.filter((l) => l.message === 'in step').map((l) => l.scope)).toEqual(['s0', 's1', 's2']);
  });

  it('a one-step run makes no checkpoint at all', async () => {
    const svc = service();
    const r = await executePass(chain(1), input(), { checkpoint: svc.checkpoint });
    expect(svc.calls()).toBe(0);
    expect(r).toMatchObject({ status: 200, body: { data: 0, opcodes: [{ name: 's0' }] } });
  });

  it('a refused checkpoint ends the pass: no new step starts, the reply carries the unstored step and its logs', async () => {
    const svc = service(3);
    const ran: string[] = [];
    const r = await executePass(chain(6, ran), input(), { checkpoint: svc.checkpoint });
    expect(svc.stored.map((o) => o.name)).toEqual(['s0', 's1']);
    expect(ran).toEqual(['s0', 's1', 's2']);
    expect(r.status).toBe(206);
    const body = r.body as { opcodes: StepRunOpcode[]; logs: RunnerLogLine[] };
    expect(body.opcodes.map((o) => o.name)).toEqual(['s2']);
    expect(body.logs.some((l) => l.scope === 's2' && l.message === 'in step')).toBe(true);
    expect(svc.calls()).toBe(3);
  });

  it('a checkpoint that throws (network) counts as not stored', async () => {
    const r = await executePass(chain(3), input(), {
      checkpoint: async () => {
        throw new Error('ECONNREFUSED');
      },
    });
    expect(r.status).toBe(206);
    expect((r.body as { opcodes: StepRunOpcode[] }).opcodes.map((o) => o.name)).toEqual(['s0']);
  });

  it('replays stored steps from the memo on the next pass and runs only what is new', async () => {
    const svc = service(3);
    const ran: string[] = [];
    await executePass(chain(4, ran), input(), { checkpoint: svc.checkpoint });
    const memo: Memo = {};
    for (const o of svc.stored) memo[o.id] = { data: o.data };
    const again = service();
    const r = await executePass(chain(4, ran), input(memo), { checkpoint: again.checkpoint });
    expect(r).toMatchObject({ status: 200, body: { data: 6 } });
    // s0 and s1 ran once; s2 ran again (its checkpoint was refused and this memo lacks it).
    expect(ran).toEqual(['s0', 's1', 's2', 's2', 's3']);
  });

  it('stops starting steps after checkpointPassMs: the pass replies 206 with nothing new', async () => {
    let clock = 0;
    const svc = service();
    const handler: WorkflowHandler = async ({ step }) => {
      for (let i = 0; i < 10; i++) await step.run(`s${i}`, () => (clock += 10));
    };
    const r = await executePass(handler, input(), { checkpoint: svc.checkpoint, checkpointPassMs: 25, now: () => clock });
    expect(svc.stored.map((o) => o.name)).toEqual(['s0', 's1']);
    expect(r).toMatchObject({ status: 206, body: { opcodes: [{ name: 's2' }] } });
  });

  it('stores parallel steps in one checkpoint, and never a failed or a parked step', async () => {
    const svc = service();
    const handler: WorkflowHandler = async ({ step }) => {
      await Promise.all([step.run('a', () => 1), step.run('b', () => 2)]);
      await step.run('c', () => 3);
      await step.sleep('nap', '1s');
    };
    const r = await executePass(handler, input(), { checkpoint: svc.checkpoint });
    expect(svc.calls()).toBe(1);
    expect(svc.stored.map((o) => o.name).sort()).toEqual(['a', 'b']);
    expect((r.body as { opcodes: { op: string; name: string }[] }).opcodes.map((o) => `${o.op} ${o.name}`)).toEqual(['StepRun c', 'Sleep nap']);
    const failing: WorkflowHandler = async ({ step }) => {
      await step.run('boom', () => {
        throw new Error('no');
      });
    };
    const f = service();
    const r2 = await executePass(failing, input(), { checkpoint: f.checkpoint });
    expect(f.calls()).toBe(0);
    expect((r2.body as { opcodes: StepRunOpcode[] }).opcodes[0]).toMatchObject({ name: 'boom', error: { message: 'no' } });
  });
});

describe('handleInvoke and checkpoints', () => {
  const KEY = 'signkey_checkpoint_test';
  const body = (workflow: string, checkpoint?: string) =>
    JSON.stringify({ event: { name: 'e', data: {} }, steps: {}, ctx: { runId: 'run_1', workflow, attempt: 0, app: 'a', runner: '', ...(checkpoint ? { checkpoint } : {}) } });
  const calls: string[] = [];
  const target = (budget: number): InvokeTarget => ({
    signingKey: KEY,
    passFor: () => ({ stepBudgetMs: budget }),
    checkpoint: (runId, token) => async (ops) => {
      calls.push(`${runId} ${token} ${ops.map((o) => o.name).join(',')}`);
      return true;
    },
    resolve: () => chain(3),
  });
  const invoke = (t: InvokeTarget, raw: string) => handleInvoke(t, raw, { 'x-service-signature': signInvoke(KEY, raw) });

  it('checkpoints under the invoke token only when the invoke offers it', async () => {
    calls.length = 0;
    const r = await invoke(target(0), body('wf', 'scheduler-a.7'));
    expect(r.status).toBe(200);
    expect(calls).toEqual(['run_1 scheduler-a.7 s0', 'run_1 scheduler-a.7 s1']);
    calls.length = 0;
    expect((await invoke(target(0), body('wf'))).status).toBe(206);
    expect(calls).toEqual([]);
  });

  it('a workflow with a run-ahead budget runs ahead without checkpoints', async () => {
    calls.length = 0;
    const r = await invoke(target(250), body('wf', 'scheduler-a.7'));
    expect(r).toMatchObject({ status: 200, body: { data: 3 } });
    expect(calls).toEqual([]);
  });
});
