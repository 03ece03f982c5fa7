import type { Database } from '@dws/db';
import { invalid, notFound, tagsOfQuery } from '@dws/protocol';
import type { ApiHandler } from '@dws/runtime';
import {
  framesOfRun,
  listRuns,
  parkedOnApproval,
  runById,
  runStats,
  runStatus,
  scoresOfRun,
  sessionsOf,
  stepsOfRun,
  workspaceUsage,
  timelinePage,
  RUN_SORTS,
  type FrameRow,
  type KeysetPosition,
  type RunSort,
  type RunSummaryRow,
  type UsageTotals,
} from '../store/reads.js';
import { waitFacts } from '../store/wait-facts.js';
import { waitingFor } from '../domain/waiting-for.js';

const iso = (d: Date | string | null): string | undefined => (d === null ? undefined : (d instanceof Date ? d : new Date(d)).toISOString());
const json = (text: string | null): unknown => (text === null ? undefined : JSON.parse(text));

export const RUN_STATUSES = ['queued', 'running', 'waiting', 'paused', 'succeeded', 'failed', 'cancelled'] as const;
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
const RUN_TYPES = ['event', 'cron'] as const;
const MAX_TEXT = 256;

/** SPEC Limits: cursor pages 1-200 (default 30), log pages 1-1000 (default 100); over the max is clamped. */
const PAGE = { runs: { def: 30, max: 200 }, logs: { def: 100, max: 1000 }, timeline: { def: 1000, max: 1000 }, sessions: { def: 100, max: 500 } };

/** The run record of the API (SPEC Run, plus the fields a user needs); `input` and `result` only on the single read. */
export function runRecord(r: RunSummaryRow & { input?: string; result?: string | null; usage?: UsageTotals | null }, full: boolean): Record<string, unknown> {
  const started = r.started_at ? new Date(r.started_at).getTime() : undefined;
  const ended = r.ended_at ? new Date(r.ended_at).getTime() : undefined;
  return {
    id: r.id,
    status: r.status,
    workflow: r.workflow,
    app: r.app,
    runner: r.runner || undefined,
    triggerKind: r.trigger_kind,
    eventId: r.event_id ?? undefined,
    eventName: r.event_name ?? undefined,
    replayOf: r.replay_of ?? undefined,
    session: r.session ?? undefined,
    tags: r.tags ?? [],
    attempt: r.attempt,
    stepCount: r.step_count,
    createdAt: iso(r.created_at),
    startedAt: iso(r.started_at),
    endedAt: iso(r.ended_at),
    durationMs: started !== undefined && ended !== undefined ? ended - started : undefined,
    error: r.error ?? undefined,
    ...(r.needs_attention ? { needsAttention: true } : {}),
    ...(full ? { input: json(r.input ?? null), result: json(r.result ?? null) } : {}),
    ...('usage' in r && r.usage ? { usage: usageRecord(r.usage) } : {}),
  };
}

/** UsageTotals as the API shows them (cost only when some call was priced). */
function usageRecord(u: UsageTotals): Record<string, number> {
  return { calls: u.calls, tokensIn: Number(u.tokensIn), tokensOut: Number(u.tokensOut), ...(u.cost !== null ? { cost: Number(u.cost) } : {}) };
}

/** A timeline frame as the SSE stream sends it: kind, seq, ts, runId, then the kind's fields. */
export function frameRecord(runId: string, f: FrameRow): Record<string, unknown> {
  return { ...f.payload, kind: f.kind, seq: f.seq, ts: iso(f.ts), runId };
}

// ---- query parsing: the gateway validates too, but a service never trusts its caller's types.

function text(query: Record<string, unknown>, name: string): string | undefined {
  const v = query[name];
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string') throw invalid(`invalid_${name.toLowerCase()}`, `${name} must be a single string.`);
  if (v.length > MAX_TEXT) throw invalid(`invalid_${name.toLowerCase()}`, `${name} must be at most ${MAX_TEXT} characters.`);
  // Postgres text cannot hold NUL (the query would fail): such a value matches nothing anyway.
  if (v.includes('\u0000')) throw invalid(`invalid_${name.toLowerCase()}`, `${name} must not contain NUL characters.`);
  return v;
}

function oneOf<T extends string>(query: Record<string, unknown>, name: string, allowed: readonly T[]): T | undefined {
  const v = text(query, name);
  if (v === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(v)) throw invalid(`invalid_${name.toLowerCase()}`, `${name} must be one of ${allowed.join(', ')}.`);
  return v as T;
}

function integer(query: Record<string, unknown>, name: string, min: number): number | undefined {
  const v = query[name];
  if (v === undefined || v === '') return undefined;
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^-?\d{1,15}$/.test(v.trim()) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min) throw invalid(`invalid_${name.toLowerCase()}`, `${name} must be an integer of at least ${min}.`);
  return n;
}

function pageSize(query: Record<string, unknown>, p: { def: number; max: number }): number {
  return Math.min(p.max, integer(query, 'limit', 1) ?? p.def);
}

