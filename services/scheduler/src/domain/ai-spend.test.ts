import { describe, expect, it } from '@jest/globals';
import { hashStepId } from '@dws/protocol';
import { spendCeilingReached } from './ai-spend.js';
import { decide, withParsedBody, type RunView } from './reply.js';

const none = { tokens: 0, cost: 0 };

describe('spendCeilingReached', () => {
  it('refuses at or over a ceiling, run first, then the window', () => {
    expect(spendCeilingReached({ ceilings: { perRun: { tokens: 100 } }, run: { tokens: 99, cost: 0 }, window: none })).toBeUndefined();
    expect(spendCeilingReached({ ceilings: { perRun: { tokens: 100 } }, run: { tokens: 100, cost: 0 }, window: none })).toBe(
      'AI spend ceiling reached: this run used 100 tokens of its 100.',
    );
    expect(spendCeilingReached({ ceilings: { perRun: { cost: 0.5 } }, run: { tokens: 0, cost: 0.75 }, window: none })).toBe(
      'AI spend ceiling reached: this run spent 0.75 of its 0.5.',
    );
    const window = { perWindow: { tokens: 1000, windowMs: 60_000 } };
    expect(spendCeilingReached({ ceilings: window, run: { tokens: 5000, cost: 0 }, window: { tokens: 999, cost: 0 } })).toBeUndefined();
    expect(spendCeilingReached({ ceilings: window, run: none, window: { tokens: 1000, cost: 0 } })).toBe(
      "AI spend ceiling reached: this workflow's runs over the last 60 s used 1000 tokens of its 1000.",
    );
  });
});

describe('decide with AI spend ceilings', () => {
  const view = (over: boolean): RunView => ({
    attempt: 1,
    transportFailures: 0,
    noRunnerSinceMs: null,
    stepAttempts: new Map(),
    maxAttempts: 1,
    workflow: 'w',
    runner: 'r',
    pendingDeadlines: [],
    hasOpenPending: false,
    aiSpend: { ceilings: { perRun: { tokens: 10 } }, run: { tokens: over ? 10 : 9, cost: 0 }, window: none },
  });
  const ids = { run: () => 'run_1', event: () => 'evt_1', delivery: () => 'dlv_1' };
  const reply = withParsedBody({ kind: 'reply', status: 206, body: JSON.stringify({ opcodes: [{ op: 'Infer', id: hashStepId('ask'), name: 'ask', data: { model: 'm', messages: [] } }] }) });

  it('hands a model call to the invoker under the ceiling', () => {
    const d = decide(view(false), reply, 0, ids);
    expect(d.steps[0]).toMatchObject({ op: 'Infer', status: 'waiting', handoff: { kind: 'infer' } });
  });

  it('fails the Infer step past it, without a hand-off, and lets the handler go on', () => {
    const d = decide(view(true), reply, 0, ids);
    expect(d.type).toBe('continue');
    expect(d.steps[0]).toMatchObject({ op: 'Infer', status: 'failed', error: { message: 'AI spend ceiling reached: this run used 10 tokens of its 10.' } });
    expect(d.steps[0]!.handoff).toBeUndefined();
  });
});
