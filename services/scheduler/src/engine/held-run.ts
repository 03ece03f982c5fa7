import type { StepError } from '@dws/protocol';
import { memoEntry } from '../domain/invoke-body.js';
import type { NewFrame, ClaimedRun, StoredStep } from '../store/runs.js';
import type { PassTrace } from './pass-trace.js';

/** A parked step: a sleep, a wait, a child run, a hand-off. */
export interface PendingStep {
  op: string;
  status: string;
  wakeAtMs: number | undefined;
}

/**
 * A run this replica drives, kept in memory between passes so no pass
 * re-reads the memo: it is loaded once at claim and updated as steps
 * complete.
 */
export interface HeldRun {
  id: string;
  workspaceId: string;
  workflow: string;
  app: string;
  runner: string;
  eventName: string;
  inputJson: string;
  status: string;
  attempt: number;
  pass: number;
  stepCount: number;
  nextSeq: number;
  transportFailures: number;
  noRunnerSinceMs: number | null;
  parentRunId: string | null;
  /** Set on an onFailure run: the failed run's error, sent as ctx.error. */
  onFailure: { error: StepError } | null;
  /** Its tags, carried by its run-end and step-failed facts. */
  tags: string[] | null;
  /** Memo entries as JSON fragments by hashed id (insertion-ordered; a resolved pending entry is replaced). */
  memo: Map<string, string>;
  /** Index of every step with a row, so a retry keeps its original position. */
  known: Map<string, number>;
  /** Failed attempts of steps being retried. */
  stepAttempts: Map<string, number>;
  pending: Map<string, PendingStep>;
  /** Log keys (`attempt:scope:index`) already persisted: lines are stored once under replay. */
  logKeys: Set<string>;
  /** Frames to write with the next applied pass (e.g. waiting -> running on a claim); seqs assigned then. */
  pendingFrames: NewFrame[];
  /** An invoke is out: checkpoints of this pass may be applied. */
  invoking: boolean;
  /** Checkpoints applied during the pass in flight. */
  checkpointed: number;
  /** Where the steps the runner reports next may have begun (ms epoch): the pass's start, then each checkpoint's answer. */
  stepsFromMs: number;
  /** The checkpoint being applied, if any: checkpoints and the pass's own reply apply one at a time. */
  applying: Promise<unknown>;
  /** The spans of the pass in flight, with tracing on: its checkpoints' go under it. */
  trace: PassTrace | undefined;
  /**
   * A new run's first frames, published again with its next ones: a client
   * follows a run it started once its POST's 202 names it, and the gateway's
   * subscription may reach nats-server a moment after these went live. With
   * them again it sees the run from its beginning instead of reading storage
   * (the gateway merges on seq: nobody sees a frame twice).
   */
  firstFramesAgain: NewFrame[] | undefined;
}

type Fresh = 'memo' | 'known' | 'stepAttempts' | 'pending' | 'logKeys' | 'pendingFrames' | 'invoking' | 'checkpointed' | 'stepsFromMs' | 'applying' | 'trace' | 'firstFramesAgain';

export function newHeldRun(fields: Omit<HeldRun, Fresh>): HeldRun {
  return {
    ...fields,
    memo: new Map(),
    known: new Map(),
    stepAttempts: new Map(),
    pending: new Map(),
    logKeys: new Set(),
    pendingFrames: [],
    invoking: false,
    checkpointed: 0,
    stepsFromMs: 0,
    applying: Promise.resolve(),
    trace: undefined,
    firstFramesAgain: undefined,
  };
}

const PENDING = new Set(['sleeping', 'waiting', 'child']);

export function heldFromClaim(c: ClaimedRun, stored: StoredStep[], logKeys: string[]): HeldRun {
  const run = newHeldRun({
    id: c.id,
    workspaceId: c.workspace_id,
    workflow: c.workflow,
    app: c.app,
    runner: c.runner,
    eventName: c.event_name ?? c.workflow,
    inputJson: c.input,
    status: c.status,
    attempt: c.attempt,
    pass: c.pass,
    stepCount: c.step_count,
    nextSeq: c.next_seq,
    transportFailures: c.transport_failures,
    noRunnerSinceMs: c.no_runner_since_ms,
    parentRunId: c.parent_run_id,
    onFailure: c.on_failure_of ? { error: (c.failure_error as StepError | null) ?? { message: 'Run failed.' } } : null,
    tags: c.tags,
  });
  for (const k of logKeys) run.logKeys.add(k);
  stored.forEach((s, i) => {
    run.known.set(s.step_id, i);
    if (s.status === 'succeeded') run.memo.set(s.step_id, memoEntry(s.step_id, { dataJson: s.data ?? 'null' }));
    else if (s.status === 'failed') run.memo.set(s.step_id, memoEntry(s.step_id, { error: s.error ?? { message: 'Step failed.' } }));
    else if (s.status === 'retrying') run.stepAttempts.set(s.step_id, s.attempts);
    else if (PENDING.has(s.status)) {
      run.memo.set(s.step_id, memoEntry(s.step_id, { pending: true }));
      run.pending.set(s.step_id, { op: s.op, status: s.status, wakeAtMs: s.wake_at_ms ?? undefined });
    }
  });
  if (run.status !== 'running') {
    // Its seq is assigned when it is written, with the next applied pass.
    run.pendingFrames.push({ seq: 0, kind: 'run_status', fields: { status: 'running', attempt: run.attempt } });
    run.status = 'running';
  }
  return run;
}
