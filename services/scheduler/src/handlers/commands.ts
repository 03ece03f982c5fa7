import type { Bus, Subscription } from '@dws/bus';
import type { Database } from '@dws/db';
import { ApiRequestSchema, fromBinary, StartRunSchema, WorkflowsRegisteredSchema, type StartRun } from '@dws/proto';
import { streams, subjects, type ApiHandler, type Outbox, type OutboxMessage } from '@dws/runtime';
import { insertHeldRun, type NewFrame, type NewRun } from '../store/runs.js';
import { lockRun } from '../store/control.js';
import { cancelLockedRun } from '../store/effects.js';
import { activeSingletons, insertFlowRun } from '../store/flow.js';
import type { Engine } from '../engine/engine.js';
import { newHeldRun } from '../engine/held-run.js';
import type { WorkflowConfigs } from '../engine/workflow-configs.js';

const dec = new TextDecoder();

type StartRunDeps = { bus: Bus; db: Database; engine: Engine; outbox: Outbox; owner: string; leaseMs: number };

/**
 * StartRun commands: insert the run held by this replica and drive it at
 * once. Idempotent on the run id, so a redelivered command does nothing.
 */
export async function consumeStartRuns(opts: StartRunDeps): Promise<Subscription> {
  return opts.bus.consume(
    { stream: streams.schedulerCmds.name, durable: 'scheduler-start', filterSubject: subjects.startRun, concurrency: 64 },
    async (msg) => startRun(opts, fromBinary(StartRunSchema, msg.data)),
  );
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
  };
  const notBeforeMs = Number(cmd.notBeforeMs);
  // Flow control, or no room to drive it now (back-pressure): store it queued; a replica with room claims it.
  if (cmd.concurrencyLimit > 0 || notBeforeMs > Date.now() || cmd.singletonMode || opts.engine.capacity <= 0) {
    await startUnderFlowControl(opts, cmd, newRun, notBeforeMs);
    return;
  }
  const frames: NewFrame[] = [
    { seq: 1, kind: 'run_status', fields: { status: 'queued', attempt: 1 } },
    { seq: 2, kind: 'run_status', fields: { status: 'running', attempt: 1 } },
  ];
  const inserted = await insertHeldRun(opts.db, newRun, opts.owner, opts.leaseMs, frames);
  if (!inserted) return;
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
    }),
  );
}

/** WorkflowsRegistered facts -> the scheduler's workflow projection. */
export async function consumeWorkflowFacts(opts: { bus: Bus; workflows: WorkflowConfigs }): Promise<Subscription> {
  return opts.bus.consume(
    { stream: streams.invokerFacts.name, durable: 'scheduler-workflows', filterSubject: subjects.workflowsRegistered },
    async (msg) => {
      const fact = fromBinary(WorkflowsRegisteredSchema, msg.data);
      await opts.workflows.save(
        fact.workspaceId,
        fact.app,
        fact.workflows.map((w) => ({ name: w.name, configJson: dec.decode(w.config) })),
      );
    },
  );
}

/**
 * A run ingest flagged with flow control: singleton first (skip: this run is
 * cancelled as skipped when one of its key is active; cancel: the active ones
 * are cancelled), then it waits queued for its throttle time or a
 * concurrency slot; the engine admits and claims it.
 */
async function startUnderFlowControl(
  opts: { db: Database; engine: Engine; outbox: Outbox },
  cmd: StartRun,
  run: NewRun,
  notBeforeMs: number,
): Promise<void> {
  const singletonKey = cmd.singletonMode ? cmd.singletonKey : null;
  const pending = await opts.db.tx(async (tx) => {
    const out: OutboxMessage[] = [];
    if (singletonKey !== null) {
      const active = await activeSingletons(tx, { workspaceId: run.workspaceId, app: run.app, workflow: run.workflow, key: singletonKey, except: run.id });
      if (active.length > 0 && cmd.singletonMode === 'skip') {
        if (await insertFlowRun(tx, run, { notBeforeMs: 0, concurrencyKey: '', concurrencyLimit: 0, priority: 0, singletonKey: null })) {
          const locked = await lockRun(tx, run.workspaceId, run.id);
          if (locked) out.push(...(await cancelLockedRun(tx, locked, { message: 'Skipped: a singleton run of this key is active.' })));
        }
        return opts.outbox.enqueue(tx, out);
      }
      if (cmd.singletonMode === 'cancel') {
        for (const id of active) {
          const locked = await lockRun(tx, run.workspaceId, id);
          if (locked) out.push(...(await cancelLockedRun(tx, locked, { message: 'Cancelled: a newer singleton run of this key started.' })));
        }
      }
    }
    await insertFlowRun(tx, run, {
      notBeforeMs,
      concurrencyKey: cmd.concurrencyKey,
      concurrencyLimit: cmd.concurrencyLimit,
      priority: Number(cmd.priority),
      singletonKey,
    });
    return opts.outbox.enqueue(tx, out);
  });
  await opts.outbox.afterCommit(pending);
  opts.engine.nudge();
}

/**
 * Wakes ingest could not deliver at once (scheduler unreachable): the same
 * `waiters.wake` call, replayed from the stream. Idempotent: a waiter is
 * resolved once, a redelivery finds nobody left waiting.
 */
export async function consumeDeferredWakes(opts: { bus: Bus; wake: ApiHandler }): Promise<Subscription> {
  return opts.bus.consume(
    { stream: streams.schedulerCmds.name, durable: 'scheduler-wakes', filterSubject: subjects.wakeWaiters, concurrency: 8 },
    async (msg) => {
      const req = fromBinary(ApiRequestSchema, msg.data);
      const parsed = JSON.parse(dec.decode(req.body)) as { body?: unknown };
      await opts.wake({
        caller: { workspaceId: req.workspaceId, actor: req.actor, keyKind: req.keyKind, requestId: req.requestId, suspended: false },
        params: {},
        query: {},
        body: parsed.body,
      });
    },
  );
}
