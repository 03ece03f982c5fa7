import type { Database } from '@dws/db';
import type { StepError } from '@dws/protocol';
import type { StepOutcome } from '../domain/reply.js';
import type { OutboxMessage } from '@dws/runtime';
import { runEndMessages } from '../domain/handoffs.js';
import { invokedRunSlots } from '../domain/invoked-flow.js';
import type { SlotFields } from '../domain/slot-fields.js';
import { liveRunOf, type LiveRun } from '../engine/live.js';
import { lockChildren, setRunStatus, type ControlRun } from './control.js';
import { holdsKey, queuedFrame } from './flow.js';
import { resolveStep, type NewFrame, type NewRun } from './runs.js';

/**
 * What a transaction did to runs: the frames it stored, to go live, and the
 * messages it wrote to the outbox, to publish, once it commits.
 */
export interface RunEffects {
  live: [LiveRun, NewFrame[]][];
  messages: OutboxMessage[];
}

const noEffects = (): RunEffects => ({ live: [], messages: [] });

export function addEffects(to: RunEffects, more: RunEffects): RunEffects {
  to.live.push(...more.live);
  to.messages.push(...more.messages);
  return to;
}

export interface QueuedRun extends Omit<NewRun, 'createdAtMs'> {
  parentRunId?: string;
  parentStepId?: string;
  onFailureOf?: string;
  /** A child's flow control, evaluated over its input; without it the run takes its source's (replay_of, else on_failure_of), if any. */
  slots?: SlotFields;
  /** A replay's singleton key (its source's): the gates of later runs of the key see it active. */
  singletonKey?: string | null;
}

/**
 * Insert a run that any replica may pick up at once (queued, due now), with
 * its queued frame and its workflow's timeouts (from the projection, in the
 * same statement). Children, onFailure runs and replays start this way, and
 * each waits for a slot like any run of its keys:
 * - a child takes its workflow's concurrency, priority and queued
 *   singleton, evaluated over its input (`slots`);
 * - a replay (or retry-from-step) takes its source run's keys and limits, its
 *   priority and a queued singleton's hold, as does an onFailure run from the
 *   run that failed: a bulk replay after an outage does not pass a limit
 *   meant to spare the API that failed.
 * Returns its queued frame to go live, or nothing when the id existed.
 */
