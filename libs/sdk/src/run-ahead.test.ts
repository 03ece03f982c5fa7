import { describe, expect, it } from '@jest/globals';
import { hashStepId, type InvokeRequestBody, type Memo, type Opcode, type RunnerLogLine, type StepRunOpcode } from '@dws/protocol';
import { NonRetriableError } from './errors.js';
import { executePass } from './execution.js';
import { fitReply } from './reply-size.js';
import { createRunner } from './runner.js';
import { testWorkflow } from './testing.js';
import type { WorkflowHandler } from './types.js';

const input = (steps: Memo = {}): InvokeRequestBody => ({
  event: { name: 'e', data: {} },
  steps,
  ctx: { runId: 'run_1', workflow: 'wf', attempt: 0, app: 'default', runner: '' },
});
const ops = (r: Awaited<ReturnType<typeof executePass>>): StepRunOpcode[] => (r.body as { opcodes: StepRunOpcode[] }).opcodes;
const memoFrom = (opcodes: StepRunOpcode[], memo: Memo = {}): Memo => {
  for (const o of opcodes) memo[o.id] = o.error ? { error: o.error } : { data: o.data };
  return memo;
};

describe('running ahead (several sequential steps per pass)', () => {
  const chain = (n: number, ran: string[] = []): WorkflowHandler =>
    async ({ step, logger }) => {
      let total = 0;
      for (let i = 0; i < n; i++) {
        total += await step.run(`s${i}`, () => {
          ran.push(`s${i}`);
          return i;
        });
        logger.info('after step', { i });
      }
      return total;
    };

  it('runs every sequential step in one pass, reports each as its own opcode, and replays to 200', async () => {
    const ran: string[] = [];
    const first = await executePass(chain(5, ran), input(), { stepBudgetMs: 1000 });
    // The handler returned in the same pass: 200 carrying the five steps.
    expect(first).toMatchObject({ status: 200, body: { data: 10 } });
    expect(ops(first).map((o) => [o.name, o.data])).toEqual([0, 1, 2, 3, 4].map((i) => [`s${i}`, i]));
    expect(ran).toEqual(['s0', 's1', 's2', 's3', 's4']);
    const second = await executePass(chain(5, ran), input(memoFrom(ops(first))), { stepBudgetMs: 1000 });
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ data: 10 });
    expect(ran).toHaveLength(5);
    // Root log lines carry the same (scope, index) on both passes: the service stores them once.
    const keys = (r: typeof first) => r.body.logs.map((l: RunnerLogLine) => `${l.scope}#${l.index}`);
    expect(keys(second)).toEqual(keys(first));
  });

  it('stops at the budget: the step that finishes past it ends the pass', async () => {
    let clock = 0;
    const handler: WorkflowHandler = async ({ step }) => {
      for (let i = 0; i < 10; i++) await step.run(`s${i}`, () => (clock += 10));
    };
    const r = await executePass(handler, input(), { stepBudgetMs: 25, now: () => clock });
    expect(ops(r).map((o) => o.name)).toEqual(['s0', 's1', 's2']);
  });

  it('stops at a failing step and reports it with the steps before it', async () => {
    const ran: string[] = [];
    const handler: WorkflowHandler = async ({ step }) => {
      await step.run('a', () => ran.push('a'));
      await step.run('b', () => {
        ran.push('b');
        throw new NonRetriableError('no');
      });
      await step.run('c', () => ran.push('c'));
    };
    const r = await executePass(handler, input(), { stepBudgetMs: 1000 });
    expect(ops(r).map((o) => [o.name, o.retriable])).toEqual([
      ['a', undefined],
      ['b', false],
    ]);
    expect(ran).toEqual(['a', 'b']);
  });

  it('hands the handler its own copy: mutating it does not change what is reported', async () => {
    const handler: WorkflowHandler = async ({ step }) => {
      const o = await step.run('load', () => ({ n: 1 }));
      o.n = 99;
      await step.run('next', () => o.n);
    };
    const r = await executePass(handler, input(), { stepBudgetMs: 1000 });
    expect(ops(r).map((o) => o.data)).toEqual([{ n: 1 }, 99]);
  });

  it('reports finished steps even when the handler then throws (the next pass throws again)', async () => {
    const handler: WorkflowHandler = async ({ step }) => {
      await step.run('a', () => 1);
      throw new Error('outside a step');
    };
    const first = await executePass(handler, input(), { stepBudgetMs: 1000 });
    expect(first.status).toBe(206);
    expect(ops(first).map((o) => o.name)).toEqual(['a']);
    const second = await executePass(handler, input(memoFrom(ops(first))), { stepBudgetMs: 1000 });
    expect(second.status).toBe(500);
  });

  it('stops running ahead once half a MiB of results waits in the reply', async () => {
    const big = 'x'.repeat(300 * 1024);
    const handler: WorkflowHandler = async ({ step }) => {
      for (let i = 0; i < 5; i++) await step.run(`big${i}`, () => big);
    };
    const r = await executePass(handler, input(), { stepBudgetMs: 10_000 });
    expect(ops(r).map((o) => o.name)).toEqual(['big0', 'big1']);
    expect(Buffer.byteLength(JSON.stringify(r.body))).toBeLessThan(1024 * 1024);
  });

  it('keeps a parallel reply under 1 MiB: opcodes that do not fit wait for the next pass', async () => {
    const big = 'x'.repeat(300 * 1024);
    const handler: WorkflowHandler = ({ step }) => Promise.all([0, 1, 2, 3, 4].map((i) => step.run(`p${i}`, () => big)));
    const r = await executePass(handler, input(), { stepBudgetMs: 0 });
    expect(r.status).toBe(206);
    expect(ops(r).map((o) => o.name)).toEqual(['p0', 'p1', 'p2']);
    expect(Buffer.byteLength(JSON.stringify(r.body))).toBeLessThanOrEqual(1024 * 1024);
    expect(r.body.logs.at(-1)?.message).toMatch(/2 finished steps left out of this reply/);
  });

  it('fails a step whose input and result together exceed the reply, non-retriably', async () => {
    const half = 'x'.repeat(600 * 1024);
    const r = await executePass(({ step }) => step.run('both', () => half, { input: half }), input());
    expect(ops(r)[0]).toMatchObject({ name: 'both', retriable: false, error: { message: expect.stringMatching(/capped at 1 MiB/) } });
    expect(ops(r)[0]!.data).toBeUndefined();
  });

  it('drives a 500-step workflow in one pass when the runner, the workflow or the env sets a budget', async () => {
    const viaRunner = createRunner({ apiKey: 'k', env: {}, stepBudgetMs: 60_000 }).workflow('long', chain(500));
    expect(await testWorkflow(viaRunner)).toMatchObject({ result: (499 * 500) / 2, passes: 1 });
    const viaWorkflow = createRunner({ apiKey: 'k', env: {} }).workflow('long', { stepBudgetMs: 60_000 }, chain(500));
    expect(await testWorkflow(viaWorkflow)).toMatchObject({ passes: 1 });
    expect(viaWorkflow.toRegistration()).toEqual({ name: 'long' });
    const viaEnv = createRunner({ apiKey: 'k', env: { SERVICE_STEP_BUDGET_MS: '60000' } }).workflow('long', chain(500));
    expect(await testWorkflow(viaEnv)).toMatchObject({ passes: 1 });
    // The default: one new step per pass, each result stored before the next step starts.
    const byDefault = createRunner({ apiKey: 'k', env: {} }).workflow('long', chain(20));
    expect(await testWorkflow(byDefault)).toMatchObject({ passes: 20 });
    expect(() => createRunner({ apiKey: 'k', env: { SERVICE_STEP_BUDGET_MS: 'soon' } })).toThrow(/SERVICE_STEP_BUDGET_MS/);
  });
});

