import { describe, expect, it } from '@jest/globals';
import { hashStepId } from '@dws/protocol';
import { backoffMs, checkpointSteps, decide, MISSING_RUNNER_LIMIT_MS, stepStart, TRANSPORT_BUDGET, usageOf, type RunView } from './reply.js';

const run = (over: Partial<RunView> = {}): RunView => ({
  attempt: 1, transportFailures: 0, noRunnerSinceMs: null, stepAttempts: new Map(), maxAttempts: 1, workflow: 'wf', runner: '',
  pendingDeadlines: [], hasOpenPending: false, ...over,
});
const ids = { run: () => 'run_child', event: () => 'evt_1', delivery: () => 'dlv_1' };
const NOW = 1_000_000;
const reply = (status: number, body: unknown) => ({ kind: 'reply' as const, status, body: JSON.stringify(body) });
const id = hashStepId('a');

describe('decide', () => {
  it('200 succeeds with the data; 4xx fails with the runner error', () => {
    expect(decide(run(), reply(200, { data: { x: 1 }, logs: [] }), NOW, ids)).toEqual({ type: 'succeed', resultJson: '{"x":1}', steps: [] });
    expect(decide(run(), reply(400, { error: { message: 'bad' }, logs: [] }), NOW, ids)).toMatchObject({ type: 'fail', error: { message: 'bad' } });
  });

  it('a 200 stores the finished steps it carries with the result, and refuses anything else in them', () => {
    const done = { op: 'StepRun', id, name: 'a', data: { ok: 1 } };
    expect(decide(run(), reply(200, { data: 2, opcodes: [done, done], logs: [] }), NOW, ids)).toMatchObject({
      type: 'succeed',
      resultJson: '2',
      steps: [{ id, name: 'a', status: 'succeeded', dataJson: '{"ok":1}', memo: true }],
    });
    const refused = [
      [{ ...done, data: undefined, error: { message: 'x' } }],
      [{ op: 'Sleep', id, name: 'a', sleepMs: 10 }],
      [{ ...done, id: 'nope' }],
      'not an array',
    ];
    for (const opcodes of refused) expect(decide(run(), reply(200, { data: 2, opcodes, logs: [] }), NOW, ids)).toMatchObject({ type: 'fail', steps: [] });
  });

  it('retries 5xx and transport errors on a fixed budget, then fails', () => {
    const d = decide(run(), reply(503, { logs: [] }), NOW, ids, () => 0.5);
    expect(d).toMatchObject({ type: 'retry_later', transportFailures: 1 });
    expect(decide(run({ transportFailures: TRANSPORT_BUDGET }), { kind: 'transport_error', error: 'ECONNREFUSED' }, NOW, ids)).toMatchObject({
      type: 'fail',
      error: { message: expect.stringContaining('ECONNREFUSED') },
    });
  });

  it('retries a pass the invoker never answered without end and without spending the transport budget', () => {
    const d = decide(run({ transportFailures: TRANSPORT_BUDGET }), { kind: 'invoker_unavailable', error: 'no responders' }, NOW, ids, () => 0.5);
    expect(d).toEqual({ type: 'retry_later', delayMs: 1500, steps: [], transportFailures: TRANSPORT_BUDGET, noRunnerSinceMs: null, attempt: 1 });
  });

  it('waits for a missing runner from a durable stamp, then fails naming the workflow and the pin', () => {
    expect(decide(run(), { kind: 'no_runner' }, NOW, ids)).toMatchObject({ type: 'retry_later', noRunnerSinceMs: NOW });
    const late = decide(run({ noRunnerSinceMs: NOW - MISSING_RUNNER_LIMIT_MS, runner: 'r-9' }), { kind: 'no_runner' }, NOW, ids);
    expect(late).toMatchObject({ type: 'fail', error: { message: expect.stringMatching(/wf.*r-9/) } });
  });

  it('retries a failed step up to maxAttempts, honours retryAfterMs, and fails at once when not retriable', () => {
    const fail = { opcodes: [{ op: 'StepRun', id, name: 'a', error: { message: 'x' } }], logs: [] };
    expect(decide(run({ maxAttempts: 3 }), reply(206, fail), NOW, ids, () => 0)).toMatchObject({ type: 'park', untilMs: NOW + 500, attempt: 2 });
    const after = { opcodes: [{ op: 'StepRun', id, name: 'a', error: { message: 'x' }, retryAfterMs: 7000 }], logs: [] };
    expect(decide(run({ maxAttempts: 3 }), reply(206, after), NOW, ids)).toMatchObject({ type: 'park', untilMs: NOW + 7000 });
    const last = decide(run({ maxAttempts: 3, stepAttempts: new Map([[id, 2]]) }), reply(206, fail), NOW, ids);
    expect(last).toMatchObject({ type: 'continue', steps: [{ status: 'failed', attempts: 3, memo: true }] });
    // The workflow's backoff: the second failure waits min * factor, exactly when not randomized.
    const backoff = { minMs: 250, factor: 4, maxMs: 60_000, randomize: false };
    const second = decide(run({ maxAttempts: 3, retryBackoff: backoff, stepAttempts: new Map([[id, 1]]) }), reply(206, fail), NOW, ids, () => 0);
    expect(second).toMatchObject({ type: 'park', untilMs: NOW + 1000 });
    const fatal = { opcodes: [{ op: 'StepRun', id, name: 'a', error: { message: 'no' }, retriable: false }], logs: [] };
    expect(decide(run({ maxAttempts: 3 }), reply(206, fatal), NOW, ids)).toMatchObject({ type: 'fail', error: { message: 'no' } });
  });

  it('parks a batch at its earliest deadline; a past SleepUntil is due now; an unknown op fails its step', () => {
    const b = hashStepId('b');
    const d = decide(run({ pendingDeadlines: [NOW + 50_000] }), reply(206, {
      opcodes: [{ op: 'Sleep', id, name: 'a', sleepMs: 60_000 }, { op: 'WaitForEvent', id: b, name: 'b', eventName: 'e', timeoutMs: 30_000 }],
      logs: [],
    }), NOW, ids);
    expect(d).toMatchObject({ type: 'park', untilMs: NOW + 30_000 });
    const past = decide(run(), reply(206, { opcodes: [{ op: 'SleepUntil', id, name: 'a', sleepUntilMs: NOW - 5 }], logs: [] }), NOW, ids);
    expect(past).toMatchObject({ type: 'park', untilMs: NOW - 5 });
    const unknown = decide(run(), reply(206, { opcodes: [{ op: 'Teleport', id, name: 'a' }], logs: [] }), NOW, ids);
    expect(unknown).toMatchObject({ type: 'continue', steps: [{ status: 'failed', error: { message: expect.stringContaining('Teleport') } }] });
  });

  it('parks an Infer step waiting with no deadline and hands the opcode to the invoker', () => {
    const opcode = { op: 'Infer', id, name: 'a', data: { model: 'm', prompt: 'hi' } };
    const d = decide(run({ maxAttempts: 5 }), reply(206, { opcodes: [opcode], logs: [] }), NOW, ids);
    expect(d).toMatchObject({ type: 'park', untilMs: null });
    expect(d.steps).toEqual([{ id, name: 'a', op: 'Infer', attempts: 1, status: 'waiting', memo: true, handoff: { kind: 'infer', requestJson: JSON.stringify(opcode) } }]);
  });

  it('parks an Approval step waiting with no deadline and hands the opcode to the approvals service', () => {
    for (const extra of [{}, { timeoutMs: 300 }]) {
      const opcode = { op: 'Approval', id, name: 'a', tool: 'refund', data: { amount: 5 }, ...extra };
      const d = decide(run(), reply(206, { opcodes: [opcode], logs: [] }), NOW, ids);
      // The approvals service owns the timeout (its onTimeout): the step never resolves to null at a deadline here.
      expect(d).toMatchObject({ type: 'park', untilMs: null });
      expect(d.steps).toEqual([{ id, name: 'a', op: 'Approval', attempts: 1, status: 'waiting', memo: true, handoff: { kind: 'approval', requestJson: JSON.stringify(opcode) } }]);
    }
  });

  it('a 206 with no new opcode parks on what is pending, and fails when nothing is', () => {
    expect(decide(run({ hasOpenPending: true }), reply(206, { opcodes: [], logs: [] }), NOW, ids)).toMatchObject({ type: 'park', untilMs: null });
    expect(decide(run(), reply(206, { opcodes: [], logs: [] }), NOW, ids)).toMatchObject({ type: 'fail' });
  });

  it('draws ids for children, emits and deliveries once, into the step', () => {
    const d = decide(run(), reply(206, {
      opcodes: [
        { op: 'RunWorkflow', id, name: 'a', childName: 'kid', childData: { n: 1 } },
        { op: 'Emit', id: hashStepId('e'), name: 'e', eventName: 'x.y', data: {} },
      ],
      logs: [],
    }), NOW, ids);
    expect(d).toMatchObject({
      type: 'continue',
      steps: [
        { status: 'child', child: { runId: 'run_child', workflow: 'kid', dataJson: '{"n":1}' } },
        { status: 'succeeded', dataJson: '{"id":"evt_1"}', handoff: { kind: 'emit', eventId: 'evt_1', name: 'x.y' } },
      ],
    });
  });

  it("resolves an emit's delay once, into the step and its handoff, and fails the step on a bad one", () => {
    const emit = (delay: unknown) =>
      decide(run(), reply(206, { opcodes: [{ op: 'Emit', id: hashStepId('e'), name: 'e', eventName: 'x.y', data: {}, delay }], logs: [] }), NOW, ids);
    const at = new Date(NOW + 7_200_000).toISOString();
    expect(emit('2h')).toMatchObject({
      type: 'continue',
      steps: [{ status: 'succeeded', dataJson: JSON.stringify({ id: 'evt_1', scheduledFor: at }), handoff: { kind: 'emit', eventId: 'evt_1', dueAtMs: NOW + 7_200_000 } }],
    });
    expect(emit(at)).toMatchObject({ steps: [{ handoff: { dueAtMs: NOW + 7_200_000 } }] });
    // Already past: at once, as without one.
    const now = emit(new Date(NOW - 1000).toISOString());
    expect(now).toMatchObject({ steps: [{ dataJson: '{"id":"evt_1"}' }] });
    expect((now as { steps: { handoff: object }[] }).steps[0]!.handoff).not.toHaveProperty('dueAtMs');
    expect(emit('whenever')).toMatchObject({ steps: [{ status: 'failed', error: { message: expect.stringMatching(/^Emit: delay must be a duration/) } }] });
    expect(emit('400d')).toMatchObject({ steps: [{ status: 'failed', error: { message: 'Emit: delay is more than a year ahead (365 days at most).' } }] });
  });

  it("hands an emit's tags and session on, and fails the step on bad ones", () => {
    const emit = (tags: unknown, session?: unknown) =>
      decide(run(), reply(206, { opcodes: [{ op: 'Emit', id: hashStepId('e'), name: 'e', eventName: 'x.y', data: {}, tags, session }], logs: [] }), NOW, ids);
    expect(emit(['tenant:acme', 'vip', 'vip'], 'chat-1')).toMatchObject({ steps: [{ status: 'succeeded', handoff: { kind: 'emit', tags: ['tenant:acme', 'vip'], session: 'chat-1' } }] });
    expect(emit(undefined, 's'.repeat(257))).toMatchObject({ steps: [{ status: 'failed', error: { message: 'Emit: session is over 256 characters.' } }] });
    expect((emit([]) as { steps: { handoff: object }[] }).steps[0]!.handoff).not.toHaveProperty('tags');
    expect((emit([]) as { steps: { handoff: object }[] }).steps[0]!.handoff).not.toHaveProperty('session');
    expect(emit('vip')).toMatchObject({ steps: [{ status: 'failed', error: { message: 'Emit: tags must be an array of strings.' } }] });
    expect(emit(['x'.repeat(129)])).toMatchObject({ steps: [{ status: 'failed', error: { message: 'Emit: Each of tags must be 1-128 characters.' } }] });
  });

  it('stores a Tag step (an extension of SPEC) with the tags it adds, and fails one without a list of tags', () => {
    const tag = (tags: unknown) => decide(run(), reply(206, { opcodes: [{ op: 'Tag', id: hashStepId('t'), name: 't', tags }], logs: [] }), NOW, ids);
    expect(tag(['tenant:acme', 'vip', 'vip'])).toMatchObject({ type: 'continue', steps: [{ op: 'Tag', status: 'succeeded', memo: true, addTags: ['tenant:acme', 'vip'] }] });
    expect(tag([])).toMatchObject({ steps: [{ status: 'failed', error: { message: 'Tag needs tags: a non-empty array of strings.' } }] });
    expect(tag([7])).toMatchObject({ steps: [{ status: 'failed', error: { message: 'Tag: tags must be an array of strings.' } }] });
  });

  it('backs off exponentially with jitter, capped', () => {
    expect(backoffMs(1, () => 0)).toBe(500);
    expect(backoffMs(1, () => 1)).toBe(1000);
    expect(backoffMs(3, () => 1)).toBe(4000);
    expect(backoffMs(20, () => 1)).toBe(30_000);
  });
});

