import type { Database } from '@dws/db';

/** Columns of a run in a list: no input or result (they may be large; only the single read needs them). */
export interface RunSummaryRow {
  id: string;
  session: string | null;
  tags: string[] | null;
  workspace_id: string;
  workflow: string;
  app: string;
  runner: string;
  status: string;
  trigger_kind: string;
  event_id: string | null;
  event_name: string | null;
  replay_of: string | null;
  error: unknown;
  attempt: number;
  step_count: number;
  created_at: Date | string;
  started_at: Date | string | null;
  ended_at: Date | string | null;
  /** created_at as RFC 3339 with microseconds: the exact keyset position (a JS Date keeps only ms). */
  created_key: string;
  /** The sort value of duration (ms; -1 while unfinished). */
  duration_key: string | number;
  /** Set by the read handler: waiting on an Approval step not yet decided (SPEC's needs_attention state). */
  needs_attention?: boolean;
}

export interface RunRow extends RunSummaryRow {
  input: string;
  result: string | null;
  /** Totals of the model calls its steps recorded; null when it made none. */
  usage: UsageTotals | null;
}

/** Totals of SPEC Usage records: how many calls, their tokens, and their cost when any was priced. */
export interface UsageTotals {
  calls: number;
  tokensIn: number;
  tokensOut: number;
  cost: number | null;
}

/** SQL aggregating `steps st` rows' usage into UsageTotals (json), for a from-clause that joins them. */
const USAGE_TOTALS_SQL = `json_build_object('calls', count(*)::int,
  'tokensIn', coalesce(sum((st.usage->>'tokensIn')::numeric), 0)::float8,
  'tokensOut', coalesce(sum((st.usage->>'tokensOut')::numeric), 0)::float8,
  'cost', sum((st.usage->>'cost')::numeric)::float8)`;

/**
 * Duration in ms as a sortable, never-null value: -1 for a run without both
 * ends. The lead's expression index `runs_ws_duration` is on exactly this
 * expression, so keep them identical.
 */
export const DURATION_SQL = `coalesce((extract(epoch from (ended_at - started_at)) * 1000)::bigint, -1)`;

