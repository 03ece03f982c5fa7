import type { Database } from '@dws/db';

/** A delayed event as stored until it is due (schema.ts scheduledEvents). */
export interface ScheduledRow {
  id: string;
  workspace_id: string;
  name: string;
  app: string | null;
  data: string;
  dedupe_id: string | null;
  runner: string | null;
  target_app: string | null;
  session: string | null;
  tags: string[] | null;
  source: 'api' | 'emit';
  actor: string;
  key_kind: string;
  via: string;
  scheduled_for: Date | string;
  created_at: Date | string;
}

export type NewScheduled = Omit<ScheduledRow, 'scheduled_for' | 'created_at'> & { scheduledForMs: number };

const COLUMNS = 'id, workspace_id, name, app, data, dedupe_id, runner, target_app, session, tags, source, actor, key_kind, via, scheduled_for, created_at';

/**
 * Store delayed events (one statement; the caller holds their dedupe ids'
 * locks). An id stored already, or taken in already (a redelivered emit),
 * stores nothing.
 * @returns the ids stored
 */
export async function insertScheduled(tx: Database, rows: NewScheduled[]): Promise<Set<string>> {
  if (rows.length === 0) return new Set();
  const stored = await tx.query<{ id: string }>(
    `insert into ingest.scheduled_events (id, workspace_id, name, app, data, dedupe_id, runner, target_app, session, tags, source, actor, key_kind, via, scheduled_for, due_at)
     select s.id, s.workspace_id, s.name, s.app, s.data, s.dedupe_id, s.runner, s.target_app, s.session, s.tags, s.source, s.actor, s.key_kind, s.via,
            to_timestamp(s.at / 1000.0), to_timestamp(s.at / 1000.0)
       from jsonb_to_recordset($1::jsonb) as s(id text, workspace_id text, name text, app text, data text, dedupe_id text, runner text,
                                               target_app text, session text, tags text[], source text, actor text, key_kind text, via text, at bigint)
      where not exists (select 1 from ingest.events e where e.id = s.id)
     on conflict (id) do nothing
     returning id`,
    [JSON.stringify(rows.map(({ scheduledForMs, ...r }) => ({ ...r, at: scheduledForMs })))],
  );
  return new Set(stored.map((r) => r.id));
}

/**
 * Claim up to `limit` due events: each row's `due_at` moves `leaseMs` ahead
 * (SKIP LOCKED, so replicas take different rows). The event's own ingest
 * transaction deletes its row; a claimer that dies leaves it due again once
 * the lease has passed.
 */
export function claimDueScheduled(db: Database, limit: number, leaseMs: number): Promise<ScheduledRow[]> {
  return db.query<ScheduledRow>(
    `update ingest.scheduled_events s set due_at = now() + $2::bigint * interval '1 millisecond'
       from (select id from ingest.scheduled_events where due_at <= now() order by due_at limit $1 for update skip locked) due
      where s.id = due.id
      returning ${COLUMNS.split(', ').map((c) => `s.${c}`).join(', ')}`,
    [limit, leaseMs],
  );
}

/** Inside the event's ingest transaction: it is taken in, so it is no longer scheduled. */
export async function deleteScheduled(tx: Database, id: string): Promise<void> {
  await tx.query('delete from ingest.scheduled_events where id = $1', [id]);
}

/**
 * Cancel a delayed event that has not been claimed yet (`due_at` still its
 * scheduled time). A claimed one is being taken in: it is not cancelled.
 * @returns the cancelled row, `taking_in` when it is claimed, or undefined when there is no such row
 */
export async function cancelScheduled(db: Database, workspaceId: string, id: string): Promise<ScheduledRow | 'taking_in' | undefined> {
  const rows = await db.query<ScheduledRow & { claimed: boolean }>(
    `with c as (
       delete from ingest.scheduled_events where workspace_id = $1 and id = $2 and due_at = scheduled_for returning ${COLUMNS}
     )
     select *, false as claimed from c
     union all
     select ${COLUMNS}, true as claimed from ingest.scheduled_events where workspace_id = $1 and id = $2 and not exists (select 1 from c)`,
    [workspaceId, id],
  );
  const row = rows[0];
  if (!row) return undefined;
  return row.claimed ? 'taking_in' : row;
}

export async function scheduledById(db: Database, workspaceId: string, id: string): Promise<ScheduledRow | undefined> {
  const rows = await db.query<ScheduledRow>(`select ${COLUMNS} from ingest.scheduled_events where workspace_id = $1 and id = $2`, [workspaceId, id]);
  return rows[0];
}

/** The workspace's delayed events, soonest first. */
export function listScheduled(db: Database, workspaceId: string, f: { app?: string; name?: string; limit: number }): Promise<ScheduledRow[]> {
  return db.query<ScheduledRow>(
    `select ${COLUMNS} from ingest.scheduled_events
      where workspace_id = $1 and ($2::text is null or app = $2) and ($3::text is null or name = $3)
      order by scheduled_for, id limit $4`,
    [workspaceId, f.app ?? null, f.name ?? null, f.limit],
  );
}
