import { describe, expect, it } from '@jest/globals';
import { hashStepId } from '@dws/protocol';
import { spendCeilingReached, workspaceCeilingReached, type WorkspaceModelView } from './ai-spend.js';
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

describe('workspaceCeilingReached', () => {
  const ws = (ceilings: WorkspaceModelView['ceilings'], tokens: number, cost = 0): WorkspaceModelView => ({ month: '2026-11', ceilings, spent: { tokens, cost } });
  it('refuses at or over the month\'s token or cost ceiling, naming the month', () => {
    expect(workspaceCeilingReached(ws({ tokens: 1000 }, 999))).toBeUndefined();
    expect(workspaceCeilingReached(ws({ tokens: 1000 }, 1000))).toBe(
      'Workspace model usage ceiling reached: this workspace used 1000 model tokens of its 1000 for 2026-11 (UTC).',
    );
    expect(workspaceCeilingReached(ws({ cost: 2.5 }, 1e9, 2.49))).toBeUndefined();
    expect(workspaceCeilingReached(ws({ tokens: 1e9, cost: 2.5 }, 5, 2.5))).toBe(
      'Workspace model usage ceiling reached: this workspace spent 2.5 on model calls of its 2.5 for 2026-11 (UTC).',
    );
    expect(workspaceCeilingReached(ws({}, 1e9, 1e9))).toBeUndefined();
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

  it('fails the Infer step at the workspace\'s monthly ceiling and reports it to the gateway', () => {
    const v = { ...view(false), workspaceModel: { month: '2026-11', ceilings: { tokens: 50 }, spent: { tokens: 60, cost: 0.1 } } };
    const d = decide(v, reply, 0, ids);
    expect(d.type).toBe('continue');
    expect(d.steps[0]).toMatchObject({
      op: 'Infer',
      status: 'failed',
      error: { message: 'Workspace model usage ceiling reached: this workspace used 60 model tokens of its 50 for 2026-11 (UTC).' },
      handoff: { kind: 'model_ceiling', month: '2026-11', spent: { tokens: 60, cost: 0.1 } },
    });
    // Under it, the call is handed to the invoker as usual.
    const under = decide({ ...v, workspaceModel: { ...v.workspaceModel, spent: { tokens: 49, cost: 0 } } }, reply, 0, ids);
    expect(under.steps[0]).toMatchObject({ status: 'waiting', handoff: { kind: 'infer' } });
  });
});