const CREATED_KEY_SQL = `to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

const SUMMARY_COLUMNS = `id, workspace_id, workflow, app, runner, status, trigger_kind, event_id, event_name, replay_of, session, tags,
  error, attempt, step_count, created_at, started_at, ended_at, ${CREATED_KEY_SQL} as created_key, ${DURATION_SQL} as duration_key`;

export async function runById(db: Database, workspaceId: string, id: string): Promise<RunRow | undefined> {
  const rows = await db.query<RunRow>(
    `select ${SUMMARY_COLUMNS}, input, result,
            (select case when count(*) = 0 then null else ${USAGE_TOTALS_SQL} end
               from scheduler.steps st where st.run_id = runs.id and st.usage is not null) as usage
       from scheduler.runs where workspace_id = $1 and id = $2`,
    [workspaceId, id],
  );
  return rows[0];
}

/** Status of a run (cheap: no payload columns), or undefined when the workspace has no such run. */
export async function runStatus(db: Database, workspaceId: string, id: string): Promise<{ status: string; next_seq: number } | undefined> {
  const rows = await db.query<{ status: string; next_seq: number }>(
    'select status, next_seq from scheduler.runs where workspace_id = $1 and id = $2',
    [workspaceId, id],
  );
  return rows[0];
}

/**
 * Which of `runIds` are parked on an Approval step the approvals service has
 * listed and no decision has resolved yet: SPEC's needs_attention state. A separate probe of the steps' primary
 * key for the waiting runs of a page, so the list's own plan stays as it is.
 */
export async function parkedOnApproval(db: Database, runIds: string[]): Promise<Set<string>> {
  if (runIds.length === 0) return new Set();
  const rows = await db.query<{ run_id: string }>(
    `select distinct run_id from scheduler.steps where run_id = any($1::text[]) and op = 'Approval' and status = 'waiting' and listed_at is not null`,
    [runIds],
  );
  return new Set(rows.map((r) => r.run_id));
}

export interface StepRow {
  step_id: string;
  name: string;
  op: string;
  idx: number;
  status: string;
  data: string | null;
  error: unknown;
  input: string | null;
  attempts: number;
  /** SPEC Usage of a model call, when the step made one. */
  usage: Record<string, unknown> | null;
  /** The child run of a RunWorkflow step. */
  child_run_id: string | null;
  created_at: Date | string;
  ended_at: Date | string | null;
}

export interface ScoreRow {
  id: string;
  step: string;
  name: string;
  value: unknown;
  data: Record<string, unknown>;
  created_at: Date | string;
}

/**
 * The model usage of a workspace's runs since a time (runs created since
 * then), in total and per model: what the workspace's AI steps cost.
 */
export async function workspaceUsage(db: Database, workspaceId: string, since: string): Promise<{ total: UsageTotals; models: (UsageTotals & { model: string })[] }> {
  const rows = await db.query<{ total: UsageTotals; models: (UsageTotals & { model: string })[] | null }>(
    `with st as (
       select st.usage from scheduler.runs r join scheduler.steps st on st.run_id = r.id
        where r.workspace_id = $1 and r.created_at >= $2::timestamptz and st.usage is not null
     )
     select (select ${USAGE_TOTALS_SQL} from st) as total,
            (select json_agg(m order by m->>'model') from (
               select (${USAGE_TOTALS_SQL})::jsonb || jsonb_build_object('model', coalesce(st.usage->>'model', '')) as m
                 from st group by st.usage->>'model') x) as models`,
    [workspaceId, since],
  );
  return { total: rows[0]!.total, models: rows[0]!.models ?? [] };
}

export interface SessionRow {
  id: string;
  runs: number;
  first_seen_at: Date | string;
  last_seen_at: Date | string;
  usage: UsageTotals;
  scores: { name: string; count: number; average: number | null }[];
}

/**
 * The workspace's sessions, most recently active first: each one's run
 * count, first and last run, the model usage its runs' steps recorded, and
 * its scores by name (count, average of the numeric values).
 */
export async function sessionsOf(db: Database, workspaceId: string, limit: number): Promise<SessionRow[]> {
  return db.query<SessionRow>(
    `with s as (
       select session as id, count(*)::int as runs, min(created_at) as first_seen_at, max(created_at) as last_seen_at
         from scheduler.runs where workspace_id = $1 and session is not null
        group by session order by max(created_at) desc, session limit $2
     )
     select s.id, s.runs, s.first_seen_at, s.last_seen_at,
            (select ${USAGE_TOTALS_SQL}
               from scheduler.runs r join scheduler.steps st on st.run_id = r.id
              where r.workspace_id = $1 and r.session = s.id and st.usage is not null) as usage,
            (select coalesce(json_agg(json_build_object('name', x.name, 'count', x.n, 'average', x.average) order by x.name), '[]'::json)
               from (select sc.name, count(*)::int as n,
                            avg(case when jsonb_typeof(sc.value) = 'number' then (sc.value #>> '{}')::numeric end)::float8 as average
                       from scheduler.runs r join scheduler.scores sc on sc.run_id = r.id
                      where r.workspace_id = $1 and r.session = s.id group by sc.name) x) as scores
       from s order by s.last_seen_at desc, s.id`,
    [workspaceId, limit],
  );
}

/** The scores a run's Score steps wrote, in the order they were written (SPEC: unpaged). */
export async function scoresOfRun(db: Database, workspaceId: string, runId: string): Promise<ScoreRow[]> {
  return db.query<ScoreRow>(
    `select 'scr_' || substr(md5(run_id || ':' || step_id), 1, 24) as id, step, name, value, data, created_at
       from scheduler.scores where run_id = $1 and workspace_id = $2 order by created_at, step_id`,
    [runId, workspaceId],
  );
}

/** A run's steps in discovery order (SPEC: unpaged). */
export async function stepsOfRun(db: Database, workspaceId: string, runId: string): Promise<StepRow[]> {
  return db.query<StepRow>(
    `select step_id, name, op, idx, status, data, error, input, attempts, usage, child_run_id, created_at, ended_at
       from scheduler.steps where run_id = $1 and workspace_id = $2 order by idx, step_id`,
    [runId, workspaceId],
  );
}

export interface FrameRow {
  seq: number;
  kind: string;
  payload: Record<string, unknown>;
  ts: Date | string;
}

/**
 * A page of a run's timeline with the run's status, in one statement (every
 * run stream opens with it). One snapshot: a terminal status means every
 * frame of the run is in it. Undefined when the run is not the workspace's.
 */
export async function timelinePage(
  db: Database,
  workspaceId: string,
  runId: string,
  f: { from: number; limit: number },
): Promise<{ status: string; frames: FrameRow[] } | undefined> {
  const rows = await db.query<{ status: string; frames: (Omit<FrameRow, 'ts'> & { ts: string })[] | null }>(
    `select r.status,
            (select json_agg(json_build_object('seq', f.seq, 'kind', f.kind, 'payload', f.payload, 'ts', f.ts) order by f.seq)
               from (select seq, kind, payload, ts from scheduler.frames
                      where run_id = r.id and workspace_id = r.workspace_id and seq > $3 order by seq limit $4) f) as frames
       from scheduler.runs r where r.workspace_id = $1 and r.id = $2`,
    [workspaceId, runId, f.from, f.limit],
  );
  const row = rows[0];
  return row ? { status: row.status, frames: row.frames ?? [] } : undefined;
}

/** Timeline frames after `from` (exclusive), oldest first; `kind` narrows to one kind (logs). */
export async function framesOfRun(
  db: Database,
  workspaceId: string,
  runId: string,
  f: { from: number; limit: number; kind?: string },
): Promise<FrameRow[]> {
  const params: unknown[] = [runId, workspaceId, f.from, f.limit];
  let kind = '';
  if (f.kind) {
    params.push(f.kind);
    kind = 'and kind = $5';
  }
  // The primary key (run_id, seq) serves this as a range scan.
  return db.query<FrameRow>(
    `select seq, kind, payload, ts from scheduler.frames
      where run_id = $1 and workspace_id = $2 and seq > $3 ${kind}
      order by seq limit $4`,
    params,
  );
}

export const RUN_SORTS = ['started', 'workflow', 'status', 'app', 'duration'] as const;
export type RunSort = (typeof RUN_SORTS)[number];

/** The sort column of each sort; `started` is the keyset tail (created_at, id) alone. */
const SORT_SQL: Record<RunSort, { expr: string | null; cast: string }> = {
  started: { expr: null, cast: '' },
  workflow: { expr: 'workflow', cast: '::text' },
  status: { expr: 'status', cast: '::text' },
  app: { expr: 'app', cast: '::text' },
  duration: { expr: DURATION_SQL, cast: '::bigint' },
};

/** A position in a sorted list: the last row of the previous page. */
export interface KeysetPosition {
  /** Sort value (absent for `started`). */
  key?: string | number;
  /** created_at, RFC 3339 with microseconds. */
  createdAt: string;
  id: string;
}

export interface RunFilter {
  app?: string;
  /** The workflow's exact name. */
  workflow?: string;
  /** One status; `running` also matches waiting (SPEC GET /runs). */
  status?: string;
  /** trigger_kind: event or cron. */
  runType?: string;
  eventId?: string;
  replayOf?: string;
  /** Runs carrying every one of these tags. */
  tags?: string[];
  /** Case-insensitive substring of workflow, id or app; with `deep`, also of input, result and error. */
  q?: string;
  deep?: boolean;
  /** RFC 3339: runs started at or after it. */
  since?: string;
  /** RFC 3339: runs started before it. */
  until?: string;
}

export interface RunListQuery extends RunFilter {
  sort: RunSort;
  dir: 'asc' | 'desc';
  limit: number;
  after?: KeysetPosition;
}

/** Escape LIKE wildcards so q is matched literally. */
const likePattern = (q: string): string => `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** The where clause of a run filter (GET /runs, the stats, the bulk actions). */
export function runsWhere(workspaceId: string, f: RunFilter): { where: string[]; params: unknown[] } {
  const params: unknown[] = [workspaceId];
  const where = ['workspace_id = $1'];
  const add = (clause: (p: string) => string, v: unknown) => {
    params.push(v);
    where.push(clause(`$${params.length}`));
  };
  if (f.app !== undefined) add((p) => `app = ${p}`, f.app);
  if (f.workflow !== undefined) add((p) => `workflow = ${p}`, f.workflow);
  if (f.status === 'running') where.push(`status in ('running', 'waiting')`);
  else if (f.status !== undefined) add((p) => `status = ${p}`, f.status);
  if (f.runType !== undefined) add((p) => `trigger_kind = ${p}`, f.runType);
  if (f.eventId !== undefined) add((p) => `event_id = ${p}`, f.eventId);
  if (f.replayOf !== undefined) add((p) => `replay_of = ${p}`, f.replayOf);
  // `tags is not null` lets the planner use runs_tags (a partial index).
  if (f.tags !== undefined) add((p) => `tags is not null and tags @> ${p}::text[]`, f.tags);
  if (f.since !== undefined) add((p) => `created_at >= ${p}::timestamptz`, f.since);
  if (f.until !== undefined) add((p) => `created_at < ${p}::timestamptz`, f.until);
  if (f.q !== undefined) {
    // SPEC: deep widens q to the run's JSON, bounded by the other filters (a scan of what they leave).
    add(
      (p) =>
        f.deep
          ? `(workflow ilike ${p} or id ilike ${p} or app ilike ${p} or input ilike ${p} or result ilike ${p} or error::text ilike ${p})`
          : `(workflow ilike ${p} or id ilike ${p} or app ilike ${p})`,
      likePattern(f.q),
    );
  }
  return { where, params };
}

/**
 * One page of runs, keyset-paged: the order is (sort value, created_at, id)
 * all in `dir`, and `after` is the previous page's last row, so rows that
 * arrive meanwhile never shift the page (SPEC GET /runs rule 1). Every sort
 * has an index of the same shape (workspace_id, sort value, created_at, id),
 * scanned forwards or backwards.
 */
export async function listRuns(db: Database, workspaceId: string, q: RunListQuery): Promise<RunSummaryRow[]> {
  const { text, params } = listRunsSql(workspaceId, q);
  return db.query<RunSummaryRow>(text, params);
}

/** The statement behind {@link listRuns} (EXPLAIN uses it in tests and benches). */
export function listRunsSql(workspaceId: string, q: RunListQuery): { text: string; params: unknown[] } {
  const { where, params } = runsWhere(workspaceId, q);
  const s = SORT_SQL[q.sort];
  const dir = q.dir === 'asc' ? 'asc' : 'desc';
  const cmp = dir === 'asc' ? '>' : '<';
  if (q.after) {
    if (s.expr === null) {
      params.push(q.after.createdAt, q.after.id);
      where.push(`(created_at, id) ${cmp} ($${params.length - 1}::timestamptz, $${params.length}::text)`);
    } else {
      params.push(q.after.key, q.after.createdAt, q.after.id);
      const n = params.length;
      where.push(`(${s.expr}, created_at, id) ${cmp} ($${n - 2}${s.cast}, $${n - 1}::timestamptz, $${n}::text)`);
    }
  }
  params.push(q.limit);
  // drizzle's .desc() indexes are DESC NULLS LAST; scanned backwards they give ASC NULLS FIRST. The
  // columns are never null, so naming the null order changes no result, only lets the planner use them.
  const o = dir === 'asc' ? 'asc nulls first' : 'desc nulls last';
  const order = s.expr === null ? `created_at ${o}, id ${o}` : `${s.expr} ${o}, created_at ${o}, id ${o}`;
  return {
    text: `select ${SUMMARY_COLUMNS} from scheduler.runs where ${where.join(' and ')} order by ${order} limit $${params.length}`,
    params,
  };
}

export interface RunStatsRow {
  total: number;
  active: number;
  succeeded: number;
  failed: number;
}

/** SPEC Run stats: one pass over the workspace's runs (narrowed by app and since). */
export async function runStats(db: Database, workspaceId: string, f: { app?: string; since?: string }): Promise<RunStatsRow> {
  const { where, params } = runsWhere(workspaceId, { app: f.app, since: f.since });
  const rows = await db.query<{ total: string | number; active: string | number; succeeded: string | number; failed: string | number }>(
    `select count(*) as total,
            count(*) filter (where status in ('queued', 'running', 'waiting')) as active,
            count(*) filter (where status = 'succeeded') as succeeded,
            count(*) filter (where status = 'failed') as failed
       from scheduler.runs where ${where.join(' and ')}`,
    params,
  );
  const r = rows[0];
  return {
    total: Number(r?.total ?? 0),
    active: Number(r?.active ?? 0),
    succeeded: Number(r?.succeeded ?? 0),
    failed: Number(r?.failed ?? 0),
  };
}
