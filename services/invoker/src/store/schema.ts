import { boolean, index, jsonb, pgSchema, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { outboxTable } from '@dws/runtime';

export const invoker = pgSchema('invoker');

/** Workspaces as the gateway announces them: the invoker needs each one's signing key (sealed). */
export const workspaces = invoker.table('workspaces', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  signingKeySealed: text('signing_key_sealed').notNull(),
  suspended: boolean('suspended').notNull().default(false),
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

export const outbox = outboxTable(invoker);
