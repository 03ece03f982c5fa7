import type { Database } from '@dws/db';
import { workspacesOf, type RetentionTarget } from '@dws/runtime';

/**
 * What ingest deletes past a workspace's retention window
 * (docs/retention.md): at most `limit` rows per statement, taken with FOR
 * UPDATE SKIP LOCKED so replicas split the work and no lock outlives the
 * statement.
 */

/**
 * Events received before the window, with their outcomes (the runs they
 * triggered and the waiters they woke live on the row). An event an open
 * debounce or batch still holds stays until the buffer fires: its outcome is
 * written to the row then; so does one a workflow paused with `hold` keeps.
 */
export const oldEvents: RetentionTarget = {
  name: 'events',
  workspaces: (db) => workspacesOf(db, 'ingest.events'),
  async prune(db: Database, workspaceId: string, days: number, limit: number) {
    const rows = await db.query(
      `with doomed as (
         select e.id from ingest.events e
          where e.workspace_id = $1 and e.received_at < now() - make_interval(days => $2::int)
            and not exists (select 1 from ingest.debounces b where b.event_id = e.id)
            and not exists (select 1 from ingest.batch_events b where b.event_id = e.id)
            and not exists (select 1 from ingest.held_events h where h.event_id = e.id)
          order by e.received_at
          limit $3
          for update of e skip locked
       )
       delete from ingest.events x using doomed d where x.id = d.id returning 1`,
      [workspaceId, days, limit],
    );
    return rows.length;
  },
};

/** What arrived at an inbound webhook receiver before the window (the delivery log; the events it became go by their own age). */
export const oldSourceDeliveries: RetentionTarget = {
  name: 'source_deliveries',
  workspaces: (db) => workspacesOf(db, 'ingest.source_deliveries'),
  async prune(db: Database, workspaceId: string, days: number, limit: number) {
    const rows = await db.query(
      `with doomed as (
         select s.id from ingest.source_deliveries s
          where s.workspace_id = $1 and s.created_at < now() - make_interval(days => $2::int)
          order by s.created_at
          limit $3
          for update of s skip locked
       )
       delete from ingest.source_deliveries x using doomed d where x.id = d.id returning 1`,
      [workspaceId, days, limit],
    );
    return rows.length;
  },
};

export const ingestRetention: RetentionTarget[] = [oldEvents, oldSourceDeliveries];
