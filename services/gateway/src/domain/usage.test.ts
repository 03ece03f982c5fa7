import { describe, expect, it } from '@jest/globals';
import { mergeLimits, monthOf, operatorChange, overCeiling, previousMonth, settleSuspension, type Suspension } from './usage.js';

const free: Suspension = { suspended: false, reason: null };
const byUsage: Suspension = { suspended: true, reason: 'usage_limit' };
const byOperator: Suspension = { suspended: true, reason: 'operator' };
const runs = (n: number) => ({ month: '2026-03', runs: n });

describe('months', () => {
  it('keys usage by UTC calendar month, whatever the host zone', () => {
    expect(monthOf(Date.UTC(2026, 0, 31, 23, 59, 59, 999))).toBe('2026-01');
    expect(monthOf(Date.UTC(2026, 1, 1))).toBe('2026-02');
    expect(previousMonth('2026-03')).toBe('2026-02');
    expect(previousMonth('2026-01')).toBe('2025-12');
  });
});

describe('ceilings', () => {
  it('is reached at the limit, not one past it; no limit never is', () => {
    expect(overCeiling({ runsPerMonth: 3 }, runs(2))).toBe(false);
    expect(overCeiling({ runsPerMonth: 3 }, runs(3))).toBe(true);
    expect(overCeiling({}, runs(1e9))).toBe(false);
  });

  it('ignores stored values that are not positive integers and names it does not know', () => {
    expect(overCeiling({ runsPerMonth: 0 }, runs(5))).toBe(false);
    expect(overCeiling({ runsPerMonth: '3' }, runs(5))).toBe(false);
    expect(overCeiling({ steps: 1 }, runs(5))).toBe(false);
  });

  it('counts a model ceiling reached once a refused call reported usage at or over it', () => {
    const limits = { modelTokensPerMonth: 1000, modelCostPerMonth: 2.5 };
    expect(overCeiling(limits, runs(0))).toBe(false);
    expect(overCeiling(limits, { ...runs(0), model: { tokens: 999, cost: 2.49 } })).toBe(false);
    expect(overCeiling(limits, { ...runs(0), model: { tokens: 1000, cost: 0 } })).toBe(true);
    expect(overCeiling(limits, { ...runs(0), model: { tokens: 0, cost: 2.5 } })).toBe(true);
    // Raised above what was used: no longer reached (the next refused call reports again).
    expect(overCeiling({ modelTokensPerMonth: 5000 }, { ...runs(0), model: { tokens: 1000, cost: 0 } })).toBe(false);
    // A cost ceiling may be fractional; a token ceiling must be an integer.
    expect(overCeiling({ modelTokensPerMonth: 10.5 }, { ...runs(0), model: { tokens: 20, cost: 0 } })).toBe(false);
  });

  it('merges limits and removes a null one', () => {
    expect(mergeLimits({ runsPerMonth: 3, legacy: 1 }, { runsPerMonth: null })).toEqual({ legacy: 1 });
    expect(mergeLimits({}, { runsPerMonth: 7 })).toEqual({ runsPerMonth: 7 });
    expect(mergeLimits({ runsPerMonth: 3 }, {})).toEqual({ runsPerMonth: 3 });
  });
});

describe('settleSuspension', () => {
  it('suspends for usage when a ceiling is reached', () => {
    expect(settleSuspension(free, { runsPerMonth: 3 }, runs(3))).toEqual(byUsage);
    expect(settleSuspension(free, { runsPerMonth: 3 }, runs(2))).toEqual(free);
  });

  it('lifts a usage suspension once usage is under the ceiling (raised, removed, or a new month)', () => {
    expect(settleSuspension(byUsage, { runsPerMonth: 10 }, runs(3))).toEqual(free);
    expect(settleSuspension(byUsage, {}, runs(3))).toEqual(free);
    expect(settleSuspension(byUsage, { runsPerMonth: 3 }, runs(0))).toEqual(free);
    expect(settleSuspension(byUsage, { runsPerMonth: 3 }, runs(4))).toEqual(byUsage);
  });

  it("never lifts an operator's suspension, nor one stored without a reason", () => {
    expect(settleSuspension(byOperator, {}, runs(0))).toEqual(byOperator);
    expect(settleSuspension(byOperator, { runsPerMonth: 1 }, runs(5))).toEqual(byOperator);
    expect(settleSuspension({ suspended: true, reason: null }, {}, runs(0))).toEqual({ suspended: true, reason: null });
  });

  it("applies an operator's PATCH first: suspend takes ownership, unsuspend holds only under the ceiling", () => {
    expect(settleSuspension(operatorChange(byUsage, true), { runsPerMonth: 100 }, runs(3))).toEqual(byOperator);
    expect(settleSuspension(operatorChange(byOperator, false), { runsPerMonth: 100 }, runs(3))).toEqual(free);
    expect(settleSuspension(operatorChange(byOperator, false), { runsPerMonth: 3 }, runs(3))).toEqual(byUsage);
    expect(settleSuspension(operatorChange(byUsage, false), { runsPerMonth: 3 }, runs(3))).toEqual(byUsage);
    expect(operatorChange(byUsage, undefined)).toBe(byUsage);
  });
});