describe('stepStart', () => {
  it("takes the runner's start of a step within the pass, and the pass's start or last checkpoint without one", () => {
    const from = NOW - 500;
    expect(stepStart({ stepsFromMs: from }, NOW - 200, NOW)).toBe(NOW - 200);
    // The runner's clock is not ours: before the pass began, or after the step reached us, is kept to the pass.
    expect(stepStart({ stepsFromMs: from }, NOW - 60_000, NOW)).toBe(from);
    expect(stepStart({ stepsFromMs: from }, NOW + 60_000, NOW)).toBe(NOW);
    for (const said of [undefined, 'soon', Number.NaN, null]) expect(stepStart({ stepsFromMs: from }, said, NOW)).toBe(from);
    expect(stepStart({}, undefined, NOW)).toBe(NOW);
  });

  it('gives every StepRun of a reply or a checkpoint its start', () => {
    const ran = { op: 'StepRun', id, name: 'a', data: 1, startedAtMs: NOW - 120 };
    expect(checkpointSteps(run({ stepsFromMs: NOW - 300 }), [ran], NOW, ids)).toMatchObject([{ id, startedAtMs: NOW - 120 }]);
    expect(decide(run({ stepsFromMs: NOW - 300 }), reply(200, { data: 2, opcodes: [{ ...ran, startedAtMs: undefined }], logs: [] }), NOW, ids)).toMatchObject({
      steps: [{ id, startedAtMs: NOW - 300 }],
    });
    const failed = { op: 'StepRun', id, name: 'a', error: { message: 'x' }, startedAtMs: NOW - 50 };
    expect(decide(run({ stepsFromMs: NOW - 300, maxAttempts: 2 }), reply(206, { opcodes: [failed], logs: [] }), NOW, ids)).toMatchObject({
      steps: [{ id, status: 'retrying', startedAtMs: NOW - 50 }],
    });
  });
});

describe('usageOf', () => {
  it('keeps the SPEC Usage fields with their types and drops the rest', () => {
    expect(usageOf({ model: 'm', tokensIn: 3, tokensOut: 4, cost: 0.01, latencyMs: 12, cacheHit: false, extra: 1 })).toBe(
      JSON.stringify({ model: 'm', tokensIn: 3, tokensOut: 4, cost: 0.01, latencyMs: 12, cacheHit: false }),
    );
    expect(usageOf({ tokensIn: -1, tokensOut: 'x', cost: Infinity, cacheHit: 'yes' })).toBeUndefined();
    expect(usageOf([1])).toBeUndefined();
    expect(usageOf(undefined)).toBeUndefined();
  });
});
