import { describe, expect, it } from '@jest/globals';
import {
  InvokeResultSchema,
  InvokeResult_Outcome,
  StartRunSchema,
  WorkflowsRegisteredSchema,
  create,
  fromBinary,
  toBinary,
} from './index.js';

const json = (v: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(v));

describe('bus messages', () => {
  it('round-trip StartRun through binary, raw JSON bytes and int64 intact', () => {
    const msg = create(StartRunSchema, {
      workspaceId: 'ws_1',
      runId: 'run_1',
      workflow: 'greet',
      app: 'app',
      eventId: 'ev_1',
      eventName: 'user.created',
      input: json({ name: 'Ada', n: 1 }),
      triggerKind: 'event',
      createdAtMs: BigInt(Date.UTC(2024, 0, 1)),
    });
    const back = fromBinary(StartRunSchema, toBinary(StartRunSchema, msg));
    expect(back.runId).toBe('run_1');
    expect(back.createdAtMs).toBe(1704067200000n);
    expect(JSON.parse(new TextDecoder().decode(back.input))).toEqual({ name: 'Ada', n: 1 });
    expect(back.replayOf).toBe('');
  });

  it('round-trip enums and repeated messages', () => {
    const result = create(InvokeResultSchema, { outcome: InvokeResult_Outcome.NO_RUNNER, error: 'none live' });
    expect(fromBinary(InvokeResultSchema, toBinary(InvokeResultSchema, result)).outcome).toBe(
      InvokeResult_Outcome.NO_RUNNER,
    );
    const reg = create(WorkflowsRegisteredSchema, {
      workspaceId: 'ws_1',
      workflows: [{ name: 'a', config: json({ triggers: [] }) }, { name: 'b' }],
    });
    const back = fromBinary(WorkflowsRegisteredSchema, toBinary(WorkflowsRegisteredSchema, reg));
    expect(back.workflows.map((w) => w.name)).toEqual(['a', 'b']);
  });
});
