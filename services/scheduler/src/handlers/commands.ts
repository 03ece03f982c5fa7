import type { Bus, Subscription } from '@dws/bus';
import type { Logger } from '@dws/log';
import { withTxRetry, type Database } from '@dws/db';
import { ApiRequestSchema, ApprovalListedSchema, fromBinary, ResolveStepSchema, StartRunSchema, WorkflowsRegisteredSchema, type StartRun } from '@dws/proto';
import { COMMAND_ACK_WAIT_MS, streams, subjects, type ApiHandler, type Outbox, type OutboxMessage } from '@dws/runtime';
import { markApprovalListed, resolveStep, type NewFrame, type NewRun } from '../store/runs.js';
import { lockRun, writeAudit } from '../store/control.js';
import { lockCancelOn, signalsFor } from '../store/cancel-signals.js';
import { cancelOnHolds, cancelOnReason, parseInput } from '../domain/cancel-on.js';
import { cancelLockedRun } from '../store/effects.js';
import { activeSingletons, insertFlowRun, queuedFrame } from '../store/flow.js';
import type { Engine } from '../engine/engine.js';
import { newHeldRun } from '../engine/held-run.js';
import { publishFrames, type LiveRun } from '../engine/live.js';
import type { WorkflowConfigs } from '../engine/workflow-configs.js';

const dec = new TextDecoder();
const enc = new TextEncoder();

type StartRunDeps = {
  bus: Bus;
  db: Database;
  engine: Engine;
  outbox: Outbox;
  /** A run with timeouts was stored: its earliest deadline is this far away. */
  onTimed?: (ms: number) => void;
};

/**
 * StartRun commands: insert the run held by this replica and drive it at
 * once. Idempotent on the run id, so a redelivered command does nothing.
 */
export async function consumeStartRuns(opts: StartRunDeps): Promise<Subscription> {
  return opts.bus.consume(
    { stream: streams.schedulerCmds.name, durable: 'scheduler-start', filterSubject: subjects.startRun, concurrency: 64, ackWaitMs: COMMAND_ACK_WAIT_MS },
    async (msg) => startRun(opts, fromBinary(StartRunSchema, msg.data)),
  );
}

/** Direct StartRuns one replica handles at once; past it, it says busy and the stream carries them. */
const MAX_DIRECT_STARTS = 64;

/**
 * The same StartRun as a core request (subjects.startRunNow), answered once
 * the run is stored: ingest's outbox tries this before the stream. A replica
 * with too many in hand refuses (the sender publishes to the stream, which
 * this replica's consumer takes at its own pace), so a burst of events cannot
 * pile up unbounded work here.
 */
export function serveDirectStarts(opts: StartRunDeps): Subscription {
  let inHand = 0;
  return opts.bus.respond(subjects.startRunNow, 'scheduler', async (data) => {
    if (inHand >= MAX_DIRECT_STARTS) throw new Error('busy: too many direct starts in hand');
    inHand++;
    try {
      await startRun(opts, fromBinary(StartRunSchema, data));
      return new Uint8Array();
    } finally {
      inHand--;
    }
  });
}

async function startRun(opts: StartRunDeps, cmd: StartRun): Promise<void> {
  const inputJson = cmd.input.length ? dec.decode(cmd.input) : 'null';
  const newRun = {
    id: cmd.runId,
    workspaceId: cmd.workspaceId,
    workflow: cmd.workflow,
    app: cmd.app,
    runner: cmd.runner,
    triggerKind: cmd.triggerKind || 'event',
    eventId: cmd.eventId || null,
    eventName: cmd.eventName || null,
    replayOf: cmd.replayOf || null,
    inputJson,
    createdAtMs: Number(cmd.createdAtMs) || Date.now(),
    session: cmd.session || null,
    tags: cmd.tags.length > 0 ? cmd.tags : null,
    ...(cmd.timeoutStartMs > 0n && { timeoutStartMs: Number(cmd.timeoutStartMs) }),
    ...(cmd.timeoutFinishMs > 0n && { timeoutFinishMs: Number(cmd.timeoutFinishMs) }),
  };
  const notBeforeMs = Number(cmd.notBeforeMs);
  const timed = newRun.timeoutStartMs !== undefined || newRun.timeoutFinishMs !== undefined;
  // Flow control, timeouts, or no room to drive it now (back-pressure): store it queued; a replica with room claims it.
  if (cmd.concurrencyLimit > 0 || notBeforeMs > Date.now() || cmd.singletonMode || cmd.cancelOn || timed || opts.engine.capacity <= 0) {
    await startUnderFlowControl(opts, cmd, newRun, notBeforeMs);
    if (timed) opts.onTimed?.(Math.min(newRun.timeoutStartMs ?? Infinity, newRun.timeoutFinishMs ?? Infinity));
    return;
  }
  const frames: NewFrame[] = [
    queuedFrame(),
    { seq: 2, kind: 'run_status', fields: { status: 'running', attempt: 1 } },
  ];
  if (!(await opts.engine.insertHeld(newRun, frames))) return;
  opts.engine.adopt(
    newHeldRun({
      id: cmd.runId,
      workspaceId: cmd.workspaceId,
      workflow: cmd.workflow,
      app: cmd.app,
      runner: cmd.runner,
      eventName: cmd.eventName || cmd.workflow,
      inputJson,
      status: 'running',
      attempt: 1,
      pass: 0,
      stepCount: 0,
      nextSeq: frames.length + 1,
      transportFailures: 0,
      noRunnerSinceMs: null,
      parentRunId: null,
      onFailure: null,
      tags: newRun.tags,
    }),
    frames,
  );
}

