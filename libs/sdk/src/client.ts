import { randomUUID } from 'node:crypto';
import { fromEnv } from './env.js';

/**
 * A client of the service's REST API (SPEC "Endpoints"): send events, read,
 * follow and control runs, decide approvals. Calls that are safe to repeat
 * are retried through transient failures (a connection refused or reset, a
 * timeout, 502/503/504); see `createClient`.
 */

export type RunStatus = 'queued' | 'running' | 'waiting' | 'paused' | 'succeeded' | 'failed' | 'cancelled';

/** A run as GET /runs lists it. */
export interface Run {
  id: string;
  status: RunStatus;
  workflow: string;
  app: string;
  /** Pinned runner id; absent for anycast. */
  runner?: string;
  triggerKind: string;
  eventId?: string;
  eventName?: string;
  /** The source run of a replay or retry-from-step. */
  replayOf?: string;
  session?: string;
  /** Its triggering event's tags (its batch's), or its source's for a replay, child or on-failure run. */
  tags: string[];
  attempt: number;
  stepCount: number;
  createdAt: string;
  startedAt?: string;
  endedAt?: string;
  durationMs?: number;
  error?: { message: string; stack?: string };
  /** Parked on an open approval. */
  needsAttention?: true;
}

/** One run as GET /runs/{id} reads it. */
export interface RunDetail<Result = unknown> extends Run {
  input: unknown;
  result?: Result;
  /** Why a run that has not ended is not moving (`kind`: paused, sleep, event, concurrency, ...). */
  waitingFor?: { kind: string; [field: string]: unknown };
  usage?: { calls: number; tokensIn: number; tokensOut: number; cost?: number };
}

export interface Step {
  id: string;
  name: string;
  op: string;
  index: number;
  status: string;
  attempts: number;
  input?: unknown;
  output?: unknown;
  error?: { message: string; stack?: string };
  childRunId?: string;
  startedAt: string;
  [field: string]: unknown;
}

/** A run's log line (SPEC "Run log line"). */
export interface LogLine {
  seq: number;
  ts: string;
  level: 'debug' | 'info' | 'warn' | 'error';
  message: string;
  fields?: Record<string, unknown>;
  scope: string;
  attempt: number;
}

/** A frame of a run's timeline (SPEC "Timeline frame"). */
export type TimelineFrame = { seq: number; ts: string; runId: string } & (
  | { kind: 'run_status'; status: RunStatus; currentStepName?: string; attempt?: number }
  | { kind: 'step_status'; name: string; status: string; attempt: number; index?: number; error?: { message: string } }
  | { kind: 'log'; level: 'debug' | 'info' | 'warn' | 'error'; message: string; fields?: Record<string, unknown>; scope: string; attempt: number }
);

/** An event for POST /events (SPEC "Events"). */
export interface SendEvent {
  name: string;
  data?: unknown;
  /** Scope to one app's triggers; omitted: every app's. */
  app?: string;
  /** A repeat within 24 h (per app) is dropped: the client retries a send only when every event has one. */
  dedupeId?: string;
  /** Pin the runs it starts to this runner. */
  runner?: string;
  targetApp?: string;
  session?: string;
  /** Tags of the runs it starts (at most 10, each 1-128 characters: `tenant:acme`); `runs.list({ tags })` finds them. */
  tags?: string[];
  /**
   * Take the event in later: ms, text like "30s", "2h", "1d", or a Date (at
   * most a year ahead). Until then it wakes nothing and starts nothing, and
   * `events.cancel(id)` drops it; then it is taken in as though sent then.
   */
  delay?: number | string | Date;
}

/** What POST /events answered for one event. */
export interface SendResult {
  id: string;
  /** Set when exactly one workflow matched. */
  runId?: string;
  woke: number;
  triggered: { workflow: string; app: string; runId: string; [gate: string]: unknown }[];
  skipped: boolean;
  dropped: boolean;
  debounced: boolean;
  batched: boolean;
  deduped: boolean;
  suspended: boolean;
  /** Sent with a `delay`: stored until `scheduledFor`, nothing woken or started yet. */
  scheduled?: boolean;
  scheduledFor?: string;
}

