import { describe, expect, it } from '@jest/globals';
import { aiSpendProblem, toAiSpendCeilings } from './ai-spend.js';

describe('aiSpend as registered', () => {
  it('reads ceilings, dropping what cannot be one', () => {
    expect(toAiSpendCeilings(undefined)).toBeUndefined();
    expect(toAiSpendCeilings({})).toBeUndefined();
    expect(toAiSpendCeilings({ perRun: { tokens: 0 } })).toBeUndefined();
    expect(toAiSpendCeilings({ perRun: { tokens: 1000, cost: 'x' } })).toEqual({ perRun: { tokens: 1000 } });
    expect(toAiSpendCeilings({ perWindow: { cost: 5 } })).toBeUndefined(); // no window length
    expect(toAiSpendCeilings({ perWindow: { cost: 5, windowMs: 60_000 }, perRun: { cost: 0.5 } })).toEqual({
      perRun: { cost: 0.5 },
      perWindow: { cost: 5, windowMs: 60_000 },
    });
  });

  it('names what is wrong at registration', () => {
    expect(aiSpendProblem(undefined)).toBeUndefined();
    expect(aiSpendProblem({ perRun: { tokens: 10 }, perWindow: { cost: 1, windowMs: 1000 } })).toBeUndefined();
    expect(aiSpendProblem(5)).toBe('aiSpend must be an object { perRun?, perWindow? }.');
    expect(aiSpendProblem({ daily: {} })).toBe('aiSpend.daily is not a ceiling (perRun, perWindow).');
    expect(aiSpendProblem({ perRun: [] })).toBe('aiSpend.perRun must be an object.');
    expect(aiSpendProblem({ perRun: { tokens: -1 } })).toBe('aiSpend.perRun.tokens must be a positive number.');
    expect(aiSpendProblem({ perRun: {} })).toBe('aiSpend.perRun needs tokens or cost.');
    expect(aiSpendProblem({ perWindow: { cost: 1 } })).toBe('aiSpend.perWindow.windowMs must be an integer of at least 1000.');
    expect(aiSpendProblem({ perWindow: { cost: 1, windowMs: 10 } })).toBe('aiSpend.perWindow.windowMs must be an integer of at least 1000.');
  });
});
