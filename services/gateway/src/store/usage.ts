import type { Database } from '@dws/db';
import type { Usage } from '../domain/usage.js';

/**
 * Count the ends of several runs in ONE statement (the meter's group
 * commit): each run id is claimed in `metered_runs` (a run already counted
 * adds nothing), and each (workspace, month) row grows by the runs it
 * claimed, the rows locked in key order so two replicas' batches cannot
 * deadlock. Returns the batch's workspaces that must be settled under the
 * workspace lock (a ceiling, or a usage suspension): also for a redelivered
 * fact, so a crash between count and settle loses no settle.
 */
export async function countRunEnds(db: Database, ends: { runId: string; workspaceId: string; month: string }[]): Promise<Set<string>> {
  const rows = await db.query<{ id: string }>(
    `with f as (
       select * from jsonb_to_recordset($1::jsonb) as f(run_id text, workspace_id text, month text)
     ), claim as (
       insert into gateway.metered_runs (run_id, workspace_id, month)
       select run_id, workspace_id, month from f on conflict (run_id) do nothing
       returning workspace_id, month
     ), u as (
       insert into gateway.usage (workspace_id, month, runs)
       select workspace_id, month, count(*) from claim group by workspace_id, month order by workspace_id, month
       on conflict (workspace_id, month) do update set runs = gateway.usage.runs + excluded.runs
     )
     -- u runs to completion unread (a data-modifying WITH always does).
     select w.id from gateway.workspaces w
      where w.id in (select workspace_id from f)
        and ((w.limits is not null and w.limits <> '{}'::jsonb) or (w.suspended and w.suspended_reason = 'usage_limit'))`,
    [JSON.stringify(ends.map((e) => ({ run_id: e.runId, workspace_id: e.workspaceId, month: e.month })))],
  );
  return new Set(rows.map((r) => r.id));
}

type UsageRow = { runs: number; model_tokens: number | null; model_cost: number | null };

function toUsage(month: string, r: UsageRow | undefined): Usage {
  if (!r) return { month, runs: 0 };
  const model = r.model_tokens !== null || r.model_cost !== null ? { tokens: Number(r.model_tokens ?? 0), cost: Number(r.model_cost ?? 0) } : undefined;
  return { month, runs: Number(r.runs), ...(model ? { model } : {}) };
}

/**
 * The month's usage, holding its row lock until commit (the row is created at
 * 0 if needed, so there is always one to lock): a decision taken on it cannot
 * miss a run the meter is counting at the same moment.
 */
export async function lockUsage(tx: Database, workspaceId: string, month: string): Promise<Usage> {
  const rows = await tx.query<UsageRow>(
    `insert into gateway.usage (workspace_id, month, runs) values ($1, $2, 0)
     on conflict (workspace_id, month) do update set runs = gateway.usage.runs
     returning runs, model_tokens, model_cost`,
    [workspaceId, month],
  );
  return toUsage(month, rows[0]);
}

/**
 * Record the month's model usage a refused model call reported (the larger
 * figure wins: reports of one month only grow, and may arrive out of order),
 * holding the row lock like {@link lockUsage}, and return the month's usage.
 */
export async function recordModelUsage(tx: Database, workspaceId: string, month: string, tokens: number, cost: number): Promise<Usage> {
  const rows = await tx.query<UsageRow>(
    `insert into gateway.usage (workspace_id, month, runs, model_tokens, model_cost) values ($1, $2, 0, $3, $4)
     on conflict (workspace_id, month) do update
       set model_tokens = greatest(gateway.usage.model_tokens, excluded.model_tokens),
           model_cost = greatest(gateway.usage.model_cost, excluded.model_cost)
     returning runs, model_tokens, model_cost`,
    [workspaceId, month, tokens, cost],
  );
  return toUsage(month, rows[0]);
}

/** The month's usage for display (no lock); nothing counted before the first run ends. */
export async function usageOf(db: Database, workspaceId: string, month: string): Promise<Usage> {
  const rows = await db.query<UsageRow>('select runs, model_tokens, model_cost from gateway.usage where workspace_id = $1 and month = $2', [
    workspaceId,
    month,
  ]);
  return toUsage(month, rows[0]);
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
