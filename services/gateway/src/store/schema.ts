import { boolean, index, jsonb, pgSchema, text, timestamp } from 'drizzle-orm/pg-core';
import { outboxTable } from '@dws/runtime';

export const gateway = pgSchema('gateway');

export const workspaces = gateway.table('workspaces', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  /** Runner signing secret, sealed at rest. */
  signingKeySealed: text('signing_key_sealed').notNull(),
  suspended: boolean('suspended').notNull().default(false),
  limits: jsonb('limits').notNull().default({}),
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

export const outbox = outboxTable(gateway);
