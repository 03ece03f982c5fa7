import type { Database } from '@dws/db';
import { workspacesOf, type RetentionTarget } from '@dws/runtime';

/** Statuses a delivery rests in until someone redelivers it (domain/delivery.ts STATUSES): nothing sends it any more. */
const FINISHED = `('succeeded', 'exhausted', 'dead')`;

/**
 * Finished deliveries created and last changed before the workspace's
 * retention window (docs/retention.md), with their attempt log, at most
 * `limit` per statement with FOR UPDATE SKIP LOCKED: replicas split the
 * work, and a delivery a redeliver holds is passed over. One still to send
 * (pending, delivering, failed with a retry due) is never deleted.
 */
export const finishedDeliveries: RetentionTarget = {
  name: 'deliveries',
  workspaces: (db) => workspacesOf(db, 'webhook_dispatcher.deliveries'),
  async prune(db: Database, workspaceId: string, days: number, limit: number) {
    const rows = await db.query(
      `with doomed as (
         select d.id from webhook_dispatcher.deliveries d
          where d.workspace_id = $1 and d.status in ${FINISHED}
            and d.created_at < now() - make_interval(days => $2::int)
            and d.updated_at < now() - make_interval(days => $2::int)
          order by d.created_at
          limit $3
          for update of d skip locked
       ),
       gone_attempts as (delete from webhook_dispatcher.attempts a using doomed x where a.delivery_id = x.id)
       delete from webhook_dispatcher.deliveries d using doomed x where d.id = x.id returning 1`,
      [workspaceId, days, limit],
    );
    return rows.length;
  },
};

export const dispatcherRetention: RetentionTarget[] = [finishedDeliveries];
