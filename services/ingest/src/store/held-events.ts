import type { Database } from '@dws/db';
import type { EventRow } from './events.js';

/** A held match (schema.ts heldEvents) with its event, as the timers admit it. */
export interface HeldRow {
  seq: number;
  workspace_id: string;
  app: string;
  workflow: string;
  event_id: string;
  name: string;
  data: string;
  runner: string | null;
  tags: string[] | null;
  session: string | null;
  received_ms: string | number;
}

/** Keep an event's match of a workflow paused with `hold`, once (a redelivered emit keeps nothing more). */
export async function holdEvent(tx: Database, h: { workspaceId: string; app: string; workflow: string; eventId: string; session?: string }): Promise<void> {
  await tx.query('insert into ingest.held_events (workspace_id, app, workflow, event_id, session) values ($1, $2, $3, $4, $5) on conflict do nothing', [
    h.workspaceId, h.app, h.workflow, h.eventId, h.session ?? null,
  ]);
}

/**
 * Held rows whose workflow is registered and not paused, of a workspace not
 * suspended: what the timers admit. The same condition, `exists`, is what
 * dueKinds asks. (Retention keeps a held event's row: see oldEvents.)
 */
const RELEASABLE = `ingest.held_events h
  join ingest.events e on e.id = h.event_id
  join ingest.workflows w on w.workspace_id = h.workspace_id and w.app = h.app and w.name = h.workflow and not (w.config ? 'paused')
 where not exists (select 1 from ingest.workspaces s where s.id = h.workspace_id and s.suspended)`;

export const RELEASABLE_EXISTS = `exists (select 1 from ${RELEASABLE})`;

/** The oldest releasable rows, read without a lock (the singleton checks are asked of the scheduler before the transaction). */
export function releasableHeld(db: Database, limit: number): Promise<HeldRow[]> {
  return db.query<HeldRow>(
    `select h.seq, h.workspace_id, h.app, h.workflow, h.event_id, h.session, e.name, e.data, e.runner, e.tags,
            (extract(epoch from e.received_at) * 1000)::bigint as received_ms
       from ${RELEASABLE}
      order by h.seq limit $1`,
    [limit],
  );
}

/**
 * Inside the admitting transaction: lock and delete the rows of `seqs` no
 * other replica holds (SKIP LOCKED), so each is admitted once.
 * @returns the seqs taken
 */
export async function takeHeld(tx: Database, seqs: number[]): Promise<Set<number>> {
  const rows = await tx.query<{ seq: string | number }>(
    `delete from ingest.held_events where seq in (select seq from ingest.held_events where seq = any($1::bigint[]) for update skip locked) returning seq`,
    [seqs],
  );
  return new Set(rows.map((r) => Number(r.seq)));
}

/** Append what admitting a held match did to its event's record (its `triggered`). */
export async function appendTriggered(tx: Database, entries: { id: string; triggered: unknown[] }[]): Promise<void> {
  if (entries.length === 0) return;
  await tx.query(
    `update ingest.events e set triggered = e.triggered || t.triggered
       from jsonb_to_recordset($1::jsonb) as t(id text, triggered jsonb) where e.id = t.id`,
    [JSON.stringify(entries)],
  );
}

/** A held match with its event's record, as GET /events/held lists it. */
export interface HeldListRow extends EventRow {
  workflow: string;
  workflow_app: string;
  held_at: Date | string;
}

/** The matches workflows paused with `hold` keep (of one app or workflow), oldest first: what their resume will admit. */
export function listHeld(db: Database, workspaceId: string, f: { app?: string; workflow?: string; limit: number }): Promise<HeldListRow[]> {
  return db.query<HeldListRow>(
    `select e.id, e.name, e.app, e.source, e.data, e.tags, e.scheduled_for, e.woke, e.triggered, e.received_at,
            h.workflow, h.app as workflow_app, h.held_at
       from ingest.held_events h join ingest.events e on e.id = h.event_id
      where h.workspace_id = $1 and ($2::text is null or h.app = $2) and ($3::text is null or h.workflow = $3)
      order by h.seq limit $4`,
    [workspaceId, f.app ?? null, f.workflow ?? null, f.limit],
  );
}
