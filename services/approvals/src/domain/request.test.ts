import { describe, expect, it } from '@jest/globals';
import { evaluateGate, parseApprovalRequest, type ApprovalRequest } from './request.js';

const parse = (o: Record<string, unknown>): ApprovalRequest => {
  const p = parseApprovalRequest({ op: 'Approval', id: 'x', name: 'n', tool: 'send_email', data: { to: 'a@b.c', amount: 150 }, ...o });
  if (!p.ok) throw new Error(p.error);
  return p.request;
};
const refused = (o: Record<string, unknown>): string => {
  const p = parseApprovalRequest({ op: 'Approval', id: 'x', name: 'n', tool: 'send_email', ...o });
  if (p.ok) throw new Error('accepted');
  return p.error;
};
const gated = (o: Record<string, unknown>) => evaluateGate(parse(o));

describe('parseApprovalRequest', () => {
  it('takes the defaults: onTimeout escalate, all four decisions, iteration 0, no timeout', () => {
    expect(parse({})).toEqual({
      tool: 'send_email', args: { to: 'a@b.c', amount: 150 }, onTimeout: 'escalate', allow: ['approve', 'edit', 'reject', 'respond'], iteration: 0,
      risk: undefined, policy: undefined, summary: undefined, context: undefined, escalatesTo: undefined, timeoutMs: undefined, ifExpr: undefined, minRisk: undefined,
    });
    expect(parse({ data: undefined }).args).toBeNull();
  });

  it('keeps the annotations, the timeout and the allow list (in canonical order)', () => {
    const r = parse({ risk: 'high', policy: 'p', summary: 's', context: { k: [1] }, escalatesTo: 'oncall', onTimeout: 'fail', allow: ['reject', 'approve'], timeoutMs: 0, iteration: 4 });
    expect(r).toMatchObject({ risk: 'high', policy: 'p', summary: 's', context: { k: [1] }, escalatesTo: 'oncall', onTimeout: 'fail', allow: ['approve', 'reject'], timeoutMs: 0, iteration: 4 });
  });

  it('refuses every configuration the engine cannot honour, with a sentence naming it', () => {
    expect(refused({ tool: undefined })).toMatch(/needs a tool/);
    expect(refused({ tool: '  ' })).toMatch(/needs a tool/);
    expect(refused({ tool: 3 })).toMatch(/needs a tool/);
    expect(refused({ onTimeout: 'explode' })).toMatch(/onTimeout "explode" is not one of escalate, approve, reject, fail/);
    expect(refused({ if: 'tool ==' })).toMatch(/^Approval if "tool ==" does not compile/);
    expect(refused({ if: 'unknownVar > 1' })).toMatch(/does not compile/);
    expect(refused({ if: '1 + 2' })).toMatch(/does not compile/);
    expect(refused({ minRisk: 'severe' })).toMatch(/minRisk "severe" is not one of low, medium, high, critical/);
    expect(refused({ allow: [] })).toMatch(/non-empty array/);
    expect(refused({ allow: 'approve' })).toMatch(/non-empty array/);
    expect(refused({ allow: ['approve', 'veto'] })).toMatch(/allow entry "veto"/);
    for (const t of [-1, Infinity, NaN, '100']) expect(refused({ timeoutMs: t })).toMatch(/timeoutMs must be a non-negative finite number/);
    expect(refused({ iteration: 1.5 })).toMatch(/iteration must be a non-negative integer/);
    expect(refused({ risk: 3 })).toMatch(/risk must be a string/);
    expect(parseApprovalRequest(null)).toEqual({ ok: false, error: 'Approval opcode is not an object.' });
  });
});

describe('evaluateGate', () => {
  it('both absent always gates', () => {
    expect(gated({})).toEqual({ ok: true, gated: true });
  });

  it('minRisk: gated at or above the floor (low < medium < high < critical)', () => {
    expect(gated({ minRisk: 'high', risk: 'medium' })).toEqual({ ok: true, gated: false });
    expect(gated({ minRisk: 'high', risk: 'high' })).toEqual({ ok: true, gated: true });
    expect(gated({ minRisk: 'high', risk: 'critical' })).toEqual({ ok: true, gated: true });
    expect(gated({ minRisk: 'low', risk: 'low' })).toEqual({ ok: true, gated: true });
  });

  it('minRisk fails closed: a risk absent or outside the order is gated', () => {
    expect(gated({ minRisk: 'critical' })).toEqual({ ok: true, gated: true });
    expect(gated({ minRisk: 'critical', risk: 'spicy' })).toEqual({ ok: true, gated: true });
  });

  it('if: CEL over tool, args, risk (null when absent) and iteration (an int)', () => {
    expect(gated({ if: 'args.amount > 100' })).toEqual({ ok: true, gated: true });
    expect(gated({ if: 'args.amount > 1000' })).toEqual({ ok: true, gated: false });
    expect(gated({ if: 'tool == "send_email" && risk == null' })).toEqual({ ok: true, gated: true });
    expect(gated({ if: 'iteration >= 3', iteration: 2 })).toEqual({ ok: true, gated: false });
    expect(gated({ if: 'iteration >= 3', iteration: 3 })).toEqual({ ok: true, gated: true });
    expect(gated({ if: 'iteration == 0' })).toEqual({ ok: true, gated: true });
  });

  it('both present is a conjunction', () => {
    expect(gated({ if: 'true', minRisk: 'high', risk: 'low' })).toEqual({ ok: true, gated: false });
    expect(gated({ if: 'false', minRisk: 'high', risk: 'high' })).toEqual({ ok: true, gated: false });
    expect(gated({ if: 'true', minRisk: 'high', risk: 'high' })).toEqual({ ok: true, gated: true });
  });

  it('an if that does not yield a bool, or throws, is an error, not a pass', () => {
    expect(gated({ if: 'args.amount' })).toEqual({ ok: false, error: expect.stringMatching(/must evaluate to a bool, not 150/) });
    expect(gated({ if: 'args.missing > 1' })).toEqual({ ok: false, error: expect.stringMatching(/could not be evaluated: No such key: missing/) });
  });
});
