import { sql } from 'drizzle-orm';
import { bigint, bigserial, boolean, doublePrecision, index, integer, jsonb, pgSchema, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { outboxTable, retentionTable } from '@dws/runtime';

export const scheduler = pgSchema('scheduler');

/**
 * One row per run. `pass` is the sequence of the invoke in flight: a reply is
 * applied only while it is still current, in the statement that advances it.
 * `lease_owner/lease_until` say which replica drives the run; an expired
 * lease (crash) or a delay (retry backoff) lets any replica take it.
 */
export const runs = scheduler.table(
  'runs',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id').notNull(),
    workflow: text('workflow').notNull(),
    app: text('app').notNull(),
    runner: text('runner').notNull().default(''),
    status: text('status').notNull(),
    triggerKind: text('trigger_kind').notNull(),
    eventId: text('event_id'),
    eventName: text('event_name'),
    replayOf: text('replay_of'),
    /** The session the triggering event named (POST /events `session`): GET /sessions groups runs by it. */
    session: text('session'),
    /** Its triggering event's tags (POST /events `tags`), or its source's (a replay, child or on-failure run); null for none. GET /runs filters by them. */
    tags: text('tags').array(),
    /** Raw JSON text: stored and resent without re-parsing. */
    input: text('input').notNull(),
    result: text('result'),
    error: jsonb('error'),
    attempt: integer('attempt').notNull().default(1),
    pass: bigint('pass', { mode: 'number' }).notNull().default(0),
    stepCount: integer('step_count').notNull().default(0),
    nextSeq: integer('next_seq').notNull().default(1),
    transportFailures: integer('transport_failures').notNull().default(0),
    noRunnerSince: timestamp('no_runner_since', { withTimezone: true }),
    /** Set when a step of a held run was resolved from outside (event, child): park due at once. */
    wakePending: boolean('wake_pending').notNull().default(false),
    /** POST /pause on a held run: takes effect at the next step boundary. */
    pauseRequested: boolean('pause_requested').notNull().default(false),
    /** A child run (step.runWorkflow): the parent and the step that waits for it. */
    parentRunId: text('parent_run_id'),
    parentStepId: text('parent_step_id'),
    /** The failed run an onFailure run handles; its error rides ctx.error. */
    onFailureOf: text('on_failure_of'),
    /** Flow control from ingest: a run of a limited key waits queued until admitted to a slot. */
    concurrencyKey: text('concurrency_key'),
    concurrencyLimit: integer('concurrency_limit').notNull().default(0),
    /** A second constraint (0: none): admitted only with a free slot of each key, and holding both. */
    concurrencyKey2: text('concurrency_key_2'),
    concurrencyLimit2: integer('concurrency_limit_2').notNull().default(0),
    /** The second key's slots are shared by the workspace's workflows (scope env): its holders are counted across them. */
    concurrencyShared2: boolean('concurrency_shared_2').notNull().default(false),
    /** Holds its keys' slots: false while queued for one, and from a park (sleep, wait, backoff, pause) until admitted again. */
    admitted: boolean('admitted').notNull().default(true),
    /** Keeps its slots through parks and pauses until it ends (singleton mode queue: one active run per key). */
    holdsSlots: boolean('holds_slots').notNull().default(false),
    priority: bigint('priority', { mode: 'number' }).notNull().default(0),
    singletonKey: text('singleton_key'),
    /** The workflow's `timeouts` (null: none): cancelled when still queued and never started `start` after creation, or not ended `finish` after it. */
    timeoutStartMs: bigint('timeout_start_ms', { mode: 'number' }),
    timeoutFinishMs: bigint('timeout_finish_ms', { mode: 'number' }),
    leaseOwner: text('lease_owner'),
    leaseUntil: timestamp('lease_until', { withTimezone: true }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    startedAt: timestamp('started_at', { withTimezone: true }),
    endedAt: timestamp('ended_at', { withTimezone: true }),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index('runs_ws_created').on(t.workspaceId, t.createdAt.desc(), t.id.desc()),
    index('runs_ws_session').on(t.workspaceId, t.session, t.createdAt).where(sql`session is not null`),
    // GET /runs?tag= (tags @> ...): only tagged runs are in it.
    index('runs_tags').using('gin', t.tags).where(sql`tags is not null`),
    // GET /runs sorts (the read side orders to match: DESC NULLS LAST shapes).
    index('runs_ws_app_created').on(t.workspaceId, t.app.desc(), t.createdAt.desc(), t.id.desc()),
    index('runs_ws_status_created').on(t.workspaceId, t.status.desc(), t.createdAt.desc(), t.id.desc()),
    index('runs_ws_workflow_created').on(t.workspaceId, t.workflow.desc(), t.createdAt.desc(), t.id.desc()),
    // Must stay identical to DURATION_SQL in reads.ts.
    index('runs_ws_duration').on(
      t.workspaceId,
      sql`(coalesce((extract(epoch from (ended_at - started_at)) * 1000)::bigint, -1)) desc nulls last`,
      t.createdAt.desc(),
      t.id.desc(),
    ),
    index('runs_ws_event').on(t.workspaceId, t.eventId),
    index('runs_ws_replay_of').on(t.workspaceId, t.replayOf),
    index('runs_parent').on(t.parentRunId),
    // Admission's walk of the keys with queued runs (one probe a key, not a scan of every queued run), each key's oldest.
    // Admission (flow.ts) reads these, never scans the queued runs: the keys with queued runs (a skip scan),
    // each key's runs in admission order, and with a second constraint each second key's first in line.
    index('runs_awaiting_slot')
      .on(t.workspaceId, t.app, t.workflow, t.concurrencyKey, t.priority.desc(), t.createdAt, t.id)
      .where(sql`status = 'queued' and not admitted`),
    index('runs_awaiting_slot_0')
      .on(t.workspaceId, t.app, t.workflow, t.concurrencyKey, t.priority.desc(), t.createdAt, t.id)
      .where(sql`status = 'queued' and not admitted and concurrency_limit_2 = 0`),
    index('runs_awaiting_slot_2')
      .on(t.workspaceId, t.app, t.workflow, t.concurrencyKey, t.concurrencyShared2, t.concurrencyKey2, t.priority.desc(), t.createdAt, t.id)
      .where(sql`status = 'queued' and not admitted and concurrency_limit_2 > 0`),
    // Runs of a limited key that parked (a sleep, a wait, a backoff) gave their slot back: due, they wait for one again.
    index('runs_released_slot').on(t.leaseUntil).where(sql`status = 'waiting' and not admitted`),
    index('runs_slot_holders').on(t.workspaceId, t.app, t.workflow, t.concurrencyKey).where(sql`concurrency_limit > 0 and admitted and status in ('queued', 'running', 'waiting', 'paused')`),
    index('runs_slot_holders_2').on(t.workspaceId, t.app, t.workflow, t.concurrencyKey2).where(sql`concurrency_limit_2 > 0 and admitted and status in ('queued', 'running', 'waiting', 'paused')`),
    index('runs_shared_slot_holders').on(t.workspaceId, t.concurrencyKey2).where(sql`concurrency_shared_2 and concurrency_limit_2 > 0 and admitted and status in ('queued', 'running', 'waiting', 'paused')`),
    index('runs_singleton').on(t.workspaceId, t.app, t.workflow, t.singletonKey).where(sql`singleton_key is not null`),
    // The one timer index: a run is claimable once lease_until passes, whether that is an
    // expired lease (crashed replica), a retry backoff, a no-runner wait or a sleep.
    // A run that gave its concurrency slot back is not claimable until admitted again (flow.ts).
    index('runs_due').on(t.leaseUntil).where(sql`status in ('queued', 'running', 'waiting') and admitted`),
    // Retention (store/retention.ts): a workspace's ended runs, oldest first; the skip scan of workspaces rides it too.
    index('runs_ws_ended').on(t.workspaceId, t.endedAt).where(sql`status in ('succeeded', 'failed', 'cancelled')`),
    // Run timeouts (engine/run-timeouts.ts): only the active runs that have one.
    index('runs_timeouts')
      .on(t.createdAt)
      .where(sql`(timeout_start_ms is not null or timeout_finish_ms is not null) and status in ('queued', 'running', 'waiting', 'paused')`),
    // Retention keeps a failed run while its onFailure run is not over (held-run.ts reads its error).
    index('runs_on_failure_of').on(t.onFailureOf).where(sql`on_failure_of is not null`),
  ],
);

/** One row per step of a run, keyed by the hashed step id; `data` is raw JSON text. */
export const steps = scheduler.table(
  'steps',
  {
    runId: text('run_id').notNull(),
    stepId: text('step_id').notNull(),
    workspaceId: text('workspace_id').notNull(),
    name: text('name').notNull(),
    op: text('op').notNull(),
    idx: integer('idx').notNull(),
    status: text('status').notNull(),
    data: text('data'),
    error: jsonb('error'),
    input: text('input'),
    attempts: integer('attempts').notNull().default(1),
    /** Sleep wake time, or a wait's timeout deadline. */
    wakeAt: timestamp('wake_at', { withTimezone: true }),
    /** The child run of a RunWorkflow step. */
    childRunId: text('child_run_id'),
    /** SPEC Usage of a model call (an Infer step the invoker completed). */
    usage: jsonb('usage'),
    /**
     * An Approval step: when the approvals service listed it as an open
     * approval (gated). From then until the step resolves, its run is in
     * SPEC's needs_attention state; an ungated one is never listed.
     */
    listedAt: timestamp('listed_at', { withTimezone: true }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    endedAt: timestamp('ended_at', { withTimezone: true }),
  },
  (t) => [
    primaryKey({ columns: [t.runId, t.stepId] }),
    // AI spend over a rolling window (domain/ai-spend.ts): metered steps only, by end time.
    index('steps_ws_metered_ended').on(t.workspaceId, t.endedAt).where(sql`usage is not null`),
  ],
);

/**
 * Scores a run's Score steps wrote (SPEC Score opcode): one row per (run,
 * step), inserted by the statement that memoizes the step, so a replay
 * never writes one twice.
 */
export const scores = scheduler.table(
  'scores',
  {
    runId: text('run_id').notNull(),
    stepId: text('step_id').notNull(),
    workspaceId: text('workspace_id').notNull(),
    /** The step's name (its human-readable id). */
    step: text('step').notNull(),
    name: text('name').notNull(),
    value: jsonb('value').notNull(),
    /** The Score opcode's whole data: name, value and whatever else the runner attached. */
    data: jsonb('data').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.stepId] })],
);

