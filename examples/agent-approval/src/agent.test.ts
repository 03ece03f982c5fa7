import { describe, expect, it } from '@jest/globals';
import { createRunner, testWorkflow } from '@dws/sdk';
import { supportAgent as handler } from './agent.js';
import type { Ticket } from './model.js';

// Its own runner: the example's reads SERVICE_API_KEY, which a unit test has no use for.
const supportAgent = createRunner({ apiKey: 'sk_test', env: {} }).workflow<Ticket>('support-agent', handler);

const ticket = { ticketId: 't-1', orderId: 'o-1', message: 'My tea arrived cold, please refund.' };

describe('support-agent', () => {
  it('gates only the refund, and carries it out with the reviewer edited amount', async () => {
    const out = await testWorkflow(supportAgent, {
      event: { data: ticket },
      approvals: { 'approve-1': { status: 'approved', args: { orderId: 'o-1', amount: 50 }, decidedBy: 'ops-lead' } },
    });
    expect(out.result).toEqual({
      answer: 'Refund issued; customer told.',
      transcript: [
        { call: { tool: 'lookup_order', args: { orderId: 'o-1' } }, output: { orderId: 'o-1', email: 'ada@example.com', total: 120 } },
        {
          call: { tool: 'issue_refund', args: { orderId: 'o-1', amount: 50 } },
          output: { refundId: 're_o-1_50', amount: 50 },
          approvedBy: 'ops-lead',
        },
        {
          call: { tool: 'send_email', args: { to: 'ada@example.com', subject: 'Refund of 50 issued' } },
          output: { sent: true, to: 'ada@example.com', subject: 'Refund of 50 issued' },
        },
      ],
    });
    // The model proposed the full amount; the tool ran with the edit.
    const proposed = out.opcodes.find((o) => o.op === 'Approval' && o.name === 'approve-1');
    expect(proposed).toMatchObject({
      tool: 'issue_refund',
      data: { orderId: 'o-1', amount: 120 },
      risk: 'high',
      minRisk: 'high',
      iteration: 1,
    });
  });

  it('tells the customer when the reviewer denies the refund', async () => {
    const out = await testWorkflow(supportAgent, { event: { data: ticket }, approvals: { 'approve-1': { status: 'denied' } } });
    expect(out.result).toMatchObject({
      answer: 'Refund declined by a reviewer; customer told.',
      transcript: [
        { call: { tool: 'lookup_order' } },
        { call: { tool: 'issue_refund' }, denied: true },
        { call: { tool: 'send_email', args: { subject: 'About your refund request' } } },
      ],
    });
    expect(out.stepsRun).not.toContain('call-1');
  });
});