/** RFC 3339 in (`since`, `until`), a canonical UTC timestamp out (so Postgres never sees a value it cannot cast). */
export function instant(query: Record<string, unknown>, name: 'since' | 'until' = 'since'): string | undefined {
  const v = text(query, name);
  if (v === undefined) return undefined;
  const ok = /^[1-9]\d{3}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i.test(v) && !Number.isNaN(Date.parse(v));
  if (!ok) throw invalid(`invalid_${name}`, `${name} must be an RFC 3339 timestamp, e.g. 2024-05-01T00:00:00Z.`);
  return new Date(v).toISOString();
}

// ---- keyset cursors

interface Cursor extends KeysetPosition {
  sort: RunSort;
  dir: 'asc' | 'desc';
}

const CREATED_KEY = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** Opaque to clients: base64url JSON of the sort, the dir and the last row's position. */
export function encodeCursor(sort: RunSort, dir: 'asc' | 'desc', r: RunSummaryRow): string {
  const key = sort === 'started' ? undefined : sort === 'duration' ? Number(r.duration_key) : r[sort === 'workflow' ? 'workflow' : sort];
  return Buffer.from(JSON.stringify({ s: sort, d: dir, k: key, c: r.created_key, i: r.id })).toString('base64url');
}

/** SPEC GET /runs rule 2: a cursor is tied to the sort and dir it was issued for. */
export function decodeCursor(raw: unknown, sort: RunSort, dir: 'asc' | 'desc'): Cursor | undefined {
  if (raw === undefined || raw === '') return undefined;
  let c: { s?: unknown; d?: unknown; k?: unknown; c?: unknown; i?: unknown };
  try {
    if (typeof raw !== 'string' || raw.length > 2048) throw new Error('shape');
    c = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as typeof c;
    if (typeof c !== 'object' || c === null) throw new Error('shape');
  } catch {
    throw invalid('invalid_cursor', 'cursor is not a cursor issued by GET /runs.');
  }
  if (c.s !== sort || c.d !== dir) {
    throw invalid('invalid_cursor', `cursor was issued for sort=${String(c.s)} dir=${String(c.d)}; request the first page again without a cursor.`);
  }
  const keyOk =
    sort === 'started' ? c.k === undefined : sort === 'duration' ? Number.isSafeInteger(c.k) : typeof c.k === 'string' && c.k.length <= 1024;
  const textOk = (v: unknown): v is string => typeof v === 'string' && v.length <= 1024 && !v.includes('\u0000');
  if (!keyOk || (typeof c.k === 'string' && !textOk(c.k)) || typeof c.c !== 'string' || !CREATED_KEY.test(c.c) || Number.isNaN(Date.parse(c.c)) || !textOk(c.i)) {
    throw invalid('invalid_cursor', 'cursor is not a cursor issued by GET /runs.');
  }
  return { sort, dir, key: c.k as string | number | undefined, createdAt: c.c, id: c.i };
}

/**
 * The read side of the scheduler's API: run list, single run, steps, logs,
 * stats, and the timeline backlog that the gateway's SSE stream merges with
 * the live frames. Every query filters on the caller's workspace, so another
 * workspace's run id reads as 404.
 */