export async function insertQueuedRun(db: Database, r: QueuedRun): Promise<RunEffects> {
  const queued = queuedFrame();
  const sl = r.slots;
  const rows = await db.query(
    `with r as (
       insert into scheduler.runs (id, workspace_id, workflow, app, runner, status, trigger_kind, event_id, event_name, replay_of, input,
                                   next_seq, lease_until, started_at, parent_run_id, parent_step_id, on_failure_of, timeout_start_ms, timeout_finish_ms,
                                   concurrency_key, concurrency_limit, admitted, concurrency_key_2, concurrency_limit_2, concurrency_shared_2,
                                   priority, holds_slots, singleton_key, tags)
       select $1, $2, $3, $4, $5, 'queued', $6, $7, $8, $9, $10, 2, now(), now(), $11, $12, $13, w.timeout_start_ms, w.timeout_finish_ms,
              s.concurrency_key, s.concurrency_limit, s.concurrency_limit = 0, s.concurrency_key_2, s.concurrency_limit_2, s.concurrency_shared_2,
              s.priority, s.holds_slots, $23,
              -- A replay or on-failure run keeps its source's tags, a child its parent's: a tenant's tag follows its whole tree.
              (select o.tags from scheduler.runs o where o.id = coalesce($9, $13, $11) and o.workspace_id = $2)
         from (select 1) one left join scheduler.workflows w on w.workspace_id = $2 and w.app = $4 and w.name = $3
         left join scheduler.runs src on src.id = coalesce($9, $13) and src.workspace_id = $2
         cross join lateral (select coalesce($16, src.concurrency_key) as concurrency_key, coalesce($17, src.concurrency_limit, 0) as concurrency_limit,
                                    coalesce($18, src.concurrency_key_2) as concurrency_key_2, coalesce($19, src.concurrency_limit_2, 0) as concurrency_limit_2,
                                    coalesce($20, src.concurrency_shared_2, false) as concurrency_shared_2, coalesce($21, src.priority, 0) as priority,
                                    coalesce($22, src.holds_slots, false) as holds_slots) s
       on conflict (id) do nothing
       returning id
     )
     insert into scheduler.frames (run_id, seq, workspace_id, kind, payload, ts)
     select r.id, 1, $2, 'run_status', $14::jsonb, $15::timestamptz from r
     returning run_id`,
    [
      r.id, r.workspaceId, r.workflow, r.app, r.runner, r.triggerKind, r.eventId, r.eventName, r.replayOf, r.inputJson,
      r.parentRunId ?? null, r.parentStepId ?? null, r.onFailureOf ?? null, JSON.stringify(queued.fields), queued.ts,
      // A child's own fields (null: the source's).
      sl?.concurrencyKey ?? null, sl?.concurrencyLimit ?? null, sl?.concurrencyKey2 ?? null, sl?.concurrencyLimit2 ?? null, sl?.concurrencyShared2 ?? null,
      sl?.priority ?? null, sl?.holdsSlots ?? null, r.singletonKey ?? null,
    ],
  );
  if (rows.length === 0) return noEffects();
  return { live: [[{ id: r.id, workspaceId: r.workspaceId, status: 'queued', workflow: r.workflow, app: r.app }, [queued]]], messages: [] };
}

/**
 * SPEC RunWorkflow: an explicit childApp wins; else the parent's app when it
 * has the workflow, else any app that has it (cross-app fallback), else the
 * parent's app (the run then waits for a runner like any other). With the
 * registered workflow's config, when there is one.
 */
export async function resolveChild(db: Database, workspaceId: string, parentApp: string, workflow: string, app?: string): Promise<{ app: string; config?: unknown }> {
  const rows = await db.query<{ app: string; config: unknown }>(
    `select app, config from scheduler.workflows where workspace_id = $1 and name = $2 and ($4::text is null or app = $4)
      order by (app = $3) desc, app limit 1`,
    [workspaceId, workflow, parentApp, app ?? null],
  );
  return rows[0] ?? { app: app ?? parentApp };
}

export interface ParentRef {
  id: string;
  workspaceId: string;
  app: string;
  runner: string;
  workflow: string;
}

/** Waiters and child runs of newly parked steps, written in the pass's transaction. */
export async function parkSteps(tx: Database, run: ParentRef, steps: StepOutcome[]): Promise<RunEffects> {
  const effects = noEffects();
  const waits = steps.filter((s) => s.status === 'waiting' && s.wait);
  if (waits.length) {
    await tx.query(
      `insert into scheduler.waiters (workspace_id, event_name, run_id, step_id, if_expr)
       select $1, x.event_name, $2, x.step_id, x.if_expr from jsonb_to_recordset($3::jsonb) as x(event_name text, step_id text, if_expr text)
       on conflict do nothing`,
      [run.workspaceId, run.id, JSON.stringify(waits.map((s) => ({ event_name: s.wait!.eventName, step_id: s.id, if_expr: s.wait!.ifExpr ?? null })))],
    );
  }
  for (const s of steps) {
    if (s.status !== 'child' || !s.child) continue;
    const { app, config } = await resolveChild(tx, run.workspaceId, run.app, s.child.workflow, s.child.app);
    // SPEC: a child inherits its parent's pin only within the same app.
    const runner = s.child.runner ?? (app === run.app ? run.runner : '');
    let slots = invokedRunSlots(config, s.child.dataJson, Date.now());
    // A queued singleton invoking its own workflow on the key it holds would wait for itself forever: the child runs within its parent's hold.
    if (slots?.holdsSlots && app === run.app && s.child.workflow === run.workflow && (await holdsKey(tx, run.id, slots.concurrencyKey))) slots = undefined;
    addEffects(effects, await insertQueuedRun(tx, {
      id: s.child.runId,
      workspaceId: run.workspaceId,
      workflow: s.child.workflow,
      app,
      runner,
      triggerKind: 'event',
      eventId: null,
      eventName: null,
      replayOf: null,
      inputJson: s.child.dataJson,
      parentRunId: run.id,
      parentStepId: s.id,
      ...(slots && { slots }),
    }));
  }
  return effects;
}

