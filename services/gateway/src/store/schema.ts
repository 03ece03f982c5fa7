import { bigint, boolean, doublePrecision, index, integer, jsonb, pgSchema, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { outboxTable } from '@dws/runtime';

export const gateway = pgSchema('gateway');

export const workspaces = gateway.table('workspaces', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  /** Runner signing secret, sealed at rest. */
  signingKeySealed: text('signing_key_sealed').notNull(),
  suspended: boolean('suspended').notNull().default(false),
  /** Why it is suspended: 'operator' (admin PATCH) or 'usage_limit' (a metered ceiling); null when not suspended. */
  suspendedReason: text('suspended_reason'),
  limits: jsonb('limits').notNull().default({}),
  /** The workspace's own model providers (domain/providers.ts), sealed at rest: they hold API keys. */
  providersSealed: text('providers_sealed'),
  /** Days the services keep the workspace's history (docs/retention.md); null: the default (30). */
  retentionDays: integer('retention_days'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});

/** API keys, stored as SHA-256 hashes; `sealed` keeps generated dev keys printable at each start. */
export const apiKeys = gateway.table(
  'api_keys',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id').notNull(),
    kind: text('kind').notNull(),
    name: text('name').notNull(),
    keyHash: text('key_hash').notNull().unique(),
    sealed: text('sealed'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
  },
  (t) => [index('api_keys_ws').on(t.workspaceId)],
);

/**
 * Runs that ended, per workspace and UTC month (`YYYY-MM`), counted from
 * RunFinished facts: what `runsPerMonth` caps. `model_tokens` and
 * `model_cost`: the month's model usage the scheduler reported when it
 * refused a model call at a model ceiling (ModelCeilingReached; null until
 * then), what the model limits are settled against.
 */
export const usage = gateway.table(
  'usage',
  {
    workspaceId: text('workspace_id').notNull(),
    month: text('month').notNull(),
    runs: bigint('runs', { mode: 'number' }).notNull().default(0),
    modelTokens: doublePrecision('model_tokens'),
    modelCost: doublePrecision('model_cost'),
  },
  (t) => [primaryKey({ columns: [t.workspaceId, t.month] })],
);

/**
 * One row per run already counted: a RunFinished delivered again (redelivery,
 * several gateway replicas, an outbox republish past the bus's duplicate
 * window) inserts nothing and so counts nothing. Months before the previous
 * one are pruned; their counts no longer matter.
 */
export const meteredRuns = gateway.table(
  'metered_runs',
  {
    runId: text('run_id').primaryKey(),
    workspaceId: text('workspace_id').notNull(),
    month: text('month').notNull(),
  },
  (t) => [index('metered_runs_month').on(t.month)],
);

export const outbox = outboxTable(gateway);
