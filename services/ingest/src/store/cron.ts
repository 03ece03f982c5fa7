import type { Database } from '@dws/db';

export interface DueSchedule {
  workspace_id: string;
  app: string;
  workflow: string;
  cron: string;
  pattern: string;
  tz: string;
  next_at: Date | string;
  db_now: Date | string;
}

/**
 * Schedules whose next tick has come, locked for this transaction (SKIP
 * LOCKED: each is taken by one replica), with the database's clock.
 */
export function dueSchedules(tx: Database, limit: number): Promise<DueSchedule[]> {
  return tx.query<DueSchedule>(
    `select workspace_id, app, workflow, cron, pattern, tz, next_at, now() as db_now from ingest.cron_schedules
      where next_at <= now() order by next_at limit $1 for update skip locked`,
    [limit],
  );
}

/**
 * Claim the tick (workflow, tickAt). False when it was already fired (by
 * another schedule of the workflow at the same instant, or before a
 * restart whose schedule row did not advance).
 */
export async function claimTick(tx: Database, s: DueSchedule, tickAt: Date, runId: string): Promise<boolean> {
  const rows = await tx.query(
    `insert into ingest.cron_ticks (workspace_id, app, workflow, tick_at, cron, run_id) values ($1, $2, $3, $4, $5, $6)
     on conflict do nothing returning run_id`,
    [s.workspace_id, s.app, s.workflow, tickAt.toISOString(), s.cron, runId],
  );
  return rows.length === 1;
}

export async function advanceSchedule(tx: Database, s: DueSchedule, nextAt: Date | null): Promise<void> {
  const key = [s.workspace_id, s.app, s.workflow, s.cron];
  // A pattern that never fires again (a date in the past) is done.
  if (!nextAt) await tx.query('delete from ingest.cron_schedules where workspace_id = $1 and app = $2 and workflow = $3 and cron = $4', key);
  else await tx.query('update ingest.cron_schedules set next_at = $5 where workspace_id = $1 and app = $2 and workflow = $3 and cron = $4', [...key, nextAt.toISOString()]);
}

/** Ticks are kept a week: long past any restart that could ask about them again. */
export async function pruneTicks(db: Database): Promise<void> {
  await db.query(`delete from ingest.cron_ticks where fired_at < now() - interval '7 days'`);
}