/**
 * A run went terminal: its parent's step resolves with the result or the
 * error, its waiters go, its open children are cancelled (theirs too, each
 * with its frame and its run-end messages), and a failed run of a workflow
 * registered with onFailure spawns its follow-on run. Returns what that did
 * to the other runs.
 */
export async function finishRun(
  tx: Database,
  run: ParentRef & { inputJson: string; eventName: string },
  outcome: { status: 'succeeded' | 'failed' | 'cancelled'; resultJson?: string | null; error?: StepError | null },
  opts: { parentRunId: string | null; spawnOnFailure: string | null; /** Whether it may have open children or waiters. @default true */ hadOpen?: boolean },
): Promise<RunEffects> {
  const effects = noEffects();
  if (opts.parentRunId) {
    const parentStep = await tx.query<{ parent_step_id: string }>('select parent_step_id from scheduler.runs where id = $1', [run.id]);
    const stepId = parentStep[0]?.parent_step_id;
    if (stepId) {
      await resolveStep(tx, {
        runId: opts.parentRunId,
        stepId,
        ...(outcome.status === 'succeeded'
          ? { dataJson: outcome.resultJson ?? 'null' }
          : { error: outcome.error ?? { message: `Child run ${run.id} was ${outcome.status}.` } }),
      });
    }
  }
  if (opts.hadOpen !== false) {
    for (const child of await lockChildren(tx, run.id)) {
      addEffects(effects, await cancelLockedRun(tx, child, { message: 'Parent run ended.' }, { parentEnded: true }));
    }
    await tx.query('delete from scheduler.waiters where run_id = $1', [run.id]);
  }
  if (opts.spawnOnFailure) {
    addEffects(effects, await insertQueuedRun(tx, {
      id: opts.spawnOnFailure,
      workspaceId: run.workspaceId,
      workflow: run.workflow,
      app: run.app,
      runner: run.runner,
      triggerKind: 'event',
      eventId: null,
      eventName: run.eventName,
      replayOf: null,
      inputJson: run.inputJson,
      onFailureOf: run.id,
    }));
  }
  return effects;
}

/**
 * Cancel a run locked by the caller's transaction: the pass advances (a
 * reply in flight is dropped), its children and waiters go, its parent's
 * step fails (unless the parent is what ended). Returns its cancelled frame
 * and run-end messages, and its children's, for once the transaction commits.
 */
export async function cancelLockedRun(tx: Database, run: ControlRun, error: StepError, opts: { parentEnded?: boolean } = {}): Promise<RunEffects> {
  const frame = await setRunStatus(tx, run, 'cancelled', { ended: true, error });
  const ref = { id: run.id, workspaceId: run.workspace_id, app: run.app, runner: run.runner, workflow: run.workflow, tags: run.tags };
  const effects: RunEffects = { live: [[liveRunOf(run, 'cancelled'), [frame]]], messages: runEndMessages(ref, 'cancelled', null, error) };
  const parentRunId = opts.parentEnded ? null : run.parent_run_id;
  return addEffects(effects, await finishRun(tx, { ...ref, inputJson: run.input, eventName: run.event_name ?? run.workflow }, { status: 'cancelled', error }, { parentRunId, spawnOnFailure: null }));
}
