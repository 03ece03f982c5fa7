import { describe, expect, it } from '@jest/globals';
import { NonRetriableError } from './errors.js';
import { createRunner } from './runner.js';
import { testWorkflow } from './testing.js';

const newRunner = () => createRunner({ apiKey: 'sk_test', env: {} });

describe('testWorkflow', () => {
  it('drives a three-step workflow over passes to completion', async () => {
    const runner = newRunner();
    let sideEffects = 0;
    const wf = runner.workflow<{ n: number }>('three', async ({ event, step }) => {
      const a = await step.run('a', () => {
        sideEffects++;
        return event.data.n + 1;
      });
      const b = await step.run('b', () => {
        sideEffects++;
        return a * 2;
      });
      const c = await step.run('c', () => {
        sideEffects++;
        return `${a}-${b}`;
      });
      return { a, b, c };
    });
    const out = await testWorkflow(wf, { event: { data: { n: 1 } } });
    expect(out.result).toEqual({ a: 2, b: 4, c: '2-4' });
    // One step per pass; the last pass runs c and returns.
    expect(out.passes).toBe(3);
    expect(sideEffects).toBe(3);
    // With a run-ahead budget a pass runs on through sequential steps: one pass runs all three and returns.
    const fast = await testWorkflow(wf, { event: { data: { n: 1 } }, stepBudgetMs: 250 });
    expect(fast).toMatchObject({ result: { a: 2, b: 4, c: '2-4' }, passes: 1, stepsRun: ['a', 'b', 'c'] });
    expect(out.stepsRun).toEqual(['a', 'b', 'c']);
    expect(sideEffects).toBe(6);
  });

  it('runs parallel steps in one pass and takes a runner with one workflow', async () => {
    const runner = newRunner();
    runner.workflow('par', async ({ step }) => {
      const [x, y] = await Promise.all([step.run('x', () => 1), step.run('x', () => 2)]);
      return x + y;
    });
    const out = await testWorkflow(runner);
    expect(out).toMatchObject({ result: 3, passes: 1, stepsRun: ['x', 'x:1'] });
  });

  it('retries a failing step up to maxAttempts, then the handler sees the failure', async () => {
    const runner = newRunner();
    let tries = 0;
    const wf = runner.workflow('flaky', { retry: { maxAttempts: 3 } }, async ({ step }) => {
      try {
        return await step.run('call', () => {
          tries++;
          throw new Error(`try ${tries}`);
        });
      } catch (err) {
        return `gave up: ${(err as Error).message}`;
      }
    });
    const out = await testWorkflow(wf);
    expect(tries).toBe(3);
    expect(out.result).toBe('gave up: try 3');
    expect(out.stepsRun).toEqual(['call', 'call', 'call']);
  });

  it('does not retry a NonRetriableError and rejects when the failure escapes', async () => {
    const runner = newRunner();
    let tries = 0;
    const wf = runner.workflow('fatal', { retry: { maxAttempts: 5 } }, async ({ step }) =>
      step.run('call', () => {
        tries++;
        throw new NonRetriableError('bad request');
      }),
    );
    await expect(testWorkflow(wf)).rejects.toMatchObject({ name: 'StepFailedError', message: 'bad request' });
    expect(tries).toBe(1);
  });

  it('starts from a given memo keyed by step name', async () => {
    const runner = newRunner();
    const wf = runner.workflow('resume', async ({ step }) => {
      const a = await step.run('a', (): number => {
        throw new Error('must not run');
      });
      return step.run('b', () => a + 1);
    });
    const out = await testWorkflow(wf, { steps: { a: { data: 41 } } });
    expect(out).toMatchObject({ result: 42, stepsRun: ['b'] });
  });

  it('runs an onFailure handler with ctx.error', async () => {
    const runner = newRunner();
    const wf = runner.workflow('main', { onFailure: ({ ctx }) => `cleanup after ${ctx.error?.message}` }, () => 'x');
    const out = await testWorkflow(wf, { ctx: { onFailure: true, error: { message: 'boom' } } });
    expect(out.result).toBe('cleanup after boom');
  });

  it('completes sleeps at once, delivers mocked events, and times out waits without one', async () => {
    const runner = newRunner();
    const wf = runner.workflow('waits', async ({ step }) => {
      await step.sleep('nap', '1h');
      await step.sleepUntil('alarm', Date.now() + 86_400_000);
      const paid = await step.waitForEvent<{ amount: number }>('paid', { event: 'shop/paid', timeout: '1d' });
      const shipped = await step.waitForEvent('shipped', { event: 'shop/shipped', timeout: '1d' });
      return { amount: paid?.data.amount, paidName: paid?.name, shipped };
    });
    const out = await testWorkflow(wf, { events: { paid: { data: { amount: 12 } } } });
    expect(out.result).toEqual({ amount: 12, paidName: 'shop/paid', shipped: null });
    expect(out.opcodes.map((o) => o.op)).toEqual(['Sleep', 'SleepUntil', 'WaitForEvent', 'WaitForEvent']);
  });

  it('runs a child defined on the same runner in memory, or takes a mocked outcome', async () => {
    const runner = newRunner();
    const child = runner.workflow<{ n: number }, number>('double', async ({ event, step }) => step.run('x2', () => event.data.n * 2));
    const parent = runner.workflow('parent', async ({ step }) => {
      const a = await step.runWorkflow('kid', { workflow: child, data: { n: 21 } });
      let b: unknown;
      try {
        b = await step.runWorkflow('other', { workflow: 'elsewhere', app: 'billing' });
      } catch (err) {
        b = (err as Error).message;
      }
      return { a, b };
    });
    const out = await testWorkflow(parent, { children: { other: { error: 'card declined' } } });
    expect(out.result).toEqual({ a: 42, b: 'card declined' });
    await expect(testWorkflow(parent)).rejects.toThrow(/runs workflow "elsewhere", which this runner does not define/);
  });

  it('records emits, webhooks and scores, approves by default, and asks for AI results', async () => {
    const runner = newRunner();
    const wf = runner.workflow('side-effects', async ({ step, ctx }) => {
      const sent = await step.emit('tell', { name: 'shop/told', data: { x: 1 } });
      await ctx.webhook.send('hook', { url: 'https://example.com', body: { ok: 1 } });
      await step.score('s', { name: 'quality', value: 1 });
      const decision = await step.approval('gate', { tool: 'refund', args: { amount: 5 } });
      const text = await step.ai.generate<{ text: string }>('write', { model: 'm', prompt: 'hi' });
      return { sent, decision, text: text.text };
    });
    const out = await testWorkflow(wf, { ai: (req) => ({ text: `echo ${(req as { prompt: string }).prompt}` }) });
    expect(out.result).toEqual({
      sent: { id: 'test-tell' },
      decision: { gated: true, approvalId: 'apr_test_gate', status: 'approved', args: { amount: 5 }, decidedBy: 'test', decidedVia: 'api' },
      text: 'echo hi',
    });
    expect(out.opcodes.map((o) => o.op)).toEqual(['Emit', 'Webhook', 'Score', 'Approval', 'Infer']);
    await expect(testWorkflow(wf)).rejects.toThrow(/AI step "write" needs a result/);
    const denied = await testWorkflow(wf, { approvals: { gate: { status: 'denied' } }, ai: { write: { text: 't' } } });
    expect(denied.result).toMatchObject({ decision: { status: 'denied' } });
  });

  it('validates event data with a Standard Schema and types the handler from it', async () => {
    const runner = newRunner();
    // A hand-rolled Standard Schema, as zod/valibot/arktype expose one.
    const schema = {
      '~standard': {
        version: 1 as const,
        vendor: 'test',
        validate: (v: unknown) =>
          typeof (v as { email?: unknown })?.email === 'string'
            ? { value: { email: (v as { email: string }).email.toLowerCase() } }
            : { issues: [{ message: 'Required', path: ['email'] }] },
        types: undefined as unknown as { input: unknown; output: { email: string } },
      },
    };
    const wf = runner.workflow('signup', { schema }, async ({ event }) => event.data.email);
    await expect(testWorkflow(wf, { event: { data: { email: 'ADA@x.io' } } })).resolves.toMatchObject({ result: 'ada@x.io' });
    await expect(testWorkflow(wf, { event: { data: {} } })).rejects.toMatchObject({
      name: 'NonRetriableError',
      message: 'workflow "signup": event data does not match its schema: data.email: Required',
    });
    expect(wf.toRegistration()).toEqual({ name: 'signup' });
    expect(() => runner.workflow('bad', { schema: {} as never }, () => 1)).toThrow(/Standard Schema/);
  });
});
