import type { Database } from '@dws/db';
import { workspacesOf, type RetentionTarget } from '@dws/runtime';

/**
 * Stored answers of Infer steps (`inferences`) written before the
 * workspace's retention window (docs/retention.md). A row only serves a
 * hand-off delivered again while its ResolveStep is on its way (seconds);
 * the step's result itself lives in the scheduler's steps. At most `limit`
 * per statement with FOR UPDATE SKIP LOCKED, so replicas split the work.
 */
export const oldInferences: RetentionTarget = {
  name: 'inferences',
  workspaces: (db) => workspacesOf(db, 'invoker.inferences'),
  async prune(db: Database, workspaceId: string, days: number, limit: number) {
    const rows = await db.query(
      `with doomed as (
         select i.run_id, i.step_id from invoker.inferences i
          where i.workspace_id = $1 and i.created_at < now() - make_interval(days => $2::int)
          order by i.created_at
          limit $3
          for update of i skip locked
       )
       delete from invoker.inferences x using doomed d where x.run_id = d.run_id and x.step_id = d.step_id returning 1`,
      [workspaceId, days, limit],
    );
    return rows.length;
  },
};

export const invokerRetention: RetentionTarget[] = [oldInferences];