export function runReadsApi(db: Database): Record<string, ApiHandler> {
  /** An id Postgres could not even compare (NUL, absurd length) names no run. */
  const plausible = (id: string | undefined): id is string => !!id && id.length <= MAX_TEXT && !id.includes('\u0000');
  const mustExist = async (workspaceId: string, id: string | undefined) => {
    const run = plausible(id) ? await runStatus(db, workspaceId, id) : undefined;
    if (!run) throw notFound('run');
    return run;
  };

  return {
    async 'runs.get'({ caller, params }) {
      const run = plausible(params.id) ? await runById(db, caller.workspaceId, params.id) : undefined;
      if (!run) throw notFound('run');
      if (run.status === 'waiting') run.needs_attention = (await parkedOnApproval(db, [run.id])).has(run.id);
      const body = runRecord(run, true);
      // "Why is it not moving?": only a run that can still move has an answer (a second, small read).
      if (!TERMINAL.has(run.status)) {
        const facts = await waitFacts(db, caller.workspaceId, run.id);
        const w = facts && waitingFor(facts.run, facts.steps, Date.now());
        if (w) body.waitingFor = w;
      }
      return { body };
    },

    async 'runs.steps'({ caller, params }) {
      await mustExist(caller.workspaceId, params.id);
      const rows = await stepsOfRun(db, caller.workspaceId, params.id!);
      return {
        body: rows.map((s) => ({
          id: s.step_id,
          name: s.name,
          op: s.op,
          index: s.idx,
          status: s.status,
          attempts: s.attempts,
          input: json(s.input),
          output: json(s.data),
          error: s.error ?? undefined,
          usage: s.usage ?? undefined,
          childRunId: s.child_run_id ?? undefined,
          startedAt: iso(s.created_at),
          endedAt: iso(s.ended_at),
        })),
      };
    },

    /** GET /usage: the workspace's model usage since a time (default: the start of the current UTC month), in total and per model. */
    async 'usage.get'({ caller, query }) {
      const now = new Date();
      const from = instant(query) ?? new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString();
      const u = await workspaceUsage(db, caller.workspaceId, from);
      return { body: { since: from, ...usageRecord(u.total), models: u.models.map((m) => ({ model: m.model, ...usageRecord(m) })) } };
    },

    /** GET /sessions (CONTRACT): sessions newest first (limit 100 by default, at most 500), with run counts, usage and scores. */
    async 'sessions.list'({ caller, query }) {
      const rows = await sessionsOf(db, caller.workspaceId, pageSize(query, PAGE.sessions));
      return {
        body: rows.map((r) => ({
          id: r.id,
          runs: r.runs,
          firstSeenAt: iso(r.first_seen_at),
          lastSeenAt: iso(r.last_seen_at),
          usage: usageRecord(r.usage),
          scores: r.scores,
        })),
      };
    },

    /** GET /runs/{id}/scores (CONTRACT): the run's scores, unpaged; what else the runner attached to a score rides along. */
    async 'runs.scores'({ caller, params }) {
      await mustExist(caller.workspaceId, params.id);
      const rows = await scoresOfRun(db, caller.workspaceId, params.id!);
      return {
        body: rows.map((r) => ({ ...r.data, id: r.id, runId: params.id, step: r.step, name: r.name, value: r.value, createdAt: iso(r.created_at) })),
      };
    },

    /** SPEC GET /runs/{id}/logs: log frames after `from` (exclusive), oldest first. */
    async 'runs.logs'({ caller, params, query }) {
      await mustExist(caller.workspaceId, params.id);
      const rows = await framesOfRun(db, caller.workspaceId, params.id!, {
        from: integer(query, 'from', 0) ?? 0,
        limit: pageSize(query, PAGE.logs),
        kind: 'log',
      });
      return {
        body: rows.map((f) => ({
          seq: f.seq,
          ts: iso(f.ts),
          level: f.payload.level,
          message: f.payload.message,
          fields: f.payload.fields ?? undefined,
          scope: f.payload.scope,
          attempt: f.payload.attempt,
        })),
      };
    },

    /**
     * Not a public route: the backlog of the run stream. Frames after `from`
     * and the run's status, so the gateway knows when the stream may end.
     */
    async 'runs.timeline'({ caller, params, query }) {
      const limit = pageSize(query, PAGE.timeline);
      const from = integer(query, 'from', 0) ?? 0;
      const page = plausible(params.id) ? await timelinePage(db, caller.workspaceId, params.id, { from, limit }) : undefined;
      if (!page) throw notFound('run');
      // Status and frames from one snapshot: a terminal status here means every frame is in the page or after it.
      const { status, frames } = page;
      return {
        body: { status, terminal: TERMINAL.has(status), more: frames.length === limit, frames: frames.map((f) => frameRecord(params.id!, f)) },
      };
    },

    async 'runs.stats'({ caller, query }) {
      const s = await runStats(db, caller.workspaceId, { app: text(query, 'app'), since: instant(query) });
      const finished = s.succeeded + s.failed;
      // SPEC: a whole-number percent, 100 when nothing has finished. Floored, so 100 means no failure at all.
      const successRate = finished === 0 ? 100 : Math.floor((s.succeeded * 100) / finished);
      return { body: { ...s, successRate } };
    },

    async 'runs.list'({ caller, query }) {
      const sort = oneOf(query, 'sort', RUN_SORTS) ?? 'started';
      const dir = oneOf(query, 'dir', ['asc', 'desc'] as const) ?? 'desc';
      const limit = pageSize(query, PAGE.runs);
      const q = text(query, 'q');
      const rows = await listRuns(db, caller.workspaceId, {
        app: text(query, 'app'),
        workflow: text(query, 'workflow'),
        status: oneOf(query, 'status', RUN_STATUSES),
        runType: oneOf(query, 'runType', RUN_TYPES),
        eventId: text(query, 'eventId'),
        replayOf: text(query, 'replayOf'),
        tags: tagsOfQuery(query.tag),
        q,
        deep: q !== undefined && (query.deep === '1' || query.deep === 'true' || query.deep === 1 || query.deep === true),
        since: instant(query),
        until: instant(query, 'until'),
        sort,
        dir,
        limit: limit + 1,
        after: decodeCursor(query.cursor, sort, dir),
      });
      const page = rows.slice(0, limit);
      const headers: Record<string, string> = {};
      // SPEC: X-Next-Cursor only when more rows exist; absent on the last page.
      if (rows.length > limit) headers['x-next-cursor'] = encodeCursor(sort, dir, page[page.length - 1]!);
      const attention = await parkedOnApproval(db, page.filter((r) => r.status === 'waiting').map((r) => r.id));
      return { body: page.map((r) => runRecord({ ...r, needs_attention: attention.has(r.id) }, false)), headers };
    },
  };
}