/** The run timeline: frames with a gap-free per-run seq (run_status, step_status, log). */
export const frames = scheduler.table(
  'frames',
  {
    runId: text('run_id').notNull(),
    seq: integer('seq').notNull(),
    workspaceId: text('workspace_id').notNull(),
    kind: text('kind').notNull(),
    payload: jsonb('payload').notNull(),
    /** Runner log lines: `<attempt>:<scope>:<index>`, persisted once even under replay. */
    logKey: text('log_key'),
    ts: timestamp('ts', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.seq] }), uniqueIndex('frames_log_key').on(t.runId, t.logKey).where(sql`log_key is not null`)],
);

/** waitForEvent steps waiting for an event: matched by name (then eventIf) when ingest reports one. */
export const waiters = scheduler.table(
  'waiters',
  {
    workspaceId: text('workspace_id').notNull(),
    eventName: text('event_name').notNull(),
    runId: text('run_id').notNull(),
    stepId: text('step_id').notNull(),
    ifExpr: text('if_expr'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.stepId] }), index('waiters_event').on(t.workspaceId, t.eventName)],
);

/** The control audit (SPEC Control audit entry). */
export const controlActions = scheduler.table(
  'control_actions',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    workspaceId: text('workspace_id').notNull(),
    action: text('action').notNull(),
    runId: text('run_id'),
    newRunId: text('new_run_id'),
    actor: text('actor'),
    detail: jsonb('detail'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('control_ws_created').on(t.workspaceId, t.id), index('control_ws_created_at').on(t.workspaceId, t.createdAt)],
);

