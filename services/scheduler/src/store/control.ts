import type { Database } from '@dws/db';
import { runsWhere, type RunFilter } from './reads.js';
import { ACTIVE_SQL as ACTIVE, type NewFrame } from './runs.js';

export interface ControlRun {
  id: string;
  workspace_id: string;
  workflow: string;
  app: string;
  runner: string;
  status: string;
  trigger_kind: string;
  event_id: string | null;
  event_name: string | null;
  input: string;
  lease_owner: string | null;
  next_seq: number;
  parent_run_id: string | null;
  pause_requested: boolean;
  singleton_key: string | null;
  tags: string[] | null;
}

const CONTROL_COLUMNS = `id, workspace_id, workflow, app, runner, status, trigger_kind, event_id, event_name, input, lease_owner, next_seq,
            parent_run_id, pause_requested, singleton_key, tags`;

/** Lock a run of the workspace for a control action (SELECT ... FOR UPDATE). */
export async function lockRun(tx: Database, workspaceId: string, id: string): Promise<ControlRun | undefined> {
  const rows = await tx.query<ControlRun>(`select ${CONTROL_COLUMNS} from scheduler.runs where workspace_id = $1 and id = $2 for update`, [workspaceId, id]);
  return rows[0];
}

/** Lock a run's children that have not ended, to end them with it. */
export function lockChildren(tx: Database, parentRunId: string): Promise<ControlRun[]> {
  return tx.query<ControlRun>(
    `select ${CONTROL_COLUMNS} from scheduler.runs
      where parent_run_id = $1 and status in ('queued', 'running', 'waiting', 'paused') order by id for update`,
    [parentRunId],
  );
}

/**
 * Set a locked run's status where no replica may apply to it any more: the
 * pass advances, so a reply in flight is dropped; the lease is cleared; one
 * run_status frame is appended at the run's committed seq (returned, to go
 * live once committed). A paused run gives its concurrency slots back,
 * unless it holds them to its end (a queued singleton).
 */
export async function setRunStatus(
  tx: Database,
  run: ControlRun,
  status: string,
  opts: { leaseUntilNow?: boolean; ended?: boolean; error?: unknown } = {},
): Promise<NewFrame> {
  const ts = new Date().toISOString();
  const rows = await tx.query<{ seq: number }>(
    `with r as (
       update scheduler.runs set status = $2, pass = pass + 1, lease_owner = null,
              lease_until = case when $3::boolean then now() else null end,
              ended_at = case when $4::boolean then now() else ended_at end,
              error = coalesce($5::jsonb, error), pause_requested = false, next_seq = next_seq + 1, updated_at = now(),
              admitted = case when $2 = 'paused' and concurrency_limit > 0 and not holds_slots then false else admitted end
        where id = $1 returning next_seq - 1 as seq
     )
     insert into scheduler.frames (run_id, seq, workspace_id, kind, payload, ts)
     select $1, r.seq, $6, 'run_status', jsonb_build_object('status', $2::text), $7::timestamptz from r
     returning seq`,
    [run.id, status, opts.leaseUntilNow === true, opts.ended === true, opts.error === undefined ? null : JSON.stringify(opts.error), run.workspace_id, ts],
  );
  return { seq: Number(rows[0]!.seq), kind: 'run_status', fields: { status }, ts };
}

export async function requestPause(tx: Database, runId: string): Promise<void> {
  await tx.query('update scheduler.runs set pause_requested = true, updated_at = now() where id = $1', [runId]);
}

export async function cancelPauseRequest(tx: Database, runId: string): Promise<void> {
  await tx.query('update scheduler.runs set pause_requested = false, updated_at = now() where id = $1', [runId]);
}

/** Steps of a run before the named one (by human name or hashed id), in order; undefined when it has no such step. */
export async function stepsBefore(
  tx: Database,
  runId: string,
  step: string,
): Promise<{ step_id: string; name: string; op: string; status: string; data: string | null; error: unknown; input: string | null; attempts: number }[] | undefined> {
  const target = await tx.query<{ idx: number }>(
    'select idx from scheduler.steps where run_id = $1 and (name = $2 or step_id = $2) order by idx limit 1',
    [runId, step],
  );
  if (!target[0]) return undefined;
  return tx.query(
    `select step_id, name, op, status, data, error, input, attempts from scheduler.steps
      where run_id = $1 and idx < $2 and status in ('succeeded', 'failed') order by idx`,
    [runId, target[0].idx],
  );
}

export async function copySteps(
  tx: Database,
  toRunId: string,
  workspaceId: string,
  steps: { step_id: string; name: string; op: string; status: string; data: string | null; error: unknown; input: string | null; attempts: number }[],
): Promise<void> {
  if (steps.length === 0) return;
  await tx.query(
    `insert into scheduler.steps (run_id, step_id, workspace_id, name, op, idx, status, data, error, input, attempts, ended_at)
     select $1, x.step_id, $2, x.name, x.op, x.idx, x.status, x.data, x.error, x.input, x.attempts, now()
       from jsonb_to_recordset($3::jsonb) as x(step_id text, name text, op text, idx int, status text, data text, error jsonb, input text, attempts int)`,
    [toRunId, workspaceId, JSON.stringify(steps.map((s, idx) => ({ ...s, idx })))],
  );
  await tx.query('update scheduler.runs set step_count = $2 where id = $1', [toRunId, steps.length]);
}

