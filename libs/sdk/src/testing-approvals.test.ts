import { describe, expect, it } from '@jest/globals';
import { createRunner } from './runner.js';
import { testWorkflow } from './testing.js';
import type { ApprovalTestRequest } from './testing-approvals.js';

const newRunner = () => createRunner({ apiKey: 'sk_test', env: {} });

/** An agent turn: ask for sign-off, then run the tool with the effective args. */
const agent = () =>
  newRunner().workflow('agent', async ({ step }) => {
    const calls = [
      { tool: 'lookup_order', args: { orderId: 'o-1' }, risk: 'low' },
      { tool: 'refund', args: { orderId: 'o-1', amount: 500 }, risk: 'high' },
    ];
    const out: unknown[] = [];
    for (const [i, c] of calls.entries()) {
      const d = await step.approval<Record<string, unknown>>(`gate-${i}`, {
        ...c,
        minRisk: 'high',
        iteration: i,
        allow: ['approve', 'edit', 'reject'],
      });
      out.push(
        d.status === 'approved'
          ? await step.run(`call-${i}`, () => ({ tool: c.tool, args: d.args, by: d.decidedBy ?? null }))
          : { skipped: c.tool },
      );
    }
    return out;
  });

describe('testWorkflow approvals', () => {
  it('waves a call under minRisk through ungated and approves the rest as proposed by default', async () => {
    const out = await testWorkflow(agent());
    expect(out.result).toEqual([
      { tool: 'lookup_order', args: { orderId: 'o-1' }, by: null },
      { tool: 'refund', args: { orderId: 'o-1', amount: 500 }, by: 'test' },
    ]);
    const decisions = out.opcodes.filter((o) => o.op === 'Approval').map((o) => o.name);
    expect(decisions).toEqual(['gate-0', 'gate-1']);
  });

  it('scripts an approve-with-edits: the tool runs with the edited args', async () => {
    const out = await testWorkflow(agent(), {
      approvals: { 'gate-1': { status: 'approved', args: { orderId: 'o-1', amount: 50 }, decidedBy: 'ada' } },
    });
    expect(out.result).toEqual([
      { tool: 'lookup_order', args: { orderId: 'o-1' }, by: null },
      { tool: 'refund', args: { orderId: 'o-1', amount: 50 }, by: 'ada' },
    ]);
  });

  it('scripts from the request: one function sees tool, args, risk and iteration', async () => {
    const seen: ApprovalTestRequest[] = [];
    const out = await testWorkflow(agent(), {
      approvals: (req) => {
        seen.push(req);
        return { status: 'denied' };
      },
    });
    expect(out.result).toEqual([{ tool: 'lookup_order', args: { orderId: 'o-1' }, by: null }, { skipped: 'refund' }]);
    // The ungated call never asks: only the refund reaches the script.
    expect(seen).toEqual([
      {
        name: 'gate-1',
        tool: 'refund',
        args: { orderId: 'o-1', amount: 500 },
        risk: 'high',
        minRisk: 'high',
        iteration: 1,
        onTimeout: 'escalate',
        allow: ['approve', 'edit', 'reject'],
      },
    ]);
  });

  it('plays a timeout by the step onTimeout: approve and reject decide as system:timeout, fail fails the step', async () => {
    const wf = (onTimeout: 'approve' | 'reject' | 'fail' | 'escalate') =>
      newRunner().workflow('timed', async ({ step }) => {
        try {
          const d = await step.approval('gate', { tool: 'deploy', args: { v: 2 }, timeout: '1h', onTimeout });
          return { status: d.status, by: d.decidedBy, via: d.decidedVia, id: d.approvalId };
        } catch (err) {
          return (err as Error).message;
        }
      });
    const timedOut = { approvals: { gate: { timedOut: true as const } } };
    await expect(testWorkflow(wf('approve'), timedOut)).resolves.toMatchObject({
      result: { status: 'approved', by: 'system:timeout', via: 'timeout', id: 'apr_test_gate' },
    });
    await expect(testWorkflow(wf('reject'), timedOut)).resolves.toMatchObject({
      result: { status: 'denied', by: 'system:timeout', via: 'timeout' },
    });
    await expect(testWorkflow(wf('fail'), timedOut)).resolves.toMatchObject({
      result: 'Approval apr_test_gate (deploy) timed out: onTimeout is fail.',
    });
    await expect(testWorkflow(wf('escalate'), timedOut)).rejects.toThrow(/escalates at its timeout and still waits for a decision/);
  });

  it('refuses a script the service would refuse', async () => {
    const wf = newRunner().workflow('strict', async ({ step }) =>
      step.approval('gate', { tool: 'pay', args: { n: 1 }, allow: ['approve'], risk: 'high', minRisk: 'medium' }),
    );
    await expect(testWorkflow(wf, { approvals: { gate: { status: 'approved', args: { n: 2 } } } })).rejects.toThrow(/allow lacks edit/);
    await expect(testWorkflow(wf, { approvals: { gate: { status: 'denied' } } })).rejects.toThrow(/allow lacks reject/);
    await expect(testWorkflow(wf, { approvals: { gate: { status: 'approved', response: 'ok' } } })).rejects.toThrow(/allow lacks respond/);
    // Only an `if` can wave a call that meets its floor through.
    await expect(testWorkflow(wf, { approvals: { gate: { gated: false } } })).rejects.toThrow(/has no if to wave it through/);
    await expect(testWorkflow(wf, { approvals: { gate: { timedOut: true } } })).rejects.toThrow(/has no timeout to pass/);
  });

  it('scripts { gated: false } for a call whose if waves it through, and a response when respond is offered', async () => {
    const wf = newRunner().workflow('cel', async ({ step }) => {
      const a = await step.approval('small', { tool: 'refund', args: { amount: 5 }, if: 'args.amount > 100' });
      const b = await step.approval('ask', { tool: 'question', args: { q: 'which?' } });
      return { a, b };
    });
    const out = await testWorkflow(wf, { approvals: { small: { gated: false }, ask: { status: 'approved', response: 'the blue one' } } });
    expect(out.result).toEqual({
      a: { gated: false, status: 'approved', args: { amount: 5 } },
      b: {
        gated: true,
        approvalId: 'apr_test_ask',
        status: 'approved',
        args: { q: 'which?' },
        decidedBy: 'test',
        decidedVia: 'api',
        response: 'the blue one',
      },
    });
  });
});
