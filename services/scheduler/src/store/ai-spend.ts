import type { Database } from '@dws/db';
import type { Spend } from '../domain/ai-spend.js';

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