/** A schedule to make (POST /schedules). */
export interface ScheduleInput {
  app: string;
  workflow: string;
  /** Five fields, or six with seconds first ("0 9 * * *"); UTC unless `timezone`. */
  cron: string;
  timezone?: string;
  data?: unknown;
  /** Your id for it (a tenant, a user): making it again with this id replaces it (and makes `create` safe to retry); a paused one stays paused. */
  externalId?: string;
  /** Tags of the runs it starts. */
  tags?: string[];
}

/** A schedule made through the API. */
export interface ScheduleRecord {
  id: string;
  app: string;
  workflow: string;
  cron: string;
  timezone: string;
  data: unknown;
  externalId?: string;
  tags: string[];
  /** Paused: when, and by whom; it has no `nextRunAt` until resumed. */
  paused?: { at: string; by: string };
  nextRunAt?: string;
  lastRunAt?: string;
  createdBy: string;
  createdAt: string;
  updatedAt: string;
}

/** A registered workflow (GET /workflows). */
export interface WorkflowRecord {
  name: string;
  app: string;
  triggers: Record<string, unknown>[];
  retry: unknown;
  scheduled: boolean;
  schedules: string[];
  /** Paused by an operator: when, by whom, and whether its events are held for its resume. */
  paused?: { at: string; by: string; hold?: true };
  [field: string]: unknown;
}

export interface RunListQuery {
  app?: string;
  workflow?: string;
  status?: RunStatus;
  runType?: 'event' | 'cron';
  eventId?: string;
  replayOf?: string;
  /** Runs carrying every one of these tags. */
  tags?: string[];
  q?: string;
  /** RFC 3339, or a Date. */
  since?: string | Date;
  until?: string | Date;
  sort?: 'started' | 'workflow' | 'status' | 'app' | 'duration';
  dir?: 'asc' | 'desc';
  limit?: number;
  /** From the previous page's `nextCursor`. */
  cursor?: string;
}

/** The runs a bulk action touches: every field given must hold (at least one). */
export interface BulkRunFilter {
  app?: string;
  workflow?: string;
  status?: RunStatus;
  runType?: 'event' | 'cron';
  /** Runs carrying every one of these tags. */
  tags?: string[];
  /** RFC 3339, or a Date. */
  since?: string | Date;
  until?: string | Date;
}

/** What a bulk action did: at most 1,000 runs a call, newest first (`capped`: call again). */
export interface BulkResult {
  matched: number;
  skipped: number;
  failed: number;
  capped: boolean;
}

export interface Approval {
  id: string;
  runId: string;
  status: 'pending' | 'escalated' | 'approved' | 'denied' | 'cancelled';
  [field: string]: unknown;
}

export interface ApprovalDecisionInput {
  status: 'approved' | 'denied';
  /** Edited tool arguments (approve only). */
  args?: unknown;
  response?: string;
}

export interface ClientOptions {
  /** Service base URL including `/v1`, e.g. `http://127.0.0.1:8288/v1`. @default `SERVICE_URL` */
  url?: string;
  /** @default `SERVICE_API_KEY` */
  apiKey?: string;
  /** Tries of a call that is safe to repeat, through transient failures. @default 4 */
  maxAttempts?: number;
  /** Per request (`wait`'s calls get this on top of the time the service holds them; none for `stream`). @default 30_000 */
  timeoutMs?: number;
  /** @default process.env */
  env?: Record<string, string | undefined>;
}

/** The service's error body (`{ error: { code, message } }`) of a 4xx or 5xx, or a failure to reach it (`status` 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** Checked by shape, not class: module copies lose class identity. */
export function isApiError(err: unknown): err is ApiError {
  return err instanceof Error && err.name === 'ApiError' && typeof (err as ApiError).code === 'string';
}

