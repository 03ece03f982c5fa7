import { describe, expect, it } from '@jest/globals';
import { hashStepId, type InvokeRequestBody, type Memo, type Opcode } from '@dws/protocol';
import { approvalOpcode, gatedByRisk } from './approval.js';
import { executePass } from './execution.js';
import type { ApprovalDecision, ApprovalOptions, WorkflowHandler } from './types.js';

const input = (steps: Memo = {}): InvokeRequestBody => ({
  event: { name: 'e', data: {} },
  steps,
  ctx: { runId: 'run_1', workflow: 'wf', attempt: 0, app: 'default', runner: '' },
});
const build = (o: unknown) => approvalOpcode(o as ApprovalOptions, 'step.approval("g")');

describe('step.approval', () => {
  it('reports the Approval opcode with the options it was given, and no timeoutMs without a timeout', async () => {
    const handler: WorkflowHandler = ({ step }) =>
      Promise.all([
        step.approval('bare', { tool: 'send_email' }),
        step.approval('full', {
          tool: 'refund',
          args: { amount: 500, at: new Date(Date.UTC(2030, 0, 1)) },
          timeout: '30m',
          risk: 'high',
          minRisk: 'medium',
          if: 'args.amount > 100',
          iteration: 3,
          onTimeout: 'approve',
          allow: ['reject', 'edit', 'approve', 'edit'],
          policy: 'refunds over 100 need a human',
          summary: 'Refund 500',
          context: 'ticket T-1',
          escalatesTo: 'oncall',
        }),
        step.approval('now', { tool: 't', timeout: 0 }),
      ]);
    const r = await executePass(handler, input());
    expect(r.status).toBe(206);
    const ops = (r.body as { opcodes: Opcode[] }).opcodes;
    expect(ops).toEqual([
      { op: 'Approval', id: hashStepId('bare'), name: 'bare', tool: 'send_email', data: null },
      {
        op: 'Approval',
        id: hashStepId('full'),
        name: 'full',
        tool: 'refund',
        // JSON-normalised as on the wire: the Date is its ISO string.
        data: { amount: 500, at: '2030-01-01T00:00:00.000Z' },
        timeoutMs: 1_800_000,
        risk: 'high',
        minRisk: 'medium',
        if: 'args.amount > 100',
        iteration: 3,
        onTimeout: 'approve',
        allow: ['approve', 'edit', 'reject'],
        policy: 'refunds over 100 need a human',
        summary: 'Refund 500',
        context: 'ticket T-1',
        escalatesTo: 'oncall',
      },
      // 0 is a deadline that passes at once, kept apart from "no timeout".
      { op: 'Approval', id: hashStepId('now'), name: 'now', tool: 't', data: null, timeoutMs: 0 },
    ]);
  });

  it('returns the memoised decision on replay, typed by the args, and never reports the step again', async () => {
    const decided: ApprovalDecision<{ amount: number }> = {
      gated: true,
      approvalId: 'apr_1',
      status: 'approved',
      args: { amount: 50 },
      decidedBy: 'ops-key',
      decidedVia: 'api',
      response: 'halved',
    };
    let seen: ApprovalDecision<{ amount: number }> | undefined;
    const handler: WorkflowHandler = async ({ step }) => {
      seen = await step.approval('gate', { tool: 'refund', args: { amount: 100 } });
      const ungated = await step.approval('cheap', { tool: 'lookup', args: { id: 1 }, risk: 'low', minRisk: 'high' });
      return { amount: seen.args.amount, ungated };
    };
    const r = await executePass(
      handler,
      input({
        [hashStepId('gate')]: { data: decided },
        [hashStepId('cheap')]: { data: { gated: false, status: 'approved', args: { id: 1 } } },
      }),
    );
    expect(r).toEqual({
      status: 200,
      body: { data: { amount: 50, ungated: { gated: false, status: 'approved', args: { id: 1 } } }, logs: [] },
    });
    expect(seen).toEqual(decided);
  });

  it('rejects with StepFailedError when the service failed the step (onTimeout fail, a refused if)', async () => {
    const handler: WorkflowHandler = async ({ step }) => {
      try {
        await step.approval('gate', { tool: 'refund', timeout: '1s', onTimeout: 'fail' });
        return 'unreachable';
      } catch (err) {
        return `${(err as Error).name}: ${(err as Error).message}`;
      }
    };
    const message = 'Approval apr_1 (refund) timed out: onTimeout is fail.';
    const r = await executePass(handler, input({ [hashStepId('gate')]: { error: { message } } }));
    expect(r).toEqual({ status: 200, body: { data: `StepFailedError: ${message}`, logs: [] } });
  });

  it.each<[string, unknown, RegExp]>([
    ['no options', undefined, /needs \{ tool, args \}/],
    ['no tool', { args: {} }, /\.tool must be a non-empty string/],
    ['a blank tool', { tool: '  ' }, /\.tool must be a non-empty string/],
    ['a tool over 256', { tool: 't'.repeat(257) }, /\.tool is over 256 characters/],
    [
      'an unknown onTimeout',
      { tool: 't', onTimeout: 'ignore' },
      /\.onTimeout must be one of escalate, approve, reject, fail, got "ignore"/,
    ],
    ['an unknown minRisk', { tool: 't', minRisk: 'severe' }, /\.minRisk must be one of low, medium, high, critical, got "severe"/],
    ['an empty allow', { tool: 't', allow: [] }, /\.allow must be a non-empty array/],
    ['an allow that is not an array', { tool: 't', allow: 'approve' }, /\.allow must be a non-empty array/],
    [
      'an unknown allow entry',
      { tool: 't', allow: ['approve', 'maybe'] },
      /\.allow\[1\] must be one of approve, edit, reject, respond, got "maybe"/,
    ],
    ['a negative timeout', { tool: 't', timeout: -1 }, /\.timeout must be a non-negative number/],
    ['a bad timeout', { tool: 't', timeout: 'soon' }, /\.timeout "soon" is not a duration/],
    ['a fractional iteration', { tool: 't', iteration: 1.5 }, /\.iteration must be a non-negative integer, got 1.5/],
    ['a blank if', { tool: 't', if: '' }, /\.if must be a non-empty string/],
    ['a risk that is not a string', { tool: 't', risk: 3 }, /\.risk must be a non-empty string/],
    ['args that are not JSON', { tool: 't', args: { n: 1n } }, /not JSON-serialisable/],
  ])('refuses %s with an error naming the option', (_what, options, message) => {
    expect(() => build(options)).toThrow(message);
  });

  it('fails the run (400, not retried) on a refused option, before reporting anything', async () => {
    const r = await executePass(({ step }) => step.approval('g', { tool: 't', minRisk: 'severe' as never }), input());
    expect(r.status).toBe(400);
    expect((r.body as { error: { message: string } }).error.message).toMatch(/step\.approval\("g"\)\.minRisk must be one of/);
  });

  it('applies the minRisk floor as the service does: at or above gates, absent or unknown risk gates', () => {
    expect(gatedByRisk({})).toBe(true);
    expect(gatedByRisk({ risk: 'low' })).toBe(true);
    expect(gatedByRisk({ risk: 'low', minRisk: 'high' })).toBe(false);
    expect(gatedByRisk({ risk: 'medium', minRisk: 'high' })).toBe(false);
    expect(gatedByRisk({ risk: 'high', minRisk: 'high' })).toBe(true);
    expect(gatedByRisk({ risk: 'critical', minRisk: 'high' })).toBe(true);
    expect(gatedByRisk({ minRisk: 'low' })).toBe(true);
    expect(gatedByRisk({ risk: 'spicy', minRisk: 'critical' })).toBe(true);
  });
});