describe('fitReply', () => {
  const op = (i: number, size: number): Opcode => ({ op: 'StepRun', id: String(i), name: `s${i}`, data: 'x'.repeat(size) });
  const line = (i: number, size: number): RunnerLogLine => ({ level: 'info', message: 'y'.repeat(size), scope: '@root', index: i, tsMs: 0 });

  it('passes a small reply through untouched', () => {
    const r = fitReply([op(0, 10)], [line(0, 10)], 1024 * 1024);
    expect(r).toEqual({ opcodes: [op(0, 10)], logs: [line(0, 10)] });
  });

  it('keeps opcodes first, then as many log lines as fit, and says what it cut', () => {
    const r = fitReply([op(0, 500), op(1, 500), op(2, 500)], [line(0, 300), line(1, 300)], 4096 + 1500);
    expect(r.opcodes.map((o) => o.name)).toEqual(['s0', 's1']);
    expect(r.logs.map((l) => l.message.slice(0, 24))).toEqual(['y'.repeat(24), expect.stringMatching(/^1 log lines dropped/), expect.stringMatching(/^1 finished steps left/)]);
  });
});

describe('determinism guard', () => {
  it('reports memo entries not reached while a new step ran (a renamed step)', async () => {
    const handler: WorkflowHandler = async ({ step }) => {
      await step.run('load-user', () => 1); // was 'load' on the pass that wrote the memo
      await step.run('send', () => 2);
    };
    const r = await executePass(handler, input({ [hashStepId('load')]: { data: 1 } }), { stepBudgetMs: 0 });
    expect(r.status).toBe(206);
    expect(r.body.logs).toEqual([
      expect.objectContaining({
        level: 'warn',
        scope: '@root',
        fields: { count: 1, determinism: true },
        message: expect.stringMatching(new RegExp(`^determinism: 1 memo entry was not reached while new step "load-user" ran.*${hashStepId('load')}`)),
      }),
    ]);
  });

  it('stays quiet on a deterministic run with parallel branches and pending steps', async () => {
    const handler: WorkflowHandler = async ({ step }) => {
      await Promise.all([step.sleep('nap', 10), (async () => (await step.run('a', () => 1)) + (await step.run('b', () => 2)))()]);
    };
    const r = await executePass(handler, input({ [hashStepId('nap')]: { pending: true }, [hashStepId('a')]: { data: 1 } }), { stepBudgetMs: 0 });
    expect(ops(r).map((o) => o.name)).toEqual(['b']);
    expect(r.body.logs).toEqual([]);
  });

  it('makes testWorkflow fail on a non-deterministic step id', async () => {
    const runner = createRunner({ apiKey: 'k', env: {} });
    let n = 0;
    const wf = runner.workflow('drift', async ({ step }) => {
      await step.run(`fetch-${Math.min(n++, 1)}`, () => 1); // an id that changes after the first pass
      await step.sleep('wait', 1);
    });
    await expect(testWorkflow(wf)).rejects.toThrow(/not deterministic: determinism: 1 memo entry was not reached while new step "fetch-1"/);
    n = 0;
    await expect(testWorkflow(wf, { strict: false })).resolves.toMatchObject({ passes: 4 });
  });
});
