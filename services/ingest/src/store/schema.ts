import { bigint, bigserial, boolean, index, integer, jsonb, pgSchema, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { outboxTable, retentionTable } from '@dws/runtime';

export const ingest = pgSchema('ingest');

/** The durable event log: every ingested event with its fan-out. */
export const events = ingest.table(
  'events',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id').notNull(),
    name: text('name').notNull(),
    app: text('app'),
    source: text('source').notNull(),
    /** Raw JSON text of the payload. */
    data: text('data').notNull(),
    dedupeId: text('dedupe_id'),
    runner: text('runner'),
    targetApp: text('target_app'),
    /** POST /events `tags`, given to the runs it starts; null for none. */
    tags: text('tags').array(),
    /** Posted with a delay: the time it was to be taken in (received_at is when it was). */
    scheduledFor: timestamp('scheduled_for', { withTimezone: true }),
    woke: integer('woke').notNull().default(0),
    triggered: jsonb('triggered').notNull(),
    receivedAt: timestamp('received_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index('events_ws_received').on(t.workspaceId, t.receivedAt.desc(), t.id.desc()),
    index('events_ws_dedupe').on(t.workspaceId, t.app, t.dedupeId, t.receivedAt),
    // GET /events?tag= (tags @> ...): only tagged events are in it.
    index('events_tags').using('gin', t.tags).where(sql`tags is not null`),
  ],
);

/**
 * Events posted with a `delay`: stored as they came until `scheduled_for`,
 * then taken in (woken waiters, started runs, flow control) as though
 * posted then, under their id; until then they can be cancelled. The
 * timers claim a due row by moving `due_at` a lease ahead, and the event's
 * own ingest transaction deletes it, so it is taken in once.
 */
export const scheduledEvents = ingest.table(
  'scheduled_events',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id').notNull(),
    name: text('name').notNull(),
    app: text('app'),
    /** Raw JSON text of the payload. */
    data: text('data').notNull(),
    dedupeId: text('dedupe_id'),
    runner: text('runner'),
    targetApp: text('target_app'),
    session: text('session'),
    tags: text('tags').array(),
    /** api (POST /events) or emit (step.emit with a delay, under the id the scheduler drew for the step). */
    source: text('source').notNull().default('api'),
    /** Who posted it: the caller it is taken in as (audit actor, key kind). */
    actor: text('actor').notNull(),
    keyKind: text('key_kind').notNull(),
    via: text('via').notNull(),
    scheduledFor: timestamp('scheduled_for', { withTimezone: true }).notNull(),
    /** scheduled_for until claimed; then the claim's lease, past which a crashed claim is taken over. */
    dueAt: timestamp('due_at', { withTimezone: true }).notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index('scheduled_events_due').on(t.dueAt),
    index('scheduled_events_ws').on(t.workspaceId, t.scheduledFor, t.id),
    index('scheduled_events_dedupe').on(t.workspaceId, t.app, t.dedupeId),
  ],
);

/**
 * Registered workflows (projection of `invoker.fact.workflows`): the object
 * as the runner sent it. Triggers, cron schedules and flow control are
 * parsed from it (@dws/cel parseWorkflowPolicy) when the index loads.
 */
export const workflows = ingest.table(
  'workflows',
  {
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    name: text('name').notNull(),
    config: jsonb('config').notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.app, t.name] })],
);

/** The registration version each app's workflows were last replaced at (WorkflowsRegistered.version). */
export const appVersions = ingest.table(
  'app_versions',
  {
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    version: bigint('version', { mode: 'number' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.app] })],
);

/**
 * Bumped in every transaction that changes what a workspace's cached index
 * holds (workflows, suspension): each replica compares its cached copy with
 * it per event, so a change is seen by the next event on every replica.
 */
export const indexVersions = ingest.table('index_versions', {
  workspaceId: text('workspace_id').primaryKey(),
  version: bigint('version', { mode: 'number' }).notNull(),
});

/** Suspension of workspaces (projection of `gateway.fact.workspace`), for cron and emits, which have no gateway caller. */
export const workspaces = ingest.table('workspaces', {
  id: text('id').primaryKey(),
  suspended: boolean('suspended').notNull().default(false),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});

/**
 * GCRA state of rateLimit and throttle, one row per (workflow, kind, key):
 * the theoretical arrival time, in epoch ms. Updated under the row lock of
 * an upsert, so concurrent events see each other.
 */