/** Workflow definitions as the invoker announced them (retry policy and, later, flow control). */
export const workflows = scheduler.table(
  'workflows',
  {
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    name: text('name').notNull(),
    config: jsonb('config').notNull(),
    /** The config's `timeouts` in ms (null: none), for the runs the scheduler starts itself (children, replays, onFailure runs). */
    timeoutStartMs: bigint('timeout_start_ms', { mode: 'number' }),
    timeoutFinishMs: bigint('timeout_finish_ms', { mode: 'number' }),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.app, t.name] })],
);

/** The registration version each app's workflows were last replaced at (WorkflowsRegistered.version). */
export const appVersions = scheduler.table(
  'app_versions',
  {
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    version: bigint('version', { mode: 'number' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.app] })],
);

export const outbox = outboxTable(scheduler);

/** Each workspace's retention window (projection of `gateway.fact.workspace`): what store/retention.ts deletes past. */
export const retention = retentionTable(scheduler);

/**
 * Each workspace's monthly model ceilings (projection of `gateway.fact.workspace`;
 * admin API limits modelTokensPerMonth, modelCostPerMonth). A row only while one is set.
 */
export const modelCeilings = scheduler.table('model_ceilings', {
  workspaceId: text('workspace_id').primaryKey(),
  tokensPerMonth: doublePrecision('tokens_per_month'),
  costPerMonth: doublePrecision('cost_per_month'),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});

/**
 * The Idempotency-Key of a replay or retry-from-step, for 24 h: a repeat of
 * the call (a client retrying after a lost answer) is answered with the run
 * the first made. `fingerprint` holds what the call asked (action, source
 * run, body), so the key sent with another call is refused, not obeyed.
 */
export const forkKeys = scheduler.table(
  'fork_keys',
  {
    workspaceId: text('workspace_id').notNull(),
    key: text('key').notNull(),
    fingerprint: text('fingerprint').notNull(),
    newRunId: text('new_run_id').notNull(),
    /** When the call that made it began: a bulk replay sent again replays only runs created before. */
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.key] }), index('fork_keys_expires').on(t.expiresAt)],
);

/**
 * An event that matched a workflow's cancelOn, kept for an hour: a run of
 * the workflow whose StartRun reaches the scheduler after the cancel was
 * applied (the two ride different consumers) is checked against it when it
 * is stored, and cancelled if it started before the event and `if` holds.
 */
export const cancelSignals = scheduler.table(
  'cancel_signals',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    workflow: text('workflow').notNull(),
    eventId: text('event_id').notNull(),
    eventName: text('event_name').notNull(),
    /** The cancelling event's data, as JSON text (CEL reads it as `async.data`). */
    eventData: text('event_data').notNull(),
    eventTs: timestamp('event_ts', { withTimezone: true }).notNull(),
    ifExpr: text('if_expr').notNull().default(''),
    /** Only runs created within this long before the event; 0: any age. */
    withinMs: bigint('within_ms', { mode: 'number' }).notNull().default(0),
    actor: text('actor'),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  },
  (t) => [index('cancel_signals_workflow').on(t.workspaceId, t.app, t.workflow, t.eventTs)],
);