/**
 * A workflow's runs that have not ended, as cancelOn reads them: created
 * within `withinMs` (0: any age), never the runs `eventId` itself started.
 * Over the workspace's active runs (its status index), not its history.
 */
export function activeRunsOf(
  db: Database,
  q: { workspaceId: string; app: string; workflow: string; eventId: string; withinMs: number },
): Promise<{ id: string; event_name: string | null; input: string }[]> {
  return db.query(
    `select id, event_name, input from scheduler.runs
      where workspace_id = $1 and status in ${ACTIVE} and app = $2 and workflow = $3
        and event_id is distinct from $4
        and ($5::bigint = 0 or created_at > now() - $5::bigint * interval '1 millisecond')
      order by created_at, id`,
    [q.workspaceId, q.app, q.workflow, q.eventId, q.withinMs],
  );
}

/** What a bulk action selects runs by: GET /runs's filter, less its search and lineage fields. */
export type BulkFilter = Pick<RunFilter, 'app' | 'workflow' | 'status' | 'runType' | 'tags' | 'since' | 'until'>;

/** Runs matching a bulk-replay filter, newest first, at most `limit`; plus how many match in all. */
export async function runsForBulk(db: Database, workspaceId: string, f: BulkFilter, limit: number) {
  const { where, params } = runsWhere(workspaceId, f);
  const total = await db.query<{ n: number }>(`select count(*)::int as n from scheduler.runs where ${where.join(' and ')}`, params);
  params.push(limit);
  const rows = await db.query<{ id: string; status: string }>(
    `select id, status from scheduler.runs where ${where.join(' and ')} order by created_at desc, id desc limit $${params.length}`,
    params,
  );
  return { matched: Number(total[0]?.n ?? 0), rows };
}

export interface ActiveRunRow {
  id: string;
  event_name: string | null;
  input: string;
  /** Its created_at to the microsecond (the keyset position: the next page starts below it). */
  pos: string;
}

/** How many runs that have not ended match a bulk filter. */
export async function countActiveForBulk(db: Database, workspaceId: string, f: BulkFilter): Promise<number> {
  const { where, params } = runsWhere(workspaceId, f);
  const rows = await db.query<{ n: number }>(`select count(*)::int as n from scheduler.runs where ${where.join(' and ')} and status in ${ACTIVE}`, params);
  return Number(rows[0]?.n ?? 0);
}

/**
 * A page of the runs that have not ended matching a bulk filter, newest
 * first, below `after` (keyset): what bulk cancel walks. Over the status
 * index, not the workspace's history.
 */
export function activeForBulk(db: Database, workspaceId: string, f: BulkFilter, after: ActiveRunRow | undefined, limit: number): Promise<ActiveRunRow[]> {
  const { where, params } = runsWhere(workspaceId, f);
  if (after) {
    params.push(after.pos, after.id);
    where.push(`(created_at, id) < ($${params.length - 1}::timestamptz, $${params.length})`);
  }
  params.push(limit);
  return db.query<ActiveRunRow>(
    `select id, event_name, input, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as pos from scheduler.runs
      where ${where.join(' and ')} and status in ${ACTIVE}
      order by created_at desc, id desc limit $${params.length}`,
    params,
  );
}

export async function writeAudit(
  db: Database,
  a: { workspaceId: string; action: string; runId?: string; newRunId?: string; actor?: string; detail?: unknown },
): Promise<void> {
  await db.query(
    'insert into scheduler.control_actions (workspace_id, action, run_id, new_run_id, actor, detail) values ($1, $2, $3, $4, $5, $6::jsonb)',
    [a.workspaceId, a.action, a.runId ?? null, a.newRunId ?? null, a.actor ?? null, a.detail === undefined ? null : JSON.stringify(a.detail)],
  );
}

export async function listAudit(db: Database, workspaceId: string, f: { action?: string; runId?: string; limit: number }) {
  return db.query<{ id: number; action: string; run_id: string | null; new_run_id: string | null; actor: string | null; detail: unknown; created_at: Date | string }>(
    `select id, action, run_id, new_run_id, actor, detail, created_at from scheduler.control_actions
      where workspace_id = $1 and ($2::text is null or action = $2) and ($3::text is null or run_id = $3 or new_run_id = $3)
      order by id desc limit $4`,
    [workspaceId, f.action ?? null, f.runId ?? null, f.limit],
  );
}

/** Waiters of an event name in a workspace (eventIf is evaluated by the caller). */
export async function waitersFor(db: Database, workspaceId: string, eventName: string) {
  return db.query<{ run_id: string; step_id: string; if_expr: string | null }>(
    'select run_id, step_id, if_expr from scheduler.waiters where workspace_id = $1 and event_name = $2 order by created_at',
    [workspaceId, eventName],
  );
}

/**
 * Which of these event names some run waits for, in one statement: a probe
 * of the index per name that stops at its first waiter, however many wait.
 */
export async function namesWaitedFor(db: Database, workspaceId: string, eventNames: string[]): Promise<Set<string>> {
  const rows = await db.query<{ event_name: string }>(
    `select n.event_name from unnest($2::text[]) as n(event_name)
      where exists (select 1 from scheduler.waiters w where w.workspace_id = $1 and w.event_name = n.event_name)`,
    [workspaceId, eventNames],
  );
  return new Set(rows.map((r) => r.event_name));
}