export const gates = ingest.table(
  'gates',
  {
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    workflow: text('workflow').notNull(),
    /** rate_limit | throttle */
    kind: text('kind').notNull(),
    key: text('key').notNull(),
    tatMs: bigint('tat_ms', { mode: 'number' }).notNull(),
    /** The clock of the last admission (epoch ms): the upsert reads it back as `excluded.now_ms`. */
    nowMs: bigint('now_ms', { mode: 'number' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.app, t.workflow, t.kind, t.key] }), index('gates_tat').on(t.tatMs)],
);

/** idempotency: the key of each started run, for 24 h. */
export const idempotencyKeys = ingest.table(
  'idempotency_keys',
  {
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    workflow: text('workflow').notNull(),
    key: text('key').notNull(),
    runId: text('run_id').notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.app, t.workflow, t.key] }), index('idempotency_expires').on(t.expiresAt)],
);

/** singleton skip: the last run ingest started per key; whether it is still active is the scheduler's answer. */
export const singletons = ingest.table(
  'singletons',
  {
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    workflow: text('workflow').notNull(),
    key: text('key').notNull(),
    runId: text('run_id').notNull(),
    claimedAt: timestamp('claimed_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.app, t.workflow, t.key] })],
);

/** debounce: one pending run per key, holding the last event; fired by the timers when due. */
export const debounces = ingest.table(
  'debounces',
  {
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    workflow: text('workflow').notNull(),
    key: text('key').notNull(),
    /** Drawn when the first event arrives, answered to every coalesced event. */
    runId: text('run_id').notNull(),
    eventId: text('event_id').notNull(),
    eventName: text('event_name').notNull(),
    /** Raw JSON text of the last event's data. */
    data: text('data').notNull(),
    runner: text('runner').notNull().default(''),
    /** The last event's session and tags, the run's. */
    session: text('session'),
    tags: text('tags').array(),
    dueAt: timestamp('due_at', { withTimezone: true }).notNull(),
    /** First event + timeout: the latest the run may wait. */
    deadlineAt: timestamp('deadline_at', { withTimezone: true }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.app, t.workflow, t.key] }), index('debounces_due').on(t.dueAt)],
);

/** batchEvents: one open batch per key; fired when full (in the event's transaction) or by the timers at its timeout. */
export const batches = ingest.table(
  'batches',
  {
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    workflow: text('workflow').notNull(),
    key: text('key').notNull(),
    runId: text('run_id').notNull().unique(),
    size: integer('size').notNull(),
    bytes: integer('bytes').notNull(),
    runner: text('runner').notNull().default(''),
    dueAt: timestamp('due_at', { withTimezone: true }).notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.app, t.workflow, t.key] }), index('batches_due').on(t.dueAt)],
);

/** The events of open batches, in arrival order. */
export const batchEvents = ingest.table(
  'batch_events',
  {
    runId: text('run_id').notNull(),
    seq: integer('seq').notNull(),
    eventId: text('event_id').notNull(),
    name: text('name').notNull(),
    /** Raw JSON text. */
    data: text('data').notNull(),
    tsMs: bigint('ts_ms', { mode: 'number' }).notNull(),
    /** The event's session (the run joins its first event's) and tags (the run takes all of its events'). */
    session: text('session'),
    tags: text('tags').array(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.seq] })],
);

/**
 * Events a workflow paused with `hold` matched (POST /workflows/pause with
 * hold: true): each is admitted, in arrival order and under the flow control
 * of that moment, once the workflow is resumed. The event itself is in
 * `events`; taking a row in deletes it, in the transaction that admits it.
 */
export const heldEvents = ingest.table(
  'held_events',
  {
    seq: bigserial('seq', { mode: 'number' }).primaryKey(),
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    workflow: text('workflow').notNull(),
    eventId: text('event_id').notNull(),
    /** The event's session (the event row does not keep it), which the run joins. */
    session: text('session'),
    heldAt: timestamp('held_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('held_events_match').on(t.workspaceId, t.app, t.workflow, t.eventId)],
);

/** Cron triggers (projection of registrations) with the next tick each is due at. */
export const cronSchedules = ingest.table(
  'cron_schedules',
  {
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    workflow: text('workflow').notNull(),
    /** As registered, with its zone: the schedule's identity. */
    cron: text('cron').notNull(),
    pattern: text('pattern').notNull(),
    tz: text('tz').notNull(),
    nextAt: timestamp('next_at', { withTimezone: true }).notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.app, t.workflow, t.cron] }), index('cron_schedules_next').on(t.nextAt)],
);

