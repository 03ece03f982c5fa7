import type { Database } from '@dws/db';

/**
 * Claim and count one ended run in ONE statement (no transaction), for the
 * common case of a workspace the count cannot change: `settle` is true when
 * it has limits or a usage suspension (or is not known here: false), and
 * then the caller settles it under the workspace lock. `runs` is null for a
 * run already counted.
 */
export async function countRunEnd(db: Database, r: { runId: string; workspaceId: string; month: string }): Promise<{ runs: number | null; settle: boolean }> {
  const rows = await db.query<{ runs: number | null; settle: boolean | null }>(
    `with claim as (
       insert into gateway.metered_runs (run_id, workspace_id, month) values ($1, $2, $3) on conflict (run_id) do nothing returning run_id
     ), u as (
       insert into gateway.usage (workspace_id, month, runs) select $2, $3, 1 from claim
       on conflict (workspace_id, month) do update set runs = gateway.usage.runs + 1
       returning runs
     )
     select (select runs from u) as runs,
            (select (w.limits is not null and w.limits <> '{}'::jsonb) or (w.suspended and w.suspended_reason = 'usage_limit')
               from gateway.workspaces w where w.id = $2) as settle`,
    [r.runId, r.workspaceId, r.month],
  );
  const row = rows[0];
  return { runs: row?.runs === null || row?.runs === undefined ? null : Number(row.runs), settle: row?.settle === true };
}

/**
 * The month's count, holding its row lock until commit (the row is created at
 * 0 if needed, so there is always one to lock): a decision taken on it cannot
 * miss a run the meter is counting at the same moment.
 */
export async function lockUsage(tx: Database, workspaceId: string, month: string): Promise<number> {
  const rows = await tx.query<{ runs: number }>(
    `insert into gateway.usage (workspace_id, month, runs) values ($1, $2, 0)
     on conflict (workspace_id, month) do update set runs = gateway.usage.runs
     returning runs`,
    [workspaceId, month],
  );
  return Number(rows[0]!.runs);
}

/** The month's count for display (no lock); 0 before the first run ends. */
export async function usageOf(db: Database, workspaceId: string, month: string): Promise<number> {
  const rows = await db.query<{ runs: number }>('select runs from gateway.usage where workspace_id = $1 and month = $2', [workspaceId, month]);
  return rows[0] ? Number(rows[0].runs) : 0;
}

/** Workspaces a ceiling suspended: the rollover sweep re-checks them against the current month. */
export async function usageSuspendedIds(db: Database): Promise<string[]> {
  const rows = await db.query<{ id: string }>(`select id from gateway.workspaces where suspended and suspended_reason = 'usage_limit' order by id`);
  return rows.map((r) => r.id);
}

/**
 * Drop the dedupe rows of months before `keepFrom` (in bounded batches, so a
 * sweep never holds a long transaction). A repeat of such a run could only
 * add to a month no ceiling reads any more. Returns how many went.
 */
export async function pruneMeteredRuns(db: Database, keepFrom: string, batch = 10_000): Promise<number> {
  const rows = await db.query<{ n: number }>(
    `with gone as (
       delete from gateway.metered_runs where run_id in (select run_id from gateway.metered_runs where month < $1 limit $2) returning 1
     ) select count(*)::int as n from gone`,
    [keepFrom, batch],
  );
  return Number(rows[0]?.n ?? 0);
}
