import { boolean, index, integer, jsonb, pgSchema, text, timestamp } from 'drizzle-orm/pg-core';
import { outboxTable, retentionTable } from '@dws/runtime';

export const dispatcher = pgSchema('webhook_dispatcher');

/** Outbound subscriptions; the signing secret is sealed and never read back. */
export const endpoints = dispatcher.table('endpoints', {
  id: text('id').primaryKey(),
  workspaceId: text('workspace_id').notNull(),
  name: text('name'),
  app: text('app'),
  url: text('url').notNull(),
  eventKinds: text('event_kinds').array().notNull(),
  secretSealed: text('secret_sealed').notNull(),
  /** Which seal key sealed the secret, so the key can rotate (the fingerprint of the key, not the key). */
  sealKeyId: text('seal_key_id').notNull().default(''),
  enabled: boolean('enabled').notNull().default(true),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
}, (t) => [index('endpoints_ws_created').on(t.workspaceId, t.createdAt)]);

/** One row per delivery; `next_attempt_at` is the due-time index the senders claim from. */
export const deliveries = dispatcher.table(
  'deliveries',
  {
    id: text('id').primaryKey(),
    workspaceId: text('workspace_id').notNull(),
    app: text('app').notNull(),
    endpointId: text('endpoint_id'),
    url: text('url').notNull(),
    eventKind: text('event_kind').notNull(),
    sourceRunId: text('source_run_id'),
    /** Exactly-once key of a custom send: (run, hashed step id). */
    dedupeKey: text('dedupe_key').unique(),
    payload: jsonb('payload').notNull(),
    status: text('status').notNull(),
    attemptCount: integer('attempt_count').notNull().default(0),
    maxAttempts: integer('max_attempts').notNull().default(5),
    lastStatusCode: integer('last_status_code'),
    nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true }),
    /** Token of the sender holding the delivery; a sender whose lease was taken over writes nothing. */
    claim: text('claim'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('deliveries_ws_created').on(t.workspaceId, t.createdAt.desc(), t.id.desc()), index('deliveries_due').on(t.nextAttemptAt), index('deliveries_endpoint_created').on(t.endpointId, t.createdAt)],
);

export const attempts = dispatcher.table(
  'attempts',
  {
  id: text('id').primaryKey(),
  deliveryId: text('delivery_id').notNull(),
  attempt: integer('attempt').notNull(),
  outcome: text('outcome').notNull(),
  statusCode: integer('status_code'),
  responseSnippet: text('response_snippet'),
  error: text('error'),
  durationMs: integer('duration_ms').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('attempts_delivery').on(t.deliveryId, t.attempt)],
);

export const outbox = outboxTable(dispatcher);

/** Each workspace's retention window (projection of `gateway.fact.workspace`): what store/retention.ts deletes past. */
export const retention = retentionTable(dispatcher);
