/**
 * "Why is it not moving?": what a non-terminal run waits for, derived from
 * the scheduler's own rows (run, its parked steps, the control audit). Pure,
 * so every case is a unit test; the store gathers the facts in one query.
 */

export interface StepError {
  message: string;
  stack?: string;
}

/** The run-level facts (scheduler.runs columns) the answer depends on. */
export interface RunWaitFacts {
  status: string;
  runner: string;
  createdAtMs: number;
  leaseOwner: string | null;
  leaseUntilMs: number | null;
  noRunnerSinceMs: number | null;
  transportFailures: number;
  admitted: boolean;
  concurrencyKey: string | null;
  concurrencyLimit: number;
  /** Runs of the same workflow and key holding a concurrency slot now. */
  slotHolders: number;
  /** A queued singleton (it holds its slot to its end), and the run of its key active now, if any. */
  holdsSlots: boolean;
  slotHolderId: string | null;
  /** The second constraint (limit 0: none) and the runs holding its key's slots. */
  concurrencyKey2: string | null;
  concurrencyLimit2: number;
  slotHolders2: number;
  /** The latest pause in the control audit: who and when. */
  pausedBy: string | null;
  pausedAtMs: number | null;
}

/** A step that is not finished: parked (sleeping, waiting, child) or backing off (retrying). */
export interface OpenStep {
  name: string;
  op: string;
  idx: number;
  status: string;
  attempts: number;
  wakeAtMs: number | null;
  error: StepError | null;
  childRunId: string | null;
  childWorkflow: string | null;
  /** The waiters row of a WaitForEvent step. */
  eventName: string | null;
  eventIf: string | null;
}

export type WaitingFor =
  | { kind: 'paused'; by?: string; since?: string }
  | { kind: 'no_runner'; since: string; failsAt: string; runner?: string }
  | { kind: 'retry'; step: string; attempt: number; nextTryAt?: string; error?: StepError }
  | { kind: 'approval'; step: string }
  | { kind: 'event'; step: string; event: string; if?: string; timeoutAt?: string }
  | { kind: 'child'; step: string; childRunId?: string; workflow?: string }
  | { kind: 'model'; step: string }
  | { kind: 'sleep'; step: string; until: string }
  | { kind: 'transport_retry'; failures: number; nextTryAt?: string }
  | { kind: 'concurrency'; key: string; limit: number; holding: number }
  | { kind: 'singleton'; key: string; activeRunId?: string }
  | { kind: 'throttle'; until: string }
  | { kind: 'scheduler'; since: string }
  | { kind: 'running' };

/** SPEC transitions: a run with no capable runner fails once the wait exceeds 5 minutes from its durable stamp. */
export const NO_RUNNER_LIMIT_MS = 5 * 60_000;

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The one thing a run waits for, most specific first: a pause beats
 * everything (the scheduler will not step it), then a missing runner (it
 * will fail), then a concurrency slot (queued for one, or due again after a
 * park gave it back), then its steps (a retry backoff, else the first parked
 * step in step order), then transport retries, then the queue (throttle, a
 * scheduler replica with room). Undefined for a terminal run.
 */
export function waitingFor(run: RunWaitFacts, steps: OpenStep[], nowMs: number): WaitingFor | undefined {
  if (TERMINAL.has(run.status)) return undefined;
  if (run.status === 'paused') {
    return { kind: 'paused', ...(run.pausedBy ? { by: run.pausedBy } : {}), ...(run.pausedAtMs !== null ? { since: iso(run.pausedAtMs) } : {}) };
  }
  if (run.noRunnerSinceMs !== null) {
    return { kind: 'no_runner', since: iso(run.noRunnerSinceMs), failsAt: iso(run.noRunnerSinceMs + NO_RUNNER_LIMIT_MS), ...(run.runner ? { runner: run.runner } : {}) };
  }
  // Queued for a slot (past any throttle time), or due again after a park that gave its slot back (its sleep over, its event come).
  if (!run.admitted && run.concurrencyLimit > 0 && (run.leaseUntilMs === null || run.leaseUntilMs <= nowMs)) {
    // A queued singleton waits for the active run of its key to end.
    if (run.holdsSlots) return { kind: 'singleton', key: run.concurrencyKey ?? '', ...(run.slotHolderId ? { activeRunId: run.slotHolderId } : {}) };
    // The constraint that holds it back: the first while its slots are full, else the second's.
    if (run.concurrencyLimit2 > 0 && run.slotHolders < run.concurrencyLimit && run.slotHolders2 >= run.concurrencyLimit2) {
      return { kind: 'concurrency', key: run.concurrencyKey2 ?? '', limit: run.concurrencyLimit2, holding: run.slotHolders2 };
    }
    return { kind: 'concurrency', key: run.concurrencyKey ?? '', limit: run.concurrencyLimit, holding: run.slotHolders };
  }
  const future = run.leaseUntilMs !== null && run.leaseUntilMs > nowMs && run.leaseOwner === null ? run.leaseUntilMs : undefined;
  const ordered = [...steps].sort((a, b) => a.idx - b.idx);
  const retrying = ordered.find((s) => s.status === 'retrying');
  if (retrying) {
    return {
      kind: 'retry',
      step: retrying.name,
      attempt: retrying.attempts,
      ...(future !== undefined ? { nextTryAt: iso(future) } : {}),
      ...(retrying.error ? { error: retrying.error } : {}),
    };
  }
  const parked = ordered.find((s) => s.status === 'sleeping' || s.status === 'waiting' || s.status === 'child');
  if (parked) {
    if (parked.op === 'Approval') return { kind: 'approval', step: parked.name };
    if (parked.op === 'WaitForEvent') {
      return {
        kind: 'event',
        step: parked.name,
        event: parked.eventName ?? '',
        ...(parked.eventIf ? { if: parked.eventIf } : {}),
        ...(parked.wakeAtMs !== null ? { timeoutAt: iso(parked.wakeAtMs) } : {}),
      };
    }
    if (parked.op === 'RunWorkflow' || parked.status === 'child') {
      return { kind: 'child', step: parked.name, ...(parked.childRunId ? { childRunId: parked.childRunId } : {}), ...(parked.childWorkflow ? { workflow: parked.childWorkflow } : {}) };
    }
    if (parked.op === 'Infer') return { kind: 'model', step: parked.name };
    if (parked.wakeAtMs !== null) return { kind: 'sleep', step: parked.name, until: iso(parked.wakeAtMs) };
  }
  if (run.transportFailures > 0 && future !== undefined) return { kind: 'transport_retry', failures: run.transportFailures, nextTryAt: iso(future) };
  if (run.status === 'queued') {
    if (future !== undefined) return { kind: 'throttle', until: iso(future) };
    return { kind: 'scheduler', since: iso(run.createdAtMs) };
  }
  if (run.leaseOwner !== null) return { kind: 'running' };
  // Waiting with nothing parked (a resolved step not yet picked up), or running between replicas.
  return { kind: 'scheduler', since: iso(future ?? run.leaseUntilMs ?? run.createdAtMs) };
}
