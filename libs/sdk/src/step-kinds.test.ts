import { describe, expect, it } from '@jest/globals';
import { hashStepId, type InvokeRequestBody, type Memo, type Opcode } from '@dws/protocol';
import { executePass } from './execution.js';
import { createRunner } from './runner.js';
import type { WorkflowHandler } from './types.js';

const input = (steps: Memo = {}): InvokeRequestBody => ({
  event: { name: 'e', data: {} },
  steps,
  ctx: { runId: 'run_1', workflow: 'wf', attempt: 0, app: 'default', runner: '' },
});
const memoOf = (entries: Record<string, Memo[string]>): Memo =>
  Object.fromEntries(Object.entries(entries).map(([name, e]) => [hashStepId(name), e]));
const opsOf = (r: Awaited<ReturnType<typeof executePass>>): Opcode[] => {
  expect(r.status).toBe(206);
  return (r.body as { opcodes: Opcode[] }).opcodes;
};
const id = (name: string) => ({ id: hashStepId(name), name });

describe('step opcodes', () => {
  it('reports every kind in one 206 from Promise.all, in call order', async () => {
    const child = createRunner({ apiKey: 'k', env: {} }).workflow<{ n: number }, string>('child', () => 'c');
    const handler: WorkflowHandler = async ({ step, ctx }) =>
      Promise.all([
        step.sleep('nap', '5m'),
        step.sleepUntil('alarm', new Date(Date.UTC(2030, 0, 1))),
        step.waitForEvent('paid', { event: 'shop/paid', timeout: '1h', if: 'event.data.id == "o-1"' }),
        step.runWorkflow('kid', { workflow: child, data: { n: 1 }, app: 'other', runner: 'r-9' }),
        step.emit('tell', { name: 'shop/told', data: { x: 1 }, dedupeId: 'd-1', targetApp: 'crm' }),
        ctx.webhook.send('hook', { url: 'https://example.com/h', body: { ok: true } }),
        step.approval('gate', {
          tool: 'refund',
          args: { amount: 5 },
          timeout: '2h',
          risk: 'high',
          summary: 'Refund order o-1',
          allow: ['approve', 'reject'],
          onTimeout: 'reject',
          if: 'args.amount > 1',
          minRisk: 'medium',
          iteration: 2,
        }),
        step.ai.generate('write', { model: 'm', prompt: 'hi', temperature: 0 }),
        step.ai.infer('raw', { model: 'm', body: { x: 1 } }),
        step.ai.embed('vec', { model: 'e', inputs: ['a', 'b'] }),
        step.score('quality', { name: 'accuracy', value: 0.9, comment: 'fine' }),
        step.run('work', () => 42),
      ]);
    const ops = opsOf(await executePass(handler, input()));
    expect(ops).toEqual([
      { op: 'Sleep', ...id('nap'), sleepMs: 300_000 },
      { op: 'SleepUntil', ...id('alarm'), sleepUntilMs: Date.UTC(2030, 0, 1) },
      { op: 'WaitForEvent', ...id('paid'), eventName: 'shop/paid', timeoutMs: 3_600_000, eventIf: 'event.data.id == "o-1"' },
      { op: 'RunWorkflow', ...id('kid'), childName: 'child', childData: { n: 1 }, childApp: 'other', childRunner: 'r-9' },
      { op: 'Emit', ...id('tell'), eventName: 'shop/told', data: { x: 1 }, dedupeId: 'd-1', targetApp: 'crm' },
      { op: 'Webhook', ...id('hook'), webhookUrl: 'https://example.com/h', data: { ok: true } },
      {
        op: 'Approval',
        ...id('gate'),
        tool: 'refund',
        data: { amount: 5 },
        timeoutMs: 7_200_000,
        risk: 'high',
        summary: 'Refund order o-1',
        minRisk: 'medium',
        if: 'args.amount > 1',
        onTimeout: 'reject',
        allow: ['approve', 'reject'],
        iteration: 2,
      },
      { op: 'Infer', ...id('write'), data: { kind: 'generate', model: 'm', prompt: 'hi', temperature: 0 } },
      { op: 'Infer', ...id('raw'), data: { kind: 'infer', model: 'm', body: { x: 1 } } },
      { op: 'Infer', ...id('vec:batch-0'), data: { kind: 'embed', model: 'e', inputs: ['a', 'b'] } },
      { op: 'Score', ...id('quality'), data: { name: 'accuracy', value: 0.9, comment: 'fine' } },
      { op: 'StepRun', ...id('work'), data: 42, startedAtMs: expect.any(Number) },
    ]);
  });

  it('step.ai.wrap runs the call as a step and reports its usage on the StepRun', async () => {
    const handler: WorkflowHandler = async ({ step }) =>
      step.ai.wrap('own-call', async () => ({ text: 'hi', tokens: [3, 4] }), (r) => ({ model: 'local', tokensIn: r.tokens[0], tokensOut: r.tokens[1] }));
    const r = await executePass(handler, input());
    expect(r.status).toBe(200);
    expect((r.body as { opcodes: Opcode[] }).opcodes).toEqual([
      { op: 'StepRun', ...id('own-call'), data: { text: 'hi', tokens: [3, 4] }, usage: { model: 'local', tokensIn: 3, tokensOut: 4 }, startedAtMs: expect.any(Number) },
    ]);
  });

  it('resolves memo hits by kind and never re-emits a pending step', async () => {
    const seen: unknown[] = [];
    const handler: WorkflowHandler = async ({ step }) => {
      seen.push(await step.sleep('nap', 1000));
      seen.push(await step.waitForEvent('late', { event: 'x', timeout: 10 }));
      seen.push(await step.waitForEvent('paid', { event: 'x', timeout: 10 }));
      seen.push(await step.runWorkflow('kid', { workflow: 'child' }));
      seen.push(await step.approval('gate', { tool: 't' }));
      seen.push(await step.emit('tell', { name: 'n' }));
      try {
        await step.runWorkflow('bad-kid', { workflow: 'child' });
      } catch (err) {
        seen.push(`${(err as Error).name}: ${(err as Error).message}`);
      }
      await step.waitForEvent('pending', { event: 'y', timeout: '1d' });
      seen.push('unreachable');
    };
    const r = await executePass(
      handler,
      input(
        memoOf({
          nap: { data: null },
          late: { data: null },
          paid: { data: { name: 'x', data: { id: 1 } } },
          kid: { data: { total: 3 } },
          gate: { data: { gated: true, approvalId: 'apr_1', status: 'approved', args: { a: 1 }, decidedBy: 'ops', decidedVia: 'api' } },
          tell: { data: { ids: ['ev_1'] } },
          'bad-kid': { error: { message: 'child failed' } },
          pending: { pending: true },
        }),
      ),
    );
    expect(r).toEqual({ status: 206, body: { opcodes: [], logs: [] } });
    expect(seen).toEqual([
      undefined,
      null,
      { name: 'x', data: { id: 1 } },
      { total: 3 },
      { gated: true, approvalId: 'apr_1', status: 'approved', args: { a: 1 }, decidedBy: 'ops', decidedVia: 'api' },
      { ids: ['ev_1'] },
      'StepFailedError: child failed',
    ]);
  });

  it('parks the branch on a new parking step: code after it does not run, and running ahead stops there', async () => {
    const after: string[] = [];
    const handler: WorkflowHandler = async ({ step }) => {
      await step.run('a', () => 1);
      await step.sleep('nap', '1s');
      after.push('after nap');
      await step.run('b', () => 2);
    };
    const ops = opsOf(await executePass(handler, input(), { stepBudgetMs: 10_000 }));
    expect(ops.map((o) => [o.op, o.name])).toEqual([
      ['StepRun', 'a'],
      ['Sleep', 'nap'],
    ]);
    expect(after).toEqual([]);
  });

  it('carries an emit\'s delay as given, a Date as its ISO time', async () => {
    const at = new Date(Date.UTC(2030, 0, 1, 9));
    const ops = opsOf(
      await executePass(
        ({ step }) => Promise.all([step.emit('a', { name: 'n', delay: '3d' }), step.emit('b', { name: 'n', delay: 1500 }), step.emit('c', { name: 'n', delay: at })]),
        input(),
      ),
    );
    expect(ops.map((o) => (o as { delay?: unknown }).delay)).toEqual(['3d', 1500, '2030-01-01T09:00:00.000Z']);
  });

  it("carries an emit's tags (repeats dropped, none when empty) and session", async () => {
    const ops = opsOf(
      await executePass(({ step }) => Promise.all([step.emit('a', { name: 'n', tags: ['tenant:acme', 'vip', 'vip'], session: 'chat-1' }), step.emit('b', { name: 'n', tags: [] })]), input()),
    );
    expect(ops.map((o) => (o as { tags?: unknown }).tags)).toEqual([['tenant:acme', 'vip'], undefined]);
    expect(ops.map((o) => (o as { session?: unknown }).session)).toEqual(['chat-1', undefined]);
  });

  it("reports step.tag as a Tag opcode (repeats dropped) and resolves to the run's tags it is given back", async () => {
    const ops = opsOf(await executePass(({ step }) => step.tag('t', ['tenant:acme', 'vip', 'vip']), input()));
    expect(ops).toEqual([{ op: 'Tag', id: hashStepId('t'), name: 't', tags: ['tenant:acme', 'vip'] }]);
    const r = await executePass(({ step }) => step.tag('t', ['vip']), input({ [hashStepId('t')]: { data: ['tenant:acme', 'vip'] } }));
    expect(r).toMatchObject({ status: 200, body: { data: ['tenant:acme', 'vip'] } });
  });

  it.each<[string, WorkflowHandler, RegExp]>([
    ['a bad duration', ({ step }) => step.sleep('s', 'soon'), /step\.sleep\("s"\) "soon" is not a duration/],
    ['a negative duration', ({ step }) => step.sleep('s', -5), /non-negative/],
    ['an invalid date', ({ step }) => step.sleepUntil('s', 'not a date'), /Date, epoch ms or an ISO time/],
    ['a wait without event', ({ step }) => step.waitForEvent('w', { timeout: 1 } as never), /\.event must be a non-empty string/],
    ['an emit name over 256', ({ step }) => step.emit('e', { name: 'x'.repeat(257) }), /over 256 characters/],
    ['a relative webhook url', ({ ctx }) => ctx.webhook.send('h', { url: '/hook', body: {} }), /absolute http\(s\) URL/],
    ['an unknown approval decision', ({ step }) => step.approval('g', { tool: 't', allow: ['maybe' as never] }), /allow\[0\] must be one of approve, edit, reject, respond/],
    ['a score without value', ({ step }) => step.score('s', { name: 'n' } as never), /needs a value/],
    ['an emit of a bigint', ({ step }) => step.emit('e', { name: 'n', data: 1n }), /not JSON-serialisable/],
    ['an emit with a negative delay', ({ step }) => step.emit('e', { name: 'n', delay: -1 }), /\.delay must be ms, a duration like "2h", or a Date/],
    ['an emit with eleven tags', ({ step }) => step.emit('e', { name: 'n', tags: Array.from({ length: 11 }, (_, i) => `t${i}`) }), /At most 10 step\.emit\("e"\)\.tags/],
    ['an emit with a tag that is not a string', ({ step }) => step.emit('e', { name: 'n', tags: [1 as never] }), /step\.emit\("e"\)\.tags must be an array of strings/],
    ['an emit with a session over 256', ({ step }) => step.emit('e', { name: 'n', session: 's'.repeat(257) }), /\.session is over 256 characters/],
    ['a tag step with no tags', ({ step }) => step.tag('t', []), /step\.tag\("t"\) needs at least one tag/],
    ['a tag step with a tag over 128', ({ step }) => step.tag('t', ['x'.repeat(129)]), /step\.tag\("t"\)\.tags must be 1-128 characters/],
    ['a missing id', ({ step }) => step.sleep('', 1), /needs a non-empty string id/],
  ])('fails the run (400) on %s', async (_what, handler, message) => {
    const r = await executePass(handler, input());
    expect(r.status).toBe(400);
    expect((r.body as { error: { message: string } }).error.message).toMatch(message);
  });

  it('refuses any step inside step.run', async () => {
    const r = await executePass(({ step }) => step.run('outer', () => step.sleep('inner', 1)), input(), { stepBudgetMs: 0 });
    expect(opsOf(r)[0]).toMatchObject({ name: 'outer', retriable: false, error: { message: expect.stringMatching(/cannot be nested/) } });
  });

  it('keeps ctx fields next to ctx.webhook', async () => {
    const r = await executePass(({ ctx }) => ({ runId: ctx.runId, attempt: ctx.attempt, hasSend: typeof ctx.webhook.send }), input());
    expect(r).toEqual({ status: 200, body: { data: { runId: 'run_1', attempt: 0, hasSend: 'function' }, logs: [] } });
  });
});