/**
 * WorkflowsRegistered -> the scheduler's workflow projection: as the
 * invoker's request before it answers a registration (read-your-writes), and
 * from the stream (the durable path, for a registration whose request failed).
 */
export async function consumeWorkflowFacts(opts: { bus: Bus; workflows: WorkflowConfigs }): Promise<Subscription[]> {
  const apply = (data: Uint8Array) => {
    const fact = fromBinary(WorkflowsRegisteredSchema, data);
    const defs = fact.workflows.map((w) => ({ name: w.name, configJson: dec.decode(w.config) }));
    return opts.workflows.save(fact.workspaceId, fact.app, defs, Number(fact.version));
  };
  const stream = await opts.bus.consume(
    { stream: streams.invokerFacts.name, durable: 'scheduler-workflows', filterSubject: subjects.workflowsRegistered },
    (msg) => apply(msg.data),
  );
  const requests = opts.bus.respond(subjects.applyWorkflowsScheduler, 'scheduler', async (data) => {
    await apply(data);
    return new Uint8Array();
  });
  return [stream, requests];
}

/**
 * A run ingest flagged with flow control, or one that came while this
 * replica had no room: a cancelOn applied before it came first (the run is
 * stored cancelled when one matches), then singleton (skip: this run is cancelled as
 * skipped when one of its key is active; cancel: the active ones are
 * cancelled; queue: it waits for its key's one slot, which the active run
 * holds to its end), then it waits queued for its throttle time or a
 * concurrency slot (or for room); the engine admits and claims it.
 */
async function startUnderFlowControl(
  opts: { bus: Bus; db: Database; engine: Engine; outbox: Outbox },
  cmd: StartRun,
  run: NewRun,
  notBeforeMs: number,
): Promise<void> {
  const singletonKey = cmd.singletonMode ? cmd.singletonKey : null;
  const queue = cmd.singletonMode === 'queue';
  const self = (status: string): LiveRun => ({ id: run.id, workspaceId: run.workspaceId, status, workflow: run.workflow, app: run.app });
  const flow = {
    notBeforeMs,
    concurrencyKey: cmd.concurrencyKey,
    concurrencyLimit: cmd.concurrencyLimit,
    concurrencyKey2: cmd.concurrencyKey2,
    concurrencyLimit2: cmd.concurrencyLimit2,
    concurrencyShared2: cmd.concurrencyShared2,
    priority: Number(cmd.priority),
    singletonKey,
    // A queued singleton: a slot of limit 1 on its key (ingest's fields) that its run keeps to its end.
    holdsSlots: queue,
  };
  if ((singletonKey === null || queue) && !cmd.cancelOn) {
    // Nothing to weigh against other runs: one statement, idempotent on the run id.
    const queued = await insertFlowRun(opts.db, run, flow);
    if (queued) publishFrames(opts.bus, self('queued'), [queued]);
    opts.engine.nudge();
    return;
  }
  const { pending, live } = await withTxRetry(opts.db, async (tx) => {
    const out: OutboxMessage[] = [];
    // Frames stored here go live once committed: this run's queued frame, the cancelled ones.
    const live: [LiveRun, NewFrame[]][] = [];
    const done = async () => ({ pending: await opts.outbox.enqueue(tx, out), live });
    // A repeat of this StartRun (a redelivery, or the stream copy of a direct start whose
    // answer was lost) must not act again: a singleton "cancel" would cancel newer runs.
    if ((await tx.query('select 1 from scheduler.runs where id = $1', [run.id])).length > 0) return done();
    /** Store this run and end it at once (a singleton skip, a cancelOn that came first); false if it was not stored. */
    const storeCancelled = async (message: string): Promise<boolean> => {
      const queued = await insertFlowRun(tx, run, { notBeforeMs: 0, concurrencyKey: '', concurrencyLimit: 0, priority: 0, singletonKey: null });
      const locked = queued && (await lockRun(tx, run.workspaceId, run.id));
      if (!locked) return false;
      const cancelled = await cancelLockedRun(tx, locked, { message });
      out.push(...cancelled.messages);
      live.push([self('queued'), [queued]], ...cancelled.live);
      return true;
    };
    if (cmd.cancelOn) {
      // A cancelOn event applied before this run arrived (but after it was created) cancels it as it is stored.
      await lockCancelOn(tx, run.workspaceId, run.app, run.workflow);
      const signal = (await signalsFor(tx, run)).find((g) =>
        cancelOnHolds(g.ifExpr, { eventName: run.eventName, input: run.inputJson }, { name: g.eventName, data: parseInput(g.eventData), id: g.eventId, ts: g.eventTs }),
      );
      if (signal) {
        const { message, detail } = cancelOnReason({ name: signal.eventName, id: signal.eventId });
        if (await storeCancelled(message)) {
          await writeAudit(tx, { workspaceId: run.workspaceId, action: 'cancel', runId: run.id, actor: signal.actor ?? undefined, detail });
        }
        return done();
      }
    }
    if (singletonKey !== null && !queue) {
      const active = await activeSingletons(tx, { workspaceId: run.workspaceId, app: run.app, workflow: run.workflow, key: singletonKey, except: run.id });
      if (active.length > 0 && cmd.singletonMode === 'skip') {
        await storeCancelled('Skipped: a singleton run of this key is active.');
        return done();
      }
      if (cmd.singletonMode === 'cancel') {
        for (const id of active) {
          const locked = await lockRun(tx, run.workspaceId, id);
          if (!locked) continue;
          const cancelled = await cancelLockedRun(tx, locked, { message: 'Cancelled: a newer singleton run of this key started.' });
          out.push(...cancelled.messages);
          live.push(...cancelled.live);
        }
      }
    }
    const queued = await insertFlowRun(tx, run, flow);
    if (queued) live.push([self('queued'), [queued]]);
    return done();
  });
  for (const [r, frames] of live) publishFrames(opts.bus, r, frames);
  await opts.outbox.afterCommit(pending);
  opts.engine.nudge();
}

