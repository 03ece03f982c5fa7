import type { Database } from '@dws/db';
import { workspacesOf, type RetentionTarget } from '@dws/runtime';

/** Statuses an approval never leaves (domain/decision.ts STATUSES): its ResolveStep went out in the transaction that closed it. */
const CLOSED = `('approved', 'denied', 'cancelled')`;

/**
 * Closed approvals (decided, or cancelled with their run) requested, and if
 * decided decided, before the workspace's retention window
 * (docs/retention.md): the run they parked already holds the outcome in its
 * step. At most `limit` per statement with FOR UPDATE SKIP LOCKED, so
 * replicas split the work. A pending or escalated approval is never deleted,
 * however old.
 */
export const closedApprovals: RetentionTarget = {
  name: 'approvals',
  workspaces: (db) => workspacesOf(db, 'approvals.approvals'),
  async prune(db: Database, workspaceId: string, days: number, limit: number) {
    const rows = await db.query(
      `with doomed as (
         select a.id from approvals.approvals a
          where a.workspace_id = $1 and a.status in ${CLOSED}
            and a.requested_at < now() - make_interval(days => $2::int)
            and coalesce(a.decided_at, a.requested_at) < now() - make_interval(days => $2::int)
          order by a.requested_at
          limit $3
          for update of a skip locked
       )
       delete from approvals.approvals x using doomed d where x.id = d.id returning 1`,
      [workspaceId, days, limit],
    );
    return rows.length;
  },
};

export const approvalsRetention: RetentionTarget[] = [closedApprovals];