/**
 * Schedules made through the API (POST /v1/schedules), one per tenant say,
 * beside the cron triggers a registration declares: each starts a run of
 * its workflow at every tick, with its own `data`. A due row is claimed
 * (SKIP LOCKED) and advanced in the transaction that writes its StartRun,
 * so each tick fires once across replicas.
 */
export const schedules = ingest.table(
  'schedules',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    workflow: text('workflow').notNull(),
    /** As given, with its zone (`TZ=... ` or the `timezone` field). */
    cron: text('cron').notNull(),
    pattern: text('pattern').notNull(),
    tz: text('tz').notNull(),
    /** Raw JSON text handed to each run as `event.data.data`. */
    data: text('data').notNull(),
    /** The caller's own id for it (a tenant, a user): creating it again with this id replaces it. */
    externalId: text('external_id'),
    /** The tags of the runs it starts. */
    tags: text('tags').array(),
    /** Null while paused: a paused schedule has no next tick. */
    nextAt: timestamp('next_at', { withTimezone: true }),
    /** Paused (POST /schedules/{id}/pause): when, and by whom; a replacement by externalId keeps it paused. */
    pausedAt: timestamp('paused_at', { withTimezone: true }),
    pausedBy: text('paused_by'),
    lastAt: timestamp('last_at', { withTimezone: true }),
    createdBy: text('created_by').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index('schedules_next').on(t.nextAt),
    index('schedules_ws').on(t.workspaceId, t.createdAt.desc(), t.id),
    uniqueIndex('schedules_external').on(t.workspaceId, t.app, t.workflow, t.externalId),
  ],
);

/**
 * Fired cron ticks. The key (workflow, tick) is claimed in the transaction
 * that writes the StartRun to the outbox: a tick fires once across replicas
 * and restarts, even if two schedules of the workflow share the instant.
 */
export const cronTicks = ingest.table(
  'cron_ticks',
  {
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    workflow: text('workflow').notNull(),
    tickAt: timestamp('tick_at', { withTimezone: true }).notNull(),
    cron: text('cron').notNull(),
    /** '' when refused (suspended workspace). */
    runId: text('run_id').notNull(),
    firedAt: timestamp('fired_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.app, t.workflow, t.tickAt] }), index('cron_ticks_fired').on(t.firedAt)],
);

export const outbox = outboxTable(ingest);

/** Each workspace's retention window (projection of `gateway.fact.workspace`): what store/retention.ts deletes past. */
export const retention = retentionTable(ingest);

/**
 * Inbound webhook receivers (SPEC Webhook receiver config). The slug is the
 * global inbound routing key (POST /v1/webhooks/{slug} carries no API key),
 * so it is unique across workspaces. The signing secret is sealed
 * (@dws/protocol seal) and `secretKeyId` names the seal key it was sealed
 * under, so the seal key can rotate without guessing which key a row needs.
 */
export const receivers = ingest.table(
  'receivers',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id').notNull(),
    name: text('name'),
    app: text('app'),
    targetApp: text('target_app'),
    slug: text('slug').notNull(),
    eventName: text('event_name').notNull(),
    /** CEL that filters a post and makes its event's name, data and dedupeId (domain/receiver-transform.ts); null for none. */
    transform: jsonb('transform'),
    secretSealed: text('secret_sealed').notNull(),
    secretKeyId: text('secret_key_id').notNull(),
    enabled: boolean('enabled').notNull().default(true),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('receivers_slug').on(t.slug), index('receivers_ws_created').on(t.workspaceId, t.createdAt, t.id)],
);

/**
 * What arrived at POST /v1/webhooks/{slug} for a known slug, verified or
 * not: the outcome (verified, invalid_signature, stale_timestamp, disabled,
 * too_large, invalid_body), its reason, the body size, the headers of
 * interest (never the body, never a secret) and the event it became.
 */
export const sourceDeliveries = ingest.table(
  'source_deliveries',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id').notNull(),
    receiverId: text('receiver_id').notNull(),
    slug: text('slug').notNull(),
    outcome: text('outcome').notNull(),
    reason: text('reason'),
    sizeBytes: integer('size_bytes').notNull(),
    headers: jsonb('headers').notNull(),
    eventId: text('event_id'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('source_deliveries_ws_created').on(t.workspaceId, t.createdAt.desc(), t.id.desc())],
);