const TERMINAL = new Set<string>(['succeeded', 'failed', 'cancelled']);
const TRANSIENT = new Set([502, 503, 504]);
/** The longest one GET /runs/{id}/wait is held (the service's ceiling). */
const MAX_WAIT_MS = 60_000;
const isoOf = (t: string | Date | undefined) => (t instanceof Date ? t.toISOString() : t);
const bulkBody = <F extends BulkRunFilter>(f: F) => ({ ...f, since: isoOf(f.since), until: isoOf(f.until) });
const BACKOFF_MS = 100;
const BACKOFF_MAX_MS = 2000;

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(t), reject(signal.reason)), { once: true });
  });
const backoff = (attempt: number) => Math.min(BACKOFF_MAX_MS, BACKOFF_MS * 2 ** attempt) * (0.5 + Math.random() / 2);

interface Call {
  body?: unknown;
  query?: Record<string, string | number | string[] | undefined>;
  headers?: Record<string, string>;
  /** Safe to send again after a transient failure. */
  retry: boolean;
  /** A stream: open as long as the run is, so no `timeoutMs`. */
  open?: boolean;
  /** This call's own time limit instead of the client's `timeoutMs` (a wait held by the service). */
  timeoutMs?: number;
}

export type Client = ReturnType<typeof createClient>;

/**
 * A client of the REST API. What it retries, up to `maxAttempts` with
 * backoff, after a connection failure, a timeout or 502/503/504: every read;
 * `pause` (idempotent); `replay` and `retryFromStep`, which send an
 * `Idempotency-Key` (yours, or one drawn per call) so a retry is the same
 * run; `send` when every event has a `dedupeId` or the call an
 * `idempotencyKey`. Not `cancel`, `resume` or
 * `approvals.decide`: repeated after a lost success they answer 409. Any
 * other 4xx or 5xx throws `ApiError` at once.
 */
