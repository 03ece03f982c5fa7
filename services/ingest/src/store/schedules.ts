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
  next_at: Date | string | null;
  last_at: Date | string | null;
  created_by: string;
  created_at: Date | string;
  updated_at: Date | string;
}

export type NewSchedule = Pick<ScheduleRow, 'id' | 'workspace_id' | 'app' | 'workflow' | 'cron' | 'pattern' | 'tz' | 'data' | 'external_id' | 'created_by'> & {
  nextAt: Date | null;
};

const COLUMNS = 'id, workspace_id, app, workflow, cron, pattern, tz, data, external_id, next_at, last_at, created_by, created_at, updated_at';

/**
 * Store a schedule; one with the `external_id` of another of the workflow
 * replaces that one's cron and data (its id and history stay).
 * @returns the stored row, and whether it is new
 */
export async function upsertSchedule(db: Database, s: NewSchedule): Promise<{ row: ScheduleRow; created: boolean }> {
  const rows = await db.query<ScheduleRow & { created: boolean }>(
    `insert into ingest.schedules as s (id, workspace_id, app, workflow, cron, pattern, tz, data, external_id, next_at, created_by)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
     on conflict (workspace_id, app, workflow, external_id) do update
       set cron = excluded.cron, pattern = excluded.pattern, tz = excluded.tz, data = excluded.data, next_at = excluded.next_at, updated_at = now()
     returning ${COLUMNS.split(', ').map((c) => `s.${c}`).join(', ')}, (xmax = 0) as created`,
    [s.id, s.workspace_id, s.app, s.workflow, s.cron, s.pattern, s.tz, s.data, s.external_id, s.nextAt?.toISOString() ?? null, s.created_by],
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
