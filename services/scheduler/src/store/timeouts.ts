import type { Database } from '@dws/db';

/**
 * The runs that have timeouts and have not ended: what the `runs_timeouts`
 * partial index holds (the predicate must stay identical to its own).
 */
const TIMED = `(timeout_start_ms is not null or timeout_finish_ms is not null) and status in ('queued', 'running', 'waiting', 'paused')`;

/**
 * When a timed run is due to be cancelled: `start` while it is still queued
 * and was never driven (no pass applied), `finish` in any state; the earlier
 * of the two (least() skips nulls).
 */
const DEADLINE = `least(case when status = 'queued' and pass = 0 then created_at + timeout_start_ms * interval '1 millisecond' end,
                        created_at + timeout_finish_ms * interval '1 millisecond')`;

export interface TimedOut {
  id: string;
  workspace_id: string;
  /** Which timeout ended it, and its length. */
  which: 'start' | 'finish';
  ms: number;
}

/** Runs past a timeout, oldest first. Two replicas may read the same ones: the cancel locks and skips an ended run. */
export async function timedOutRuns(db: Database, limit: number): Promise<TimedOut[]> {
  const rows = await db.query<{ id: string; workspace_id: string; which: 'start' | 'finish'; ms: string | number }>(
    `select id, workspace_id,
            case when status = 'queued' and pass = 0 and created_at + timeout_start_ms * interval '1 millisecond' <= now() then 'start' else 'finish' end as which,
            case when status = 'queued' and pass = 0 and created_at + timeout_start_ms * interval '1 millisecond' <= now() then timeout_start_ms
                 else timeout_finish_ms end as ms
       from scheduler.runs
      where ${TIMED} and ${DEADLINE} <= now()
      order by created_at
      limit $1`,
    [limit],
  );
  return rows.map((r) => ({ ...r, ms: Number(r.ms) }));
}

/** Milliseconds until the earliest timed run is due (0 or less: now); undefined when none waits. */
export async function nextTimeoutInMs(db: Database): Promise<number | undefined> {
  const rows = await db.query<{ ms: number | null }>(`select (extract(epoch from min(${DEADLINE}) - now()) * 1000)::float8 as ms from scheduler.runs where ${TIMED}`);
  const ms = rows[0]?.ms;
  return ms === null || ms === undefined ? undefined : Number(ms);
}
