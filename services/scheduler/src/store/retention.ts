import type { Database } from '@dws/db';
import { workspacesOf, type RetentionTarget } from '@dws/runtime';

/**
 * What the scheduler deletes past a workspace's retention window
 * (docs/retention.md). Each statement takes at most `limit` parent rows with
 * FOR UPDATE SKIP LOCKED, so replicas split the work and a control action
 * holding a run (lockRun) is simply passed over until the next pass.
 */

/** SPEC Run statuses a run never leaves. Must match the predicate of the runs_ws_ended index. */
const TERMINAL = `('succeeded', 'failed', 'cancelled')`;

/**
 * Ended runs (ended_at before the window) with their steps, timeline frames
 * and logs, scores and waiters, in one statement so no run is left half
 * deleted. Kept even when old: a child whose parent has not ended (the
 * parent's steps link it) and a failed run whose onFailure run has not ended
 * (that run is invoked with its error).
 */
export const endedRuns: RetentionTarget = {
  name: 'runs',
  workspaces: (db) => workspacesOf(db, 'scheduler.runs', `status in ${TERMINAL}`),
  async prune(db: Database, workspaceId: string, days: number, limit: number) {
    const rows = await db.query(
      `with doomed as (
         select r.id from scheduler.runs r
          where r.workspace_id = $1 and r.status in ${TERMINAL}
            and r.ended_at < now() - make_interval(days => $2::int)
            and not exists (select 1 from scheduler.runs p where p.id = r.parent_run_id and p.status not in ${TERMINAL})
            and not exists (select 1 from scheduler.runs o where o.on_failure_of = r.id and o.status not in ${TERMINAL})
          order by r.ended_at
          limit $3
          for update of r skip locked
       ),
       gone_steps as (delete from scheduler.steps s using doomed d where s.run_id = d.id),
       gone_frames as (delete from scheduler.frames f using doomed d where f.run_id = d.id),
       gone_scores as (delete from scheduler.scores c using doomed d where c.run_id = d.id),
       gone_waiters as (delete from scheduler.waiters w using doomed d where w.run_id = d.id)
       delete from scheduler.runs r using doomed d where r.id = d.id returning r.id`,
      [workspaceId, days, limit],
    );
    return rows.length;
  },
};

/**
 * Control audit rows (SPEC Control audit entry) written before the window,
 * by their own age: an old run's recent replay stays on record. The rows of
 * a run that has not ended stay (GET /runs/{id} waitingFor names who paused
 * it).
 */
export const controlAudit: RetentionTarget = {
  name: 'control_actions',
  workspaces: (db) => workspacesOf(db, 'scheduler.control_actions'),
  async prune(db: Database, workspaceId: string, days: number, limit: number) {
    const rows = await db.query(
      `with doomed as (
         select a.id from scheduler.control_actions a
          where a.workspace_id = $1 and a.created_at < now() - make_interval(days => $2::int)
            and not exists (select 1 from scheduler.runs r where r.id = a.run_id and r.status not in ${TERMINAL})
          order by a.created_at
          limit $3
          for update of a skip locked
       )
       delete from scheduler.control_actions c using doomed d where c.id = d.id returning 1`,
      [workspaceId, days, limit],
    );
    return rows.length;
  },
};

export const schedulerRetention: RetentionTarget[] = [endedRuns, controlAudit];
