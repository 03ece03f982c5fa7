import { describe, expect, it } from '@jest/globals';
import { checkDecision, decidedResult, isOpen, onExpiry, type OpenApproval } from './decision.js';

const open = (o: Partial<OpenApproval> = {}): OpenApproval => ({
  id: 'apr_1', tool: 'refund', args: { amount: 10 }, status: 'pending', allow: ['approve', 'edit', 'reject', 'respond'], onTimeout: 'escalate', ...o,
});
const code = (fn: () => unknown): string => {
  try {
    fn();
  } catch (err) {
    return `${(err as { status: number }).status} ${(err as { code: string }).code}`;
  }
  return 'accepted';
};

describe('checkDecision', () => {
  it('accepts approve, approve with edits, deny, and a response', () => {
    expect(checkDecision(open(), { status: 'approved' })).toEqual({ status: 'approved', edited: false });
    expect(checkDecision(open(), { status: 'approved', args: { amount: 5 } })).toEqual({ status: 'approved', edited: true, editedArgs: { amount: 5 } });
    expect(checkDecision(open(), { status: 'approved', args: null })).toEqual({ status: 'approved', edited: true, editedArgs: null });
    expect(checkDecision(open({ status: 'escalated' }), { status: 'denied', response: 'too much' })).toEqual({ status: 'denied', edited: false, response: 'too much' });
  });

  it('ignores decidedBy / decidedVia in the body', () => {
    expect(checkDecision(open(), { status: 'approved', decidedBy: 'mallory', decidedVia: 'timeout' })).toEqual({ status: 'approved', edited: false });
  });

  it('400 invalid_decision for a status other than approved / denied, or a body that is not an object', () => {
    for (const b of [{ status: 'cancelled' }, { status: 'pending' }, {}, null, [], 'approved']) expect(code(() => checkDecision(open(), b))).toBe('400 invalid_decision');
    expect(code(() => checkDecision(open(), { status: 'approved', response: 3 }))).toBe('400 invalid_decision');
  });

  it('409 approval_not_open once decided or cancelled', () => {
    for (const status of ['approved', 'denied', 'cancelled']) expect(code(() => checkDecision(open({ status }), { status: 'approved' }))).toBe('409 approval_not_open');
  });

  it('args on a denial, and each decision allow does not offer, are 400', () => {
    expect(code(() => checkDecision(open(), { status: 'denied', args: {} }))).toBe('400 invalid_decision');
    expect(code(() => checkDecision(open({ allow: ['approve', 'reject'] }), { status: 'approved', args: {} }))).toBe('400 invalid_decision');
    expect(code(() => checkDecision(open({ allow: ['approve', 'reject'] }), { status: 'approved', response: 'ok' }))).toBe('400 invalid_decision');
    expect(code(() => checkDecision(open({ allow: ['reject'] }), { status: 'approved' }))).toBe('400 invalid_decision');
    expect(code(() => checkDecision(open({ allow: ['approve'] }), { status: 'denied' }))).toBe('400 invalid_decision');
    expect(code(() => checkDecision(open({ allow: ['approve', 'edit'] }), { status: 'approved', args: { amount: 1 } }))).toBe('accepted');
    expect(code(() => checkDecision(open({ allow: ['reject', 'respond'] }), { status: 'denied', response: 'no' }))).toBe('accepted');
  });
});

describe('results and expiry', () => {
  it('the workflow receives the effective args: the edit when one was made', () => {
    const a = { id: 'apr_1', args: { amount: 10 } };
    expect(decidedResult(a, { status: 'approved', edited: true, editedArgs: { amount: 5 } }, 'alice', 'console')).toEqual({
      gated: true, approvalId: 'apr_1', status: 'approved', args: { amount: 5 }, decidedBy: 'alice', decidedVia: 'console',
    });
    expect(decidedResult(a, { status: 'denied', edited: false, response: 'no' }, 'key-1', 'api')).toEqual({
      gated: true, approvalId: 'apr_1', status: 'denied', args: { amount: 10 }, decidedBy: 'key-1', decidedVia: 'api', response: 'no',
    });
  });

  it('onTimeout: escalate stays open, approve / reject decide, fail cancels with the step error', () => {
    const a = { id: 'apr_9', tool: 'wire' };
    expect(onExpiry({ ...a, onTimeout: 'escalate' })).toEqual({ kind: 'escalate' });
    expect(onExpiry({ ...a, onTimeout: 'approve' })).toEqual({ kind: 'decide', verdict: { status: 'approved', edited: false } });
    expect(onExpiry({ ...a, onTimeout: 'reject' })).toEqual({ kind: 'decide', verdict: { status: 'denied', edited: false } });
    expect(onExpiry({ ...a, onTimeout: 'fail' })).toEqual({ kind: 'fail', error: 'Approval apr_9 (wire) timed out: onTimeout is fail.' });
    expect(isOpen('pending') && isOpen('escalated') && !isOpen('approved') && !isOpen('cancelled')).toBe(true);
  });
});