/**
 * Scheduler API calls that came as durable commands (ApiRequest on
 * `scheduler.cmd.wake`, one consumer for all): a wake ingest could not
 * deliver at once (`waiters.wake`, idempotent: a waiter is resolved once) and
 * an event's cancelOn (`runs.cancelOn`: applying it again cancels nothing
 * more). The request's op picks the handler.
 */
export function consumeApiCommands(opts: { bus: Bus; log: Logger; handlers: Record<string, ApiHandler> }): Promise<Subscription> {
  return opts.bus.consume(
    { stream: streams.schedulerCmds.name, durable: 'scheduler-wakes', filterSubject: subjects.schedulerApiCommand, concurrency: 8, ackWaitMs: COMMAND_ACK_WAIT_MS },
    async (msg) => {
      const req = fromBinary(ApiRequestSchema, msg.data);
      const handler = opts.handlers[req.op];
      if (!handler) {
        // No redelivery makes this op known to this version: dropping it is all there is.
        opts.log.warn({ op: req.op, seq: msg.seq }, 'scheduler command with an unknown op; dropped');
        return;
      }
      const parsed = JSON.parse(dec.decode(req.body)) as { body?: unknown };
      await handler({
        caller: { workspaceId: req.workspaceId, actor: req.actor, keyKind: req.keyKind, requestId: req.requestId, suspended: false },
        params: {},
        query: {},
        headers: {},
        body: parsed.body,
      });
    },
  );
}

/**
 * ResolveStep from the service that completed a handed-off step (the
 * approvals service's decision, timeout or refusal): the step resolves with
 * its data or error if it is still waiting, and its run wakes, the same path
 * an event's waiter and a child's end take. A repeat finds the step resolved
 * and does nothing.
 */
export async function consumeResolves(opts: { bus: Bus; db: Database; nudge: () => void }): Promise<Subscription> {
  return opts.bus.consume(
    { stream: streams.schedulerCmds.name, durable: 'scheduler-resolves', filterSubject: subjects.resolveStep, concurrency: 16, ackWaitMs: COMMAND_ACK_WAIT_MS },
    async (msg) => {
      const r = fromBinary(ResolveStepSchema, msg.data);
      const resolved = await resolveStep(opts.db, {
        runId: r.runId,
        stepId: r.stepId,
        ...(r.errorMessage ? { error: { message: r.errorMessage } } : { dataJson: r.data.length ? dec.decode(r.data) : 'null' }),
        ...(r.usage.length ? { usageJson: dec.decode(r.usage) } : {}),
      });
      if (resolved) opts.nudge();
    },
  );
}

/**
 * ApprovalListed from the approvals service: the run's Approval step is an
 * open approval now, so its run reads needsAttention (never before the
 * approval can be listed, and never for an ungated one). The workspace's run
 * stream gets a run_status frame: the signal to refetch the run.
 */
export async function consumeApprovalsListed(opts: { bus: Bus; db: Database }): Promise<Subscription> {
  return opts.bus.consume(
    { stream: streams.schedulerCmds.name, durable: 'scheduler-attention', filterSubject: subjects.approvalListed, concurrency: 16, ackWaitMs: COMMAND_ACK_WAIT_MS },
    async (msg) => {
      const l = fromBinary(ApprovalListedSchema, msg.data);
      const run = await markApprovalListed(opts.db, { runId: l.runId, stepId: l.stepId });
      if (!run) return;
      const frame = { kind: 'run_status', ts: new Date().toISOString(), runId: l.runId, status: run.status, workflow: run.workflow, app: run.app, needsAttention: true };
      opts.bus.emit(subjects.workspaceRuns(run.workspace_id), enc.encode(JSON.stringify(frame)));
    },
  );
}
