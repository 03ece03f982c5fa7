import type { Database } from '@dws/db';
import type { Spend, WorkspaceModelView } from '../domain/ai-spend.js';

/** tokensIn + tokensOut and cost of one step's SPEC Usage (missing fields count as zero). */
const TOKENS = `coalesce((s.usage->>'tokensIn')::numeric, 0) + coalesce((s.usage->>'tokensOut')::numeric, 0)`;
const COST = `coalesce((s.usage->>'cost')::numeric, 0)`;

/**
 * What a run has spent on model calls, and what its workflow's runs in the
 * workspace spent over the last `windowMs` (0: not asked), in one statement.
 * Read only when a pass asks for a model call and its workflow has a
 * ceiling; the window uses the partial index on metered steps by end time.
 */
export async function aiSpendOf(
  db: Database,
  run: { id: string; workspaceId: string; app: string; workflow: string },
  windowMs: number,
): Promise<{ run: Spend; window: Spend }> {
  const rows = await db.query<{ run_tokens: string; run_cost: string; window_tokens: string; window_cost: string }>(
    `select coalesce(sum(${TOKENS}) filter (where s.run_id = $2), 0)::float8 as run_tokens,
            coalesce(sum(${COST}) filter (where s.run_id = $2), 0)::float8 as run_cost,
            coalesce(sum(${TOKENS}) filter (where s.in_window), 0)::float8 as window_tokens,
            coalesce(sum(${COST}) filter (where s.in_window), 0)::float8 as window_cost
       from (select st.run_id, st.usage,
                    $5::bigint > 0 and st.ended_at > now() - $5::bigint * interval '1 millisecond' and r.app = $3 and r.workflow = $4 as in_window
               from scheduler.steps st join scheduler.runs r on r.id = st.run_id
              where st.workspace_id = $1 and st.usage is not null
                and (st.run_id = $2 or ($5::bigint > 0 and st.ended_at > now() - $5::bigint * interval '1 millisecond'))) s`,
    [run.workspaceId, run.id, run.app, run.workflow, windowMs],
  );
  const r = rows[0]!;
  return { run: { tokens: Number(r.run_tokens), cost: Number(r.run_cost) }, window: { tokens: Number(r.window_tokens), cost: Number(r.window_cost) } };
}

/**
 * The workspace's monthly model ceilings and what its steps recorded in the
 * current UTC month, in one statement; undefined when it has none (a lookup
 * by key, so a pass with a model call in a workspace without ceilings pays
 * one index probe). The month is Postgres's, so the sum and its label agree.
 */
export async function workspaceModelOf(db: Database, workspaceId: string): Promise<WorkspaceModelView | undefined> {
  const rows = await db.query<{ tokens_per_month: number | null; cost_per_month: number | null; month: string; tokens: number; cost: number }>(
    `select c.tokens_per_month, c.cost_per_month, to_char(m.start, 'YYYY-MM') as month, u.tokens, u.cost
       from scheduler.model_ceilings c
      cross join (select date_trunc('month', now() at time zone 'UTC') as start) m
      cross join lateral (
        select coalesce(sum(${TOKENS}), 0)::float8 as tokens, coalesce(sum(${COST}), 0)::float8 as cost
          from scheduler.steps s
         where s.workspace_id = c.workspace_id and s.usage is not null and s.ended_at >= (m.start at time zone 'UTC')) u
      where c.workspace_id = $1`,
    [workspaceId],
  );
  const r = rows[0];
  if (!r) return undefined;
  const ceilings = {
    ...(r.tokens_per_month !== null && r.tokens_per_month > 0 ? { tokens: Number(r.tokens_per_month) } : {}),
    ...(r.cost_per_month !== null && r.cost_per_month > 0 ? { cost: Number(r.cost_per_month) } : {}),
  };
  return { month: r.month, ceilings, spent: { tokens: Number(r.tokens), cost: Number(r.cost) } };
}

/** Keep `scheduler.model_ceilings` in step with a WorkspaceUpserted fact (0: none; a workspace with neither has no row). */
export async function saveModelCeilings(db: Database, workspaceId: string, tokensPerMonth: number, costPerMonth: number): Promise<void> {
  if (tokensPerMonth > 0 || costPerMonth > 0) {
    await db.query(
      `insert into scheduler.model_ceilings (workspace_id, tokens_per_month, cost_per_month) values ($1, $2, $3)
       on conflict (workspace_id) do update set tokens_per_month = excluded.tokens_per_month, cost_per_month = excluded.cost_per_month, updated_at = now()`,
      [workspaceId, tokensPerMonth > 0 ? tokensPerMonth : null, costPerMonth > 0 ? costPerMonth : null],
    );
  } else {
    await db.query('delete from scheduler.model_ceilings where workspace_id = $1', [workspaceId]);
  }
}
