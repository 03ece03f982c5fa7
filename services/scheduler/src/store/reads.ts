import type { Database } from '@dws/db';

/** Columns of a run in a list: no input or result (they may be large; only the single read needs them). */
export interface RunSummaryRow {
  id: string;
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
}

export interface RunRow extends RunSummaryRow {
  input: string;
  result: string | null;
}

/**
 * Duration in ms as a sortable, never-null value: -1 for a run without both
 * ends. The lead's expression index `runs_ws_duration` is on exactly this
 * expression, so keep them identical.
 */
export const DURATION_SQL = `coalesce((extract(epoch from (ended_at - started_at)) * 1000)::bigint, -1)`;

const CREATED_KEY_SQL = `to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

const SUMMARY_COLUMNS = `id, workspace_id, workflow, app, runner, status, trigger_kind, event_id, event_name, replay_of,
  error, attempt, step_count, created_at, started_at, ended_at, ${CREATED_KEY_SQL} as created_key, ${DURATION_SQL} as duration_key`;

export async function runById(db: Database, workspaceId: string, id: string): Promise<RunRow | undefined> {
  const rows = await db.query<RunRow>(`select ${SUMMARY_COLUMNS}, input, result from scheduler.runs where workspace_id = $1 and id = $2`, [
    workspaceId,
    id,
  ]);
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
  created_at: Date | string;
  ended_at: Date | string | null;
}

/** A run's steps in discovery order (SPEC: unpaged). */
export async function stepsOfRun(db: Database, workspaceId: string, runId: string): Promise<StepRow[]> {
  return db.query<StepRow>(
    `select step_id, name, op, idx, status, data, error, input, attempts, created_at, ended_at
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
  /** One status; `running` also matches waiting (SPEC GET /runs). */
  status?: string;
  /** trigger_kind: event or cron. */
  runType?: string;
  eventId?: string;
  replayOf?: string;
  /** Case-insensitive substring of workflow, id or app; with `deep`, also of input, result and error. */
  q?: string;
  deep?: boolean;
  /** RFC 3339: runs started at or after it. */
  since?: string;
}

export interface RunListQuery extends RunFilter {
  sort: RunSort;
  dir: 'asc' | 'desc';
  limit: number;
  after?: KeysetPosition;
}

/** Escape LIKE wildcards so q is matched literally. */
const likePattern = (q: string): string => `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

function whereOf(workspaceId: string, f: RunFilter): { where: string[]; params: unknown[] } {
  const params: unknown[] = [workspaceId];
  const where = ['workspace_id = $1'];
  const add = (clause: (p: string) => string, v: unknown) => {
    params.push(v);
    where.push(clause(`$${params.length}`));
  };
  if (f.app !== undefined) add((p) => `app = ${p}`, f.app);
  if (f.status === 'running') where.push(`status in ('running', 'waiting')`);
  else if (f.status !== undefined) add((p) => `status = ${p}`, f.status);
  if (f.runType !== undefined) add((p) => `trigger_kind = ${p}`, f.runType);
  if (f.eventId !== undefined) add((p) => `event_id = ${p}`, f.eventId);
  if (f.replayOf !== undefined) add((p) => `replay_of = ${p}`, f.replayOf);
  if (f.since !== undefined) add((p) => `created_at >= ${p}::timestamptz`, f.since);
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
  const { where, params } = whereOf(workspaceId, q);
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
  const { where, params } = whereOf(workspaceId, { app: f.app, since: f.since });
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