export function createClient(options: ClientOptions = {}) {
  const env = options.env ?? process.env;
  const url = options.url ?? fromEnv(env, 'SERVICE_URL');
  const apiKey = options.apiKey ?? fromEnv(env, 'SERVICE_API_KEY');
  if (!url) throw new Error('createClient: the service URL is required: pass url or set SERVICE_URL.');
  if (!apiKey) throw new Error('createClient: an API key is required: pass apiKey or set SERVICE_API_KEY.');
  const base = url.endsWith('/') ? url : `${url}/`;
  const maxAttempts = Math.max(1, options.maxAttempts ?? 4);
  const timeoutMs = options.timeoutMs ?? 30_000;

  const urlOf = (path: string, query?: Call['query']) => {
    const u = new URL(path.replace(/^\//, ''), base);
    for (const [k, v] of Object.entries(query ?? {})) {
      if (Array.isArray(v)) for (const item of v) u.searchParams.append(k, item);
      else if (v !== undefined) u.searchParams.set(k, String(v));
    }
    return u;
  };

  /** One request, its error body thrown as ApiError; a failure to get an answer is status 0. */
  const once = async (method: string, path: string, call: Call, signal?: AbortSignal): Promise<Response> => {
    const headers: Record<string, string> = { authorization: `Bearer ${apiKey}`, ...call.headers };
    if (call.body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(urlOf(path, call.query), {
        method,
        headers,
        body: call.body === undefined ? undefined : JSON.stringify(call.body),
        signal: signal ?? (call.open ? undefined : AbortSignal.timeout(call.timeoutMs ?? timeoutMs)),
      });
    } catch (err) {
      if (signal?.aborted) throw err;
      throw new ApiError(0, 'unreachable', `${method} ${path}: no answer: ${(err as Error).message}`);
    }
    if (res.ok) return res;
    const text = await res.text().catch(() => '');
    let error: { code?: unknown; message?: unknown } | undefined;
    try {
      error = (JSON.parse(text) as { error?: typeof error }).error;
    } catch {
      /* not the error body: a proxy's page, say */
    }
    throw new ApiError(
      res.status,
      typeof error?.code === 'string' ? error.code : `http_${res.status}`,
      typeof error?.message === 'string' ? error.message : `${method} ${path}: HTTP ${res.status}`,
    );
  };

  const request = async (method: string, path: string, call: Call): Promise<Response> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await once(method, path, call);
      } catch (err) {
        const transient = isApiError(err) && (err.status === 0 || TRANSIENT.has(err.status));
        if (!call.retry || !transient || attempt >= maxAttempts) throw err;
        await sleep(backoff(attempt - 1));
      }
    }
  };
  const json = async <T>(method: string, path: string, call: Call): Promise<T> => {
    const res = await request(method, path, call);
    const text = await res.text();
    return (text ? JSON.parse(text) : undefined) as T;
  };
  const read = <T>(path: string, query?: Call['query']) => json<T>('GET', path, { query, retry: true });
  const id = (runId: string) => `runs/${encodeURIComponent(runId)}`;
  const keyed = (key: string | undefined) => ({ 'idempotency-key': key ?? randomUUID() });
  /** A POST /events' Idempotency-Key, taken by the service as its events' dedupeIds (a batch's i-th `<key>:<i>`). */
  const eventKey = (key: string | undefined) => (key === undefined ? {} : { headers: { 'idempotency-key': key } });

  /**
   * A run's timeline from after `from`, live until the run ends. A dropped
   * stream is resumed after the last frame seen, so no frame is lost or
   * repeated; `maxAttempts` failures in a row end it with the last error.
   */
  async function* stream(runId: string, opts: { from?: number; signal?: AbortSignal } = {}): AsyncGenerator<TimelineFrame> {
    let from = opts.from ?? 0;
    for (let failures = 0; ; ) {
      try {
        const res = await once('GET', `${id(runId)}/stream`, { query: { from }, headers: { accept: 'text/event-stream' }, retry: true, open: true }, opts.signal);
        for await (const frame of sseFrames(res)) {
          failures = 0;
          from = frame.seq;
          yield frame;
          // A run's timeline ends with its terminal status.
          if (frame.kind === 'run_status' && TERMINAL.has(frame.status)) return;
        }
      } catch (err) {
        if (opts.signal?.aborted) throw err;
        const transient = isApiError(err) ? err.status === 0 || TRANSIENT.has(err.status) : true;
        if (!transient || ++failures >= maxAttempts) throw err;
      }
      await sleep(backoff(failures), opts.signal);
    }
  }

  /** A page of runs, newest first by default; `nextCursor` asks for the next. */
  const list = async (query: RunListQuery = {}): Promise<{ runs: Run[]; nextCursor?: string }> => {
    const { since, until, tags, ...rest } = query;
    const res = await request('GET', 'runs', { query: { ...rest, tag: tags, since: isoOf(since), until: isoOf(until) }, retry: true });
    const cursor = res.headers.get('x-next-cursor');
    return { runs: (await res.json()) as Run[], ...(cursor ? { nextCursor: cursor } : {}) };
  };

  return {
    /** POST /events: one event; with `idempotencyKey` (its dedupeId, sent as the header) retried as one with a dedupeId is. */
    send: (event: SendEvent, opts: { idempotencyKey?: string } = {}) =>
      json<SendResult>('POST', 'events', { body: event, ...eventKey(opts.idempotencyKey), retry: !!(event.dedupeId ?? opts.idempotencyKey) }),
    /** POST /events with up to 100 events, answered in order; an invalid one as `{ error }`, the rest ingested. */
    sendMany: async (events: SendEvent[], opts: { idempotencyKey?: string } = {}) =>
      (
        await json<{ results: (SendResult | { error: { code: string; message: string } })[] }>('POST', 'events', {
          body: events,
          ...eventKey(opts.idempotencyKey),
          retry: opts.idempotencyKey !== undefined || events.every((e) => !!e.dedupeId),
        })
      ).results,
    runs: {
      get: <Result = unknown>(runId: string) => read<RunDetail<Result>>(id(runId)),
      list,
      /** Every run matching `query`, page after page (`limit` a page), newest first by default. */
      all: async function* (query: Omit<RunListQuery, 'cursor'> = {}): AsyncGenerator<Run> {
        for (let cursor: string | undefined; ; ) {
          const page = await list({ ...query, cursor });
          yield* page.runs;
          if (!(cursor = page.nextCursor)) return;
        }
      },
      steps: (runId: string) => read<Step[]>(`${id(runId)}/steps`),
      /** Its log lines after seq `from`, oldest first (up to `limit`, 100 by default). */
      logs: (runId: string, query: { from?: number; limit?: number } = {}) => read<LogLine[]>(`${id(runId)}/logs`, query),
      /** Its scores (`step.score`, evals), each with its name and value. */
      scores: (runId: string) => read<{ name: string; value: unknown; [field: string]: unknown }[]>(`${id(runId)}/scores`),
      cancel: (runId: string) => json<RunDetail>('POST', `${id(runId)}/cancel`, { retry: false }),
      pause: (runId: string) => json<RunDetail>('POST', `${id(runId)}/pause`, { retry: true }),
      resume: (runId: string) => json<RunDetail>('POST', `${id(runId)}/resume`, { retry: false }),
      /** A new run of a finished one, with its input or `input` instead; made once per `idempotencyKey` (drawn per call when not given). */
      replay: (runId: string, opts: { input?: unknown; idempotencyKey?: string } = {}) =>
        json<RunDetail>('POST', `${id(runId)}/replay`, { body: 'input' in opts ? { input: opts.input } : undefined, headers: keyed(opts.idempotencyKey), retry: true }),
      retryFromStep: (runId: string, step: string, opts: { idempotencyKey?: string } = {}) =>
        json<RunDetail>('POST', `${id(runId)}/retry-from-step`, { body: { step }, headers: keyed(opts.idempotencyKey), retry: true }),
      /**
       * Replay the finished runs matching `filter` (status succeeded, failed or cancelled), made once per
       * `idempotencyKey` (drawn per call when not given), so it is retried safely: a repeat replays none again.
       */
      bulkReplay: (filter: BulkRunFilter & { status?: 'succeeded' | 'failed' | 'cancelled' }, opts: { idempotencyKey?: string } = {}) =>
        json<BulkResult & { replayed: number }>('POST', 'runs/bulk-replay', { body: bulkBody(filter), headers: keyed(opts.idempotencyKey), retry: true }),
      /** Cancel the runs matching `filter` that have not ended; `if` is CEL over each run's event (`event.data.tenant == 'acme'`). */
      bulkCancel: (filter: BulkRunFilter & { status?: 'queued' | 'running' | 'waiting' | 'paused'; if?: string }) =>
        json<BulkResult & { cancelled: number }>('POST', 'runs/bulk-cancel', { body: bulkBody(filter), retry: true }),
      stream,
      /**
       * The run once it has ended (succeeded, failed or cancelled), with its result: GET /runs/{id}/wait, held by
       * the service until then (a minute a call at most); rejects with a `TimeoutError` after `timeoutMs`.
       */
      wait: async <Result = unknown>(runId: string, opts: { timeoutMs?: number } = {}): Promise<RunDetail<Result>> => {
        const deadline = opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs;
        for (;;) {
          const waitMs = Math.max(0, Math.min(MAX_WAIT_MS, Math.floor(deadline - Date.now())));
          const run = await json<RunDetail<Result>>('GET', `${id(runId)}/wait`, { query: { timeoutMs: waitMs }, retry: true, timeoutMs: waitMs + timeoutMs });
          if (TERMINAL.has(run.status)) return run;
          if (Date.now() >= deadline) throw new DOMException(`Run ${runId} had not ended after ${opts.timeoutMs} ms (it is ${run.status}).`, 'TimeoutError');
        }
      },
    },
    events: {
      get: (eventId: string) => read<Record<string, unknown>>(`events/${encodeURIComponent(eventId)}`),
      /** The event log, newest first; `tags`: events carrying every one given. */
      list: ({ tags, ...query }: { app?: string; name?: string; tags?: string[]; limit?: number } = {}) =>
        read<Record<string, unknown>[]>('events', { ...query, tag: tags }),
      /** Events sent with a `delay` and not yet taken in, soonest first (each with its `scheduledFor`). */
      scheduled: (query: { app?: string; name?: string; limit?: number } = {}) => read<Record<string, unknown>[]>('events/scheduled', query),
      /** Events workflows paused with `hold` keep (by `app`, `workflow`), oldest first: what their resume will admit. */
      held: (query: { app?: string; workflow?: string; limit?: number } = {}) =>
        read<{ workflow: string; app: string; heldAt: string; event: Record<string, unknown> }[]>('events/held', query),
      /** Drop an event sent with a `delay` before it is taken in (409 `event_not_scheduled` once it is). */
      cancel: (eventId: string) => json<Record<string, unknown>>('POST', `events/${encodeURIComponent(eventId)}/cancel`, { retry: false }),
    },
    schedules: {
      /**
       * A cron pattern that starts runs of a registered workflow, each with `data` (as `event.data.data`);
       * one made again with its `externalId` replaces it. Safe to retry.
       */
      create: (schedule: ScheduleInput) => json<ScheduleRecord>('POST', 'schedules', { body: schedule, retry: schedule.externalId !== undefined }),
      list: (query: { app?: string; workflow?: string; limit?: number } = {}) => read<ScheduleRecord[]>('schedules', query),
      get: (scheduleId: string) => read<ScheduleRecord>(`schedules/${encodeURIComponent(scheduleId)}`),
      /** Its ticks start no run until `resume`. */
      pause: (scheduleId: string) => json<ScheduleRecord>('POST', `schedules/${encodeURIComponent(scheduleId)}/pause`, { retry: true }),
      /** It fires again from its next tick after now; the ticks it missed while paused do not fire. */
      resume: (scheduleId: string) => json<ScheduleRecord>('POST', `schedules/${encodeURIComponent(scheduleId)}/resume`, { retry: true }),
      /** No later tick starts a run. */
      delete: async (scheduleId: string) => void (await request('DELETE', `schedules/${encodeURIComponent(scheduleId)}`, { retry: false })),
    },
    workflows: {
      /** The registered workflows (of one app), each with its triggers, schedules and `paused` when it is. */
      list: (query: { app?: string } = {}) => read<WorkflowRecord[]>('workflows', query),
      /**
       * Its events and cron ticks start no run until resumed; runs under way go on. With `hold`, its events' runs
       * start once it is resumed (in arrival order); without, events sent meanwhile never start one.
       */
      pause: (ref: { app: string; workflow: string; hold?: boolean }) => json<WorkflowRecord>('POST', 'workflows/pause', { body: ref, retry: true }),
      /** Its events start runs again, and those it held start theirs. */
      resume: (ref: { app: string; workflow: string }) => json<WorkflowRecord>('POST', 'workflows/resume', { body: ref, retry: true }),
    },
    approvals: {
      list: (query: { status?: string; runId?: string; limit?: number } = {}) => read<Approval[]>('approvals', query),
      get: (approvalId: string) => read<Approval>(`approvals/${encodeURIComponent(approvalId)}`),
      decide: (approvalId: string, decision: ApprovalDecisionInput) =>
        json<Approval>('POST', `approvals/${encodeURIComponent(approvalId)}/decision`, { body: decision, retry: false }),
    },
  };
}

/** The frames of an SSE response (`data:` lines joined, comments skipped), as JSON. */
async function* sseFrames(res: Response): AsyncGenerator<TimelineFrame> {
  if (!res.body) return;
  const decoder = new TextDecoder();
  let buf = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true }).replace(/\r\n?/g, '\n');
    for (let end = buf.indexOf('\n\n'); end >= 0; end = buf.indexOf('\n\n')) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const data = block
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5))
        .join('\n');
      if (data) yield JSON.parse(data) as TimelineFrame;
    }
  }
}
