import { describe, expect, it } from '@jest/globals';
import { NO_RUNNER_LIMIT_MS, waitingFor, type OpenStep, type RunWaitFacts } from './waiting-for.js';

const NOW = Date.parse('2026-11-24T12:00:00Z');
const run = (over: Partial<RunWaitFacts> = {}): RunWaitFacts => ({
  status: 'waiting',
  runner: '',
  createdAtMs: NOW - 60_000,
  leaseOwner: null,
  leaseUntilMs: null,
  noRunnerSinceMs: null,
  transportFailures: 0,
  admitted: true,
  concurrencyKey: null,
  concurrencyLimit: 0,
  slotHolders: 0,
  holdsSlots: false,
  slotHolderId: null,
  concurrencyKey2: null,
  concurrencyLimit2: 0,
  slotHolders2: 0,
  pausedBy: null,
  pausedAtMs: null,
  ...over,
});
const step = (over: Partial<OpenStep>): OpenStep => ({
  name: 's',
  op: 'StepRun',
  idx: 0,
  status: 'sleeping',
  attempts: 1,
  wakeAtMs: null,
  error: null,
  childRunId: null,
  childWorkflow: null,
  eventName: null,
  eventIf: null,
  ...over,
});

describe('waitingFor', () => {
  it('says nothing for a terminal run', () => {
    for (const status of ['succeeded', 'failed', 'cancelled']) expect(waitingFor(run({ status }), [step({})], NOW)).toBeUndefined();
  });

  it('puts a pause before everything, with who paused and when', () => {
    const w = waitingFor(run({ status: 'paused', pausedBy: 'ada', pausedAtMs: NOW - 1000, noRunnerSinceMs: NOW }), [step({ op: 'Sleep', wakeAtMs: NOW })], NOW);
    expect(w).toEqual({ kind: 'paused', by: 'ada', since: new Date(NOW - 1000).toISOString() });
  });

  it('names the missing runner, since when, and when the run will fail', () => {
    expect(waitingFor(run({ status: 'queued', runner: 'r-7', noRunnerSinceMs: NOW - 10_000 }), [], NOW)).toEqual({
      kind: 'no_runner',
      since: new Date(NOW - 10_000).toISOString(),
      failsAt: new Date(NOW - 10_000 + NO_RUNNER_LIMIT_MS).toISOString(),
      runner: 'r-7',
    });
  });

  it('reports a step backing off with its attempt, next try and error', () => {
    const w = waitingFor(run({ status: 'running', leaseUntilMs: NOW + 800 }), [step({ name: 'charge', status: 'retrying', attempts: 2, error: { message: 'boom' } })], NOW);
    expect(w).toEqual({ kind: 'retry', step: 'charge', attempt: 2, nextTryAt: new Date(NOW + 800).toISOString(), error: { message: 'boom' } });
  });

  it('reports each kind of parked step, the first in step order winning', () => {
    const at = NOW + 3_600_000;
    expect(waitingFor(run(), [step({ name: 'nap', op: 'Sleep', wakeAtMs: at })], NOW)).toEqual({ kind: 'sleep', step: 'nap', until: new Date(at).toISOString() });
    expect(waitingFor(run(), [step({ name: 'w', op: 'WaitForEvent', status: 'waiting', wakeAtMs: at, eventName: 'bank/settled', eventIf: 'event.data.id == "1"' })], NOW)).toEqual({
      kind: 'event',
      step: 'w',
      event: 'bank/settled',
      if: 'event.data.id == "1"',
      timeoutAt: new Date(at).toISOString(),
    });
    expect(waitingFor(run(), [step({ name: 'gate', op: 'Approval', status: 'waiting' })], NOW)).toEqual({ kind: 'approval', step: 'gate' });
    expect(waitingFor(run(), [step({ name: 'kid', op: 'RunWorkflow', status: 'child', childRunId: 'run_c', childWorkflow: 'napper' })], NOW)).toEqual({
      kind: 'child',
      step: 'kid',
      childRunId: 'run_c',
      workflow: 'napper',
    });
    expect(waitingFor(run(), [step({ name: 'ask', op: 'Infer', status: 'waiting' })], NOW)).toEqual({ kind: 'model', step: 'ask' });
    const both = [step({ name: 'later', op: 'Approval', status: 'waiting', idx: 3 }), step({ name: 'first', op: 'Sleep', idx: 1, wakeAtMs: at })];
    expect(waitingFor(run(), both, NOW)).toMatchObject({ kind: 'sleep', step: 'first' });
  });

  it('explains a queued run: concurrency slot, throttle, or a scheduler with room', () => {
    expect(waitingFor(run({ status: 'queued', admitted: false, concurrencyKey: 'u1', concurrencyLimit: 1, slotHolders: 1 }), [], NOW)).toEqual({
      kind: 'concurrency',
      key: 'u1',
      limit: 1,
      holding: 1,
    });
    // Two constraints: the one whose slots are full is named.
    const two = { status: 'queued', admitted: false, concurrencyKey: 'all', concurrencyLimit: 5, concurrencyKey2: 'u1', concurrencyLimit2: 1, slotHolders2: 1 };
    expect(waitingFor(run({ ...two, slotHolders: 2 }), [], NOW)).toEqual({ kind: 'concurrency', key: 'u1', limit: 1, holding: 1 });
    expect(waitingFor(run({ ...two, slotHolders: 5 }), [], NOW)).toEqual({ kind: 'concurrency', key: 'all', limit: 5, holding: 5 });
    expect(waitingFor(run({ status: 'queued', leaseUntilMs: NOW + 5000 }), [], NOW)).toEqual({ kind: 'throttle', until: new Date(NOW + 5000).toISOString() });
    // Throttled with a concurrency limit too: the throttle first, then the slot.
    const limited = { status: 'queued', admitted: false, concurrencyKey: 'u1', concurrencyLimit: 1, slotHolders: 1 };
    expect(waitingFor(run({ ...limited, leaseUntilMs: NOW + 5000 }), [], NOW)).toEqual({ kind: 'throttle', until: new Date(NOW + 5000).toISOString() });
    expect(waitingFor(run({ ...limited, leaseUntilMs: NOW - 5 }), [], NOW)).toMatchObject({ kind: 'concurrency' });
    expect(waitingFor(run({ status: 'queued', leaseUntilMs: NOW - 5 }), [], NOW)).toEqual({ kind: 'scheduler', since: new Date(NOW - 60_000).toISOString() });
    // A queued singleton names the run of its key it waits behind.
    const queue = { status: 'queued', admitted: false, concurrencyKey: 'ada', concurrencyLimit: 1, slotHolders: 1, holdsSlots: true };
    expect(waitingFor(run({ ...queue, slotHolderId: 'run_a' }), [], NOW)).toEqual({ kind: 'singleton', key: 'ada', activeRunId: 'run_a' });
    expect(waitingFor(run({ ...queue, slotHolders: 0 }), [], NOW)).toEqual({ kind: 'singleton', key: 'ada' });
  });

  it('a parked run that gave its slot back sleeps until its time, then waits for a slot', () => {
    const released = { status: 'waiting', admitted: false, concurrencyKey: 'u1', concurrencyLimit: 1, slotHolders: 1 };
    const nap = step({ name: 'nap', op: 'Sleep', status: 'sleeping', wakeAtMs: NOW + 5000 });
    expect(waitingFor(run({ ...released, leaseUntilMs: NOW + 5000 }), [nap], NOW)).toEqual({ kind: 'sleep', step: 'nap', until: new Date(NOW + 5000).toISOString() });
    // Its sleep over (the step is resolved once it is claimed again), or its event come: the slot is what it waits for.
    expect(waitingFor(run({ ...released, leaseUntilMs: NOW - 10 }), [{ ...nap, wakeAtMs: NOW - 10 }], NOW)).toEqual({ kind: 'concurrency', key: 'u1', limit: 1, holding: 1 });
    expect(waitingFor(run({ ...released, leaseUntilMs: NOW - 10 }), [], NOW)).toEqual({ kind: 'concurrency', key: 'u1', limit: 1, holding: 1 });
    // Paused, it says so first.
    expect(waitingFor(run({ ...released, status: 'paused' }), [], NOW)).toEqual({ kind: 'paused' });
  });

  it('tells transport retries from a throttle, and a held run from a parked one', () => {
    expect(waitingFor(run({ status: 'running', transportFailures: 2, leaseUntilMs: NOW + 2000 }), [], NOW)).toEqual({
      kind: 'transport_retry',
      failures: 2,
      nextTryAt: new Date(NOW + 2000).toISOString(),
    });
    expect(waitingFor(run({ status: 'running', leaseOwner: 'replica-1', leaseUntilMs: NOW + 15_000 }), [], NOW)).toEqual({ kind: 'running' });
  });
});
