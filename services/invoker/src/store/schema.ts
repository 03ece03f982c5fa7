import { bigint, boolean, index, jsonb, pgSchema, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { outboxTable, retentionTable } from '@dws/runtime';

export const invoker = pgSchema('invoker');

/** Workspaces as the gateway announces them: the invoker needs each one's signing key (sealed). */
export const workspaces = invoker.table('workspaces', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  signingKeySealed: text('signing_key_sealed').notNull(),
  suspended: boolean('suspended').notNull().default(false),
  /** The workspace's own model providers (WorkspaceUpserted.providers), sealed at rest; null when none. */
  providersSealed: text('providers_sealed'),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});

/** Registered runners, keyed by runner id or, when absent, by url. */
export const runners = invoker.table(
  'runners',
  {
    workspaceId: text('workspace_id').notNull(),
    id: text('id').notNull(),
    app: text('app').notNull(),
    url: text('url').notNull(),
    transport: text('transport').notNull().default('serve'),
    runtime: text('runtime'),
    language: text('language'),
    version: text('version'),
    keyFingerprint: text('key_fingerprint'),
    workflows: text('workflows').array().notNull(),
    /** Connect runners: the invoker replica holding the socket; null once it closed (out of routing). */
    replica: text('replica'),
    /** Connect runners: the socket that registered last; only its close detaches the runner. */
    connectionId: text('connection_id'),
    registeredAt: timestamp('registered_at', { withTimezone: true }).notNull().defaultNow(),
    lastSeen: timestamp('last_seen', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.id] }), index('runners_app').on(t.workspaceId, t.app)],
);

/** Workflow definitions as last registered, per app. */
export const workflows = invoker.table(
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

/**
 * Workflows an operator paused (POST /v1/workflows/pause): their events and
 * cron ticks start no run until resumed. Kept apart from the registered
 * config, which every registration rewrites, and merged into the config the
 * WorkflowsRegistered fact carries (`paused`), so ingest's projection sees it.
 */
export const workflowPauses = invoker.table(
  'workflow_pauses',
  {
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    workflow: text('workflow').notNull(),
    pausedBy: text('paused_by').notNull(),
    pausedAt: timestamp('paused_at', { withTimezone: true }).notNull().defaultNow(),
    /** Its events are held (ingest keeps each match and starts it once resumed) rather than skipped. */
    hold: boolean('hold').notNull().default(false),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.app, t.workflow] })],
);

/**
 * Per app: the version of its declared workflow set, bumped in the
 * registering transaction when the set changes (the row lock orders
 * concurrent registrations of one app, so versions follow commit order).
 */
export const appRegistrations = invoker.table(
  'app_registrations',
  {
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    version: bigint('version', { mode: 'number' }).notNull(),
    /** SHA-256 of the declared set; an unchanged set keeps its version. */
    digest: text('digest').notNull(),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.app] })],
);

export const outbox = outboxTable(invoker);

/** Each workspace's retention window (projection of `gateway.fact.workspace`): what store/retention.ts deletes past. */
export const retention = retentionTable(invoker);

/**
 * One row per Infer step the invoker answered: the model is called once per
 * step, and a redelivered hand-off resends the stored answer instead.
 */
export const inferences = invoker.table(
  'inferences',
  {
    runId: text('run_id').notNull(),
    stepId: text('step_id').notNull(),
    workspaceId: text('workspace_id').notNull(),
    /** `{ data, usage }` or `{ error }`, as sent in the ResolveStep. */
    outcome: jsonb('outcome').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  // Retention (store/retention.ts): a workspace's oldest answers first; the skip scan of workspaces rides it too.
  (t) => [primaryKey({ columns: [t.runId, t.stepId] }), index('inferences_ws_created').on(t.workspaceId, t.createdAt)],
);

/**
 * The inference cache, per workspace: a provider's answer to a request
 * eligible for it (temperature set, at most 0.2), keyed by the request's
 * canonical hash, until it expires (24 h, or the request's ttlMs).
 */
export const inferenceCache = invoker.table(
  'inference_cache',
  {
    workspaceId: text('workspace_id').notNull(),
    key: text('key').notNull(),
    /** `{ data, usage }` as the call that filled it answered. */
    outcome: jsonb('outcome').notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.key] })],
);
