import { integer, text, timestamp, type PgSchema } from 'drizzle-orm/pg-core';
import type { Bus, Subscription } from '@dws/bus';
import type { Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { fromBinary, WorkspaceUpsertedSchema, type WorkspaceUpserted } from '@dws/proto';
import { PollLoop } from './poll-loop.js';
import { streams, subjects } from './topology.js';

/** How many days a workspace keeps its history when the admin API set no window (WorkspaceUpserted.retention_days 0). */
export const DEFAULT_RETENTION_DAYS = 30;
/** The windows the admin API accepts (`retentionDays`), in days. */
export const RETENTION_DAYS_RANGE = { min: 1, max: 3650 } as const;

/**
 * The projection of each workspace's retention window, declared in the
 * schema of every service that keeps history (include it in its schema.ts,
 * like the outbox). `days` 0 means the default.
 */
export function retentionTable(schema: PgSchema) {
  return schema.table('retention', {
    workspaceId: text('workspace_id').primaryKey(),
    days: integer('days').notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  });
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]*$/;

/**
 * Keep `<schema>.retention` in step with the gateway's WorkspaceUpserted
 * facts, on a durable of the service's own. The fact is whole, so the last
 * one wins; a fact from an older gateway carries 0 (the default). `also`:
 * the service's other projection of the same fact, on the same consumer
 * (an idle pull consumer is not free: each wakes nats-server).
 */
export function followRetention(d: {
  bus: Bus;
  db: Database;
  /** The service's Postgres schema, which holds the `retention` table. */
  schema: string;
  /** The service's own durable name on GATEWAY_FACTS (e.g. `scheduler-retention`). */
  durable: string;
  also?: (fact: WorkspaceUpserted) => Promise<void>;
}): Promise<Subscription> {
  if (!SCHEMA_NAME.test(d.schema)) throw new Error(`followRetention: invalid schema ${JSON.stringify(d.schema)}`);
  return d.bus.consume({ stream: streams.gatewayFacts.name, durable: d.durable, filterSubject: subjects.workspaceUpserted }, async (msg) => {
    const fact = fromBinary(WorkspaceUpsertedSchema, msg.data);
    await d.db.query(
      `insert into "${d.schema}".retention (workspace_id, days) values ($1, $2)
       on conflict (workspace_id) do update set days = excluded.days, updated_at = now()`,
      [fact.workspaceId, fact.retentionDays],
    );
    await d.also?.(fact);
  });
}

/** One kind of history a service keeps and prunes per workspace. */
export interface RetentionTarget {
  /** Names the kind in logs and in a pass's counts (`runs`, `control_actions`). */
  name: string;
  /** The workspaces that hold rows of this kind (cheap: {@link workspacesOf} over an index led by workspace_id). */
  workspaces(db: Database): Promise<string[]>;
  /**
   * Delete at most `limit` parent rows of the workspace older than `days`
   * (with their children), in one short statement that skips rows another
   * transaction holds; returns how many parents went.
   */
  prune(db: Database, workspaceId: string, days: number, limit: number): Promise<number>;
}

export interface RetentionOptions {
  /** Time between passes (one also runs at start). @default 300000 (5 min) */
  pollMs?: number;
  /** Parent rows per delete statement. @default 500 */
  batch?: number;
}

/**
 * Deletes a service's history past each workspace's window: every pass walks
 * the targets, and for each workspace with rows deletes `batch` parents per
 * statement until fewer than a batch are left. Every replica runs it; the
 * statements lock the rows they take with SKIP LOCKED, so replicas divide the
 * work and nothing waits on a long lock.
 */
export class Retention {
  private readonly loop: PollLoop;
  private readonly batch: number;

  constructor(
    private readonly d: { db: Database; log: Logger; schema: string; targets: RetentionTarget[] },
    opts: RetentionOptions = {},
  ) {
    if (!SCHEMA_NAME.test(d.schema)) throw new Error(`Retention: invalid schema ${JSON.stringify(d.schema)}`);
    this.batch = opts.batch ?? 500;
    this.loop = new PollLoop(() => this.sweep(), {
      pollMs: opts.pollMs ?? 5 * 60_000,
      onError: (err) => d.log.warn({ err }, 'retention pass failed; the next one retries'),
    });
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Each workspace's window in days, from the projection; absent means the default. */
  async windows(): Promise<Map<string, number>> {
    const rows = await this.d.db.query<{ workspace_id: string; days: number }>(`select workspace_id, days from "${this.d.schema}".retention where days > 0`);
    return new Map(rows.map((r) => [r.workspace_id, Number(r.days)]));
  }

  /** One pass over every target and workspace; returns the parent rows deleted, per target. */
  async sweep(): Promise<Record<string, number>> {
    const windows = await this.windows();
    const deleted: Record<string, number> = {};
    for (const t of this.d.targets) {
      let total = 0;
      for (const workspaceId of await t.workspaces(this.d.db)) {
        const days = windows.get(workspaceId) ?? DEFAULT_RETENTION_DAYS;
        for (;;) {
          const n = await t.prune(this.d.db, workspaceId, days, this.batch);
          total += n;
          if (n < this.batch || this.loop.stopping) break;
        }
        if (this.loop.stopping) break;
      }
      deleted[t.name] = total;
      if (total > 0) this.d.log.info({ target: t.name, deleted: total }, 'retention pass deleted old rows');
    }
    return deleted;
  }
}

/**
 * The distinct workspace ids of `table` among rows matching `where`, by a
 * skip scan: one index probe per workspace on an index led by workspace_id
 * (partial indexes need `where` to imply their predicate), never a scan of
 * the rows. `table` and `where` are the caller's constants, never input.
 */
export async function workspacesOf(db: Database, table: string, where = 'true'): Promise<string[]> {
  const rows = await db.query<{ workspace_id: string }>(
    `with recursive w(workspace_id) as (
       (select workspace_id from ${table} where ${where} order by workspace_id limit 1)
       union all
       select (select t.workspace_id from ${table} t where ${where} and t.workspace_id > w.workspace_id order by t.workspace_id limit 1)
         from w where w.workspace_id is not null
     )
     select workspace_id from w where workspace_id is not null`,
  );
  return rows.map((r) => r.workspace_id);
}
