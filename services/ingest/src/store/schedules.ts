import type { Database } from '@dws/db';

/** A schedule made through the API (schema.ts `schedules`). */
export interface ScheduleRow {
  id: string;
  workspace_id: string;
  app: string;
  workflow: string;
  cron: string;
  pattern: string;
  tz: string;
  data: string;
  external_id: string | null;
  tags: string[] | null;
  next_at: Date | string | null;
  last_at: Date | string | null;
  paused_at: Date | string | null;
  paused_by: string | null;
  created_by: string;
  created_at: Date | string;
  updated_at: Date | string;
}

export type NewSchedule = Pick<ScheduleRow, 'id' | 'workspace_id' | 'app' | 'workflow' | 'cron' | 'pattern' | 'tz' | 'data' | 'external_id' | 'tags' | 'created_by'> & {
  nextAt: Date | null;
};

const COLUMNS = 'id, workspace_id, app, workflow, cron, pattern, tz, data, external_id, tags, next_at, last_at, paused_at, paused_by, created_by, created_at, updated_at';

/**
 * Store a schedule; one with the `external_id` of another of the workflow
 * replaces that one's cron, data and tags (its id, history and pause stay:
 * a sync that sends every row again does not resume what an operator paused).
 * @returns the stored row, and whether it is new
 */
export async function upsertSchedule(db: Database, s: NewSchedule): Promise<{ row: ScheduleRow; created: boolean }> {
  const rows = await db.query<ScheduleRow & { created: boolean }>(
    `insert into ingest.schedules as s (id, workspace_id, app, workflow, cron, pattern, tz, data, external_id, tags, next_at, created_by)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::text[], $11, $12)
     on conflict (workspace_id, app, workflow, external_id) do update
       set cron = excluded.cron, pattern = excluded.pattern, tz = excluded.tz, data = excluded.data, tags = excluded.tags,
           next_at = case when s.paused_at is null then excluded.next_at end, updated_at = now()
     returning ${COLUMNS.split(', ').map((c) => `s.${c}`).join(', ')}, (xmax = 0) as created`,
    [s.id, s.workspace_id, s.app, s.workflow, s.cron, s.pattern, s.tz, s.data, s.external_id, s.tags, s.nextAt?.toISOString() ?? null, s.created_by],
  );
  const { created, ...row } = rows[0]!;
  return { row, created };
}

export async function scheduleById(db: Database, workspaceId: string, id: string): Promise<ScheduleRow | undefined> {
  const rows = await db.query<ScheduleRow>(`select ${COLUMNS} from ingest.schedules where workspace_id = $1 and id = $2`, [workspaceId, id]);
  return rows[0];
}

/** The workspace's schedules, newest first. */
export function listSchedules(db: Database, workspaceId: string, f: { app?: string; workflow?: string; limit: number }): Promise<ScheduleRow[]> {
  return db.query<ScheduleRow>(
    `select ${COLUMNS} from ingest.schedules
      where workspace_id = $1 and ($2::text is null or app = $2) and ($3::text is null or workflow = $3)
      order by created_at desc, id limit $4`,
    [workspaceId, f.app ?? null, f.workflow ?? null, f.limit],
  );
}

/** Pause a schedule: it has no next tick until resumed (a second pause keeps the first's time and author). */
export async function pauseSchedule(db: Database, workspaceId: string, id: string, by: string): Promise<ScheduleRow | undefined> {
  const rows = await db.query<ScheduleRow>(
    `update ingest.schedules set paused_at = coalesce(paused_at, now()), paused_by = coalesce(paused_by, $3), next_at = null, updated_at = now()
      where workspace_id = $1 and id = $2 returning ${COLUMNS}`,
    [workspaceId, id, by],
  );
  return rows[0];
}

/**
 * Resume a schedule at `next(row)`, its first tick from now: the ticks it
 * missed while paused do not fire. A schedule not paused is left as it is.
 */
export async function resumeSchedule(
  db: Database,
  workspaceId: string,
  id: string,
  next: (s: ScheduleRow) => Date | null,
): Promise<ScheduleRow | undefined> {
  return db.tx(async (tx) => {
    const row = (await tx.query<ScheduleRow>(`select ${COLUMNS} from ingest.schedules where workspace_id = $1 and id = $2 for update`, [workspaceId, id]))[0];
    if (!row || row.paused_at === null) return row;
    const rows = await tx.query<ScheduleRow>(
      `update ingest.schedules set paused_at = null, paused_by = null, next_at = $3, updated_at = now() where id = $2 and workspace_id = $1 returning ${COLUMNS}`,
      [workspaceId, id, next(row)?.toISOString() ?? null],
    );
    return rows[0];
  });
}

/** @returns false when there was no such schedule */
export async function deleteSchedule(db: Database, workspaceId: string, id: string): Promise<boolean> {
  return (await db.query('delete from ingest.schedules where workspace_id = $1 and id = $2 returning id', [workspaceId, id])).length === 1;
}

/** Schedules whose tick has come, locked for this transaction (SKIP LOCKED: each is taken by one replica), with the database's clock. */
export function dueApiSchedules(tx: Database, limit: number): Promise<(ScheduleRow & { db_now: Date | string })[]> {
  return tx.query(
    `select ${COLUMNS}, now() as db_now from ingest.schedules where next_at <= now() order by next_at limit $1 for update skip locked`,
    [limit],
  );
}

/** After its tick (`lastAt`) fired: the next one, or none (a pattern that never fires again). */
export async function advanceApiSchedule(tx: Database, id: string, lastAt: Date, nextAt: Date | null): Promise<void> {
  await tx.query('update ingest.schedules set last_at = $2, next_at = $3 where id = $1', [id, lastAt.toISOString(), nextAt?.toISOString() ?? null]);
}
