import type { Database } from '@dws/db';
import type { StepError } from '@dws/protocol';
import { msUntil, type OutboxMessage } from '@dws/runtime';
import type { StepOutcome } from '../domain/reply.js';

/** A timeline frame before it gets its ts from the database. */
export interface NewFrame {
  seq: number;
  kind: 'run_status' | 'step_status' | 'log';
  /** Kind-specific fields (SPEC Timeline frame), without kind/seq/ts/runId. */
  fields: Record<string, unknown>;
  /** Log frames: `attempt:scope:index`, unique per run. */
  logKey?: string;
  /** When it was written (ISO, ms): stored, and sent live, as this same value. Set by the statement that writes it. */
  ts?: string;
}

/** A frame's ts, set once as it is written: a stream sends the same frame alike live and replayed. */
function stamped(frames: NewFrame[]): NewFrame[] {
  const now = new Date().toISOString();
  for (const f of frames) f.ts ??= now;
  return frames;
}

/** Rows travel as one JSON parameter (jsonb_to_recordset): nulls and types survive both drivers. */
function framesJson(frames: NewFrame[]): string {
  return JSON.stringify(stamped(frames).map((f) => ({ seq: f.seq, kind: f.kind, payload: f.fields, log_key: f.logKey ?? null, ts: f.ts })));
}

export interface NewRun {
  id: string;
  workspaceId: string;
  workflow: string;
  app: string;
  runner: string;
  triggerKind: string;
  eventId: string | null;
  eventName: string | null;
  replayOf: string | null;
  inputJson: string;
  createdAtMs: number;
  /** The triggering event's session, or null. */
  session?: string | null;
  /** Its tags, or null for none. */
  tags?: string[] | null;
  /** The workflow's timeouts (StartRun's; unset: none). Such a run starts under flow control (insertFlowRun). */
  timeoutStartMs?: number;
  timeoutFinishMs?: number;
}

/**
 * Insert runs already held by `owner` (each is driven at once), with their
 * queued and running frames, in one statement. Idempotent on the run id: a
 * redelivered start command inserts nothing. Returns the ids inserted.
 */
export async function insertHeldRuns(db: Database, starts: { run: NewRun; frames: NewFrame[] }[], owner: string, leaseMs: number): Promise<Set<string>> {
  const rows = await db.query<{ id: string }>(
    `with x as (
       select * from jsonb_to_recordset($1::jsonb) as x(id text, workspace_id text, workflow text, app text, runner text, trigger_kind text,
                                                         event_id text, event_name text, replay_of text, input text, next_seq int,
                                                         created_at_ms bigint, session text, tags text[], frames jsonb)
     ), r as (
       insert into scheduler.runs (id, workspace_id, workflow, app, runner, status, trigger_kind, event_id, event_name, replay_of,
                                   input, next_seq, lease_owner, lease_until, created_at, started_at, session, tags)
       select id, workspace_id, workflow, app, runner, 'running', trigger_kind, event_id, event_name, replay_of, input, next_seq, $2,
              now() + ($3::int * interval '1 millisecond'), to_timestamp(created_at_ms / 1000.0), now(), session, tags
         from x
       on conflict (id) do nothing
       returning id
     ), f as (
       insert into scheduler.frames (run_id, seq, workspace_id, kind, payload, ts)
       select r.id, fr.seq, x.workspace_id, fr.kind, fr.payload, fr.ts
         from r join x on x.id = r.id cross join lateral jsonb_to_recordset(x.frames) as fr(seq int, kind text, payload jsonb, ts timestamptz)
     )
     select id from r`,
    [
      JSON.stringify(
        starts.map(({ run, frames }) => ({
          id: run.id, workspace_id: run.workspaceId, workflow: run.workflow, app: run.app, runner: run.runner, trigger_kind: run.triggerKind,
          event_id: run.eventId, event_name: run.eventName, replay_of: run.replayOf, input: run.inputJson, next_seq: frames.length + 1,
          created_at_ms: run.createdAtMs, session: run.session ?? null, tags: run.tags ?? null, frames: stamped(frames).map((f) => ({ seq: f.seq, kind: f.kind, payload: f.fields, ts: f.ts })),
        })),
      ),
      owner,
      leaseMs,
    ],
  );
  return new Set(rows.map((r) => r.id));
}

/** Outbox rows travel as one JSON parameter too (payloads in base64). */
function outboxJson(messages: OutboxMessage[] = []): string {
  return JSON.stringify(messages.map((m) => ({ subject: m.subject, msg_id: m.msgId, payload: Buffer.from(m.payload).toString('base64') })));
}

/** Steps travel as one JSON parameter, like frames. */
function stepsJson(steps: (StepOutcome & { idx: number })[]): string {
  return JSON.stringify(
    steps.map((s) => ({
      step_id: s.id, name: s.name, op: s.op, idx: s.idx, status: s.status, data: s.dataJson ?? null,
      error: s.error ?? null, input: s.inputJson ?? null, attempts: s.attempts, wake_at: s.wakeAtMs ?? null,
      child_run_id: s.child?.runId ?? null, usage: s.usageJson ?? null, started_at: s.startedAtMs ?? null,
    })),
  );
}

/** CTE body: upsert the steps of the jsonb `steps` for each row of the run CTE `r` (rows that passed the guard). */
/** The statuses of a run that has not ended, as SQL (`status in ${ACTIVE_SQL}`). */
export const ACTIVE_SQL = `('queued', 'running', 'waiting', 'paused')`;

const upsertSteps = (ws: string, steps: string): string => `
       insert into scheduler.steps (run_id, step_id, workspace_id, name, op, idx, status, data, error, input, attempts, wake_at, child_run_id, ended_at, usage, created_at)
       select r.id, x.step_id, ${ws}, x.name, x.op, x.idx, x.status, x.data, x.error, x.input, x.attempts,
              case when x.wake_at is null then null else to_timestamp(x.wake_at / 1000.0) end, x.child_run_id,
              case when x.status in ('succeeded', 'failed') then now() end, x.usage::jsonb,
              case when x.started_at is null then now() else least(to_timestamp(x.started_at / 1000.0), now()) end
         from r, jsonb_to_recordset(${steps})
              as x(step_id text, name text, op text, idx int, status text, data text, error jsonb, input text, attempts int,
                   wake_at bigint, child_run_id text, usage text, started_at bigint)
       on conflict (run_id, step_id) do update set status = excluded.status, data = excluded.data, error = excluded.error,
         attempts = excluded.attempts, wake_at = excluded.wake_at, child_run_id = excluded.child_run_id, ended_at = excluded.ended_at,
         usage = excluded.usage`;

/** CTE body: append the frames of the jsonb `frames` for each row of the run CTE `r`. */
const insertFrames = (ws: string, frames: string): string => `
       insert into scheduler.frames (run_id, seq, workspace_id, kind, payload, log_key, ts)
       select r.id, x.seq, ${ws}, x.kind, x.payload, x.log_key, x.ts from r,
              jsonb_to_recordset(${frames}) as x(seq int, kind text, payload jsonb, log_key text, ts timestamptz)`;

/** CTE body: Score steps write their score row with the memo, once (a replay finds it there). */
const insertScores = (ws: string, steps: string): string => `
       insert into scheduler.scores (run_id, step_id, workspace_id, step, name, value, data)
       select r.id, y.step_id, ${ws}, y.name, y.data::jsonb->>'name', y.data::jsonb->'value', y.data::jsonb
         from r, jsonb_to_recordset(${steps}) as y(step_id text, name text, op text, status text, data text)
        where y.op = 'Score' and y.status = 'succeeded'
       on conflict (run_id, step_id) do nothing`;

export interface ApplyCheckpoint {
  runId: string;
  /** The pass in flight; the checkpoint is refused once another pass (or no replica) holds the run. */
  pass: number;
  newSteps: number;
  nextSeq: number;
  steps: (StepOutcome & { idx: number })[];
  frames: NewFrame[];
}

/**
 * Store steps runners finished while their passes go on: the checkpoints of
 * several runs in ONE statement (group commit: those that arrived while the
 * previous statement ran), each guarded like a pass: this replica still holds
 * the run at this pass, it is not ended, paused or cancelled, and no pause is
 * asked for (a pause or cancel ends the pass at this step boundary instead).
 * A run claimed as queued or waiting is stored `running` here (the engine's
 * held run already is, and its `running` frame rides these frames), as its
 * pass's reply would. The pass number does not move: the pass's own reply
 * still applies after its checkpoints. One checkpoint per run in a batch.
 * Returns the ids of the runs whose checkpoint was stored.
 */
export async function applyCheckpoints(db: Database, owner: string, batch: ApplyCheckpoint[]): Promise<Set<string>> {
  // `runs.id = any($3)` as well as the join: the planner takes jsonb_to_recordset for 100 rows and,
  // with the join alone, may hash-join it against a sequential scan of every run (per statement).
  const rows = await db.query<{ id: string }>(
    `with x as (
       select * from jsonb_to_recordset($2::jsonb)
         as x(run_id text, pass int, new_steps int, next_seq int, steps jsonb, frames jsonb)
     ), r as (
       update scheduler.runs set status = 'running', step_count = step_count + x.new_steps, next_seq = x.next_seq, updated_at = now()
         from x
        where runs.id = any($3::text[]) and runs.id = x.run_id and runs.pass = x.pass and runs.lease_owner = $1
          and runs.status in ('queued', 'waiting', 'running') and not runs.pause_requested
        returning runs.id, runs.workspace_id, x.steps, x.frames
     ), s as (${upsertSteps('r.workspace_id', 'r.steps')}
     ), f as (${insertFrames('r.workspace_id', 'r.frames')}
     )
     select id from r`,
    [
      owner,
      `[${batch
        .map(
          (a) =>
            `{"run_id":${JSON.stringify(a.runId)},"pass":${a.pass},"new_steps":${a.newSteps},` +
            `"next_seq":${a.nextSeq},"steps":${stepsJson(a.steps)},"frames":${framesJson(a.frames)}}`,
        )
        .join(',')}]`,
      batch.map((a) => a.runId),
    ],
  );
  return new Set(rows.map((r) => r.id));
}

export interface ApplyPass {
  runId: string;
  workspaceId: string;
  /** The pass the reply answers; the update is a no-op unless it is still current. */
  pass: number;
  owner: string;
  status: string;
  resultJson: string | null;
  error: StepError | null;
  attempt: number;
  transportFailures: number;
  noRunnerSinceMs: number | null;
  /** Keep the lease (`hold`), release it until a time (`delay`, ms from now; `at`, epoch ms), or drop it. */
  lease: { kind: 'hold'; ms: number } | { kind: 'delay'; ms: number } | { kind: 'at'; atMs: number } | { kind: 'none' };
  newSteps: number;
  nextSeq: number;
  steps: (StepOutcome & { idx: number })[];
  frames: NewFrame[];
  /** Outbox rows written by the same statement (lifecycle facts, hand-offs). */
  outbox?: OutboxMessage[];
  /** A run of a limited key that parks keeps its slots: the service is making a model call for it (flow.ts). */
  keepSlot?: boolean;
  /** The run's tags once this pass's step.tag steps are added (an extension of SPEC); absent when the pass adds none. */
  tags?: string[];
}

/**
 * What applyPass found: not applied (stale pass), or the status the run now
 * has (a pending pause wins), and whether it left the run due at once (a
 * park whose step was resolved from outside meanwhile).
 */
export type Applied = { applied: false } | { applied: true; status: string; outboxIds: number[]; dueNow: boolean };

/**
 * Apply one pass in ONE statement (data-modifying CTEs): advance the run
 * guarded by its pass and lease, upsert the steps, append the frames.
 * Nothing is written when the pass is no longer current (late or
 * redelivered reply, lease lost, run cancelled). A pause requested while the
 * run was held takes effect here, at the step boundary; a step resolved from
 * outside meanwhile (`wake_pending`) makes a park due at once. A run of a
 * limited key that parks or pauses gives its slots back (flow.ts), unless
 * it parks on a model call the service makes for it (`keepSlot`) or holds
 * them to its end (`holds_slots`).
 */
export async function applyPass(db: Database, a: ApplyPass): Promise<Applied> {
  // The batch statement with a batch of one: the two cannot drift apart.
  return (await applyPasses(db, a.owner, [a])).get(a.runId) ?? { applied: false };
}

/**
 * The passes of several runs in ONE statement (group commit: the passes that
 * ended while the previous statement ran), each applied and guarded exactly
 * as applyPass does it alone, outbox rows included (told apart by msg id,
 * which every outbox message of the scheduler has, unique). One pass per run
 * in a batch. Returns what applyPass would have for each, by run id.
 */
export async function applyPasses(db: Database, owner: string, batch: ApplyPass[]): Promise<Map<string, Applied>> {
  // `runs.id = any($3)`: the primary key finds the rows (see applyCheckpoints).
  const rows = await db.query<{ id: string | null; status: string | null; due: boolean | null; outbox_id: number | string | null; msg_id: string | null }>(
    `with x as (
       select * from jsonb_to_recordset($2::jsonb)
         as x(run_id text, pass bigint, status text, result text, error jsonb, attempt int, transport_failures int,
              no_runner_since bigint, new_steps int, next_seq int, lease_owner text, lease_ms int, lease_at bigint,
              terminal boolean, keep_slot boolean, tags text[], workspace_id text, steps jsonb, frames jsonb, outbox jsonb)
     ), r as (
       update scheduler.runs set
         pass = runs.pass + 1,
         tags = coalesce(x.tags, runs.tags),
         status = case when runs.pause_requested and x.status in ('running', 'waiting') then 'paused' else x.status end,
         result = x.result, error = x.error, attempt = x.attempt, transport_failures = x.transport_failures,
         no_runner_since = case when x.no_runner_since is null then null else to_timestamp(x.no_runner_since / 1000.0) end,
         step_count = runs.step_count + x.new_steps, next_seq = x.next_seq,
         lease_owner = case when runs.pause_requested and x.status in ('running', 'waiting') then null else x.lease_owner end,
         lease_until = case
           when runs.pause_requested and x.status in ('running', 'waiting') then null
           when x.lease_owner is null and runs.wake_pending and not x.terminal then now()
           when x.lease_owner is not null and runs.lease_until > now() + (x.lease_ms * interval '1 millisecond') / 2 then runs.lease_until
           when x.lease_ms is not null then now() + (x.lease_ms * interval '1 millisecond')
           when x.lease_at is not null then to_timestamp(x.lease_at / 1000.0)
           else null end,
         wake_pending = case when x.lease_owner is null then false else runs.wake_pending end,
         admitted = case when runs.concurrency_limit > 0 and not runs.holds_slots
                              and ((x.status = 'waiting' and not x.keep_slot) or (runs.pause_requested and x.status in ('running', 'waiting'))) then false
                         else runs.admitted end,
         pause_requested = false,
         ended_at = case when x.terminal then now() else null end, updated_at = now()
         from x
        where runs.id = any($3::text[]) and runs.id = x.run_id and runs.pass = x.pass and runs.lease_owner = $1
        returning runs.id, runs.status, runs.lease_owner is null and runs.lease_until <= now() as due, x.workspace_id, x.steps, x.frames, x.outbox
     ), s as (${upsertSteps('r.workspace_id', 'r.steps')}
     ), sc as (${insertScores('r.workspace_id', 'r.steps')}
     ), f as (${insertFrames('r.workspace_id', 'r.frames')}
     ), o as (
       insert into scheduler.outbox (subject, msg_id, payload)
       select y.subject, y.msg_id, decode(y.payload, 'base64') from r,
              jsonb_to_recordset(r.outbox) as y(subject text, msg_id text, payload text)
       returning id, msg_id
     )
     select id, status, due, null::bigint as outbox_id, null::text as msg_id from r
     union all
     select null, null, null, id, msg_id from o`,
    [
      owner,
      `[${batch
        .map((a) => {
          const leaseOwner = a.lease.kind === 'hold' ? a.owner : null;
          const leaseMs = a.lease.kind === 'hold' || a.lease.kind === 'delay' ? a.lease.ms : null;
          const leaseAt = a.lease.kind === 'at' ? a.lease.atMs : null;
          const terminal = a.status === 'succeeded' || a.status === 'failed' || a.status === 'cancelled';
          return (
            `{"run_id":${JSON.stringify(a.runId)},"pass":${a.pass},"status":${JSON.stringify(a.status)},` +
            `"result":${a.resultJson === null ? 'null' : JSON.stringify(a.resultJson)},"error":${a.error ? JSON.stringify(a.error) : 'null'},` +
            `"attempt":${a.attempt},"transport_failures":${a.transportFailures},"no_runner_since":${a.noRunnerSinceMs ?? 'null'},` +
            `"new_steps":${a.newSteps},"next_seq":${a.nextSeq},"lease_owner":${leaseOwner === null ? 'null' : JSON.stringify(leaseOwner)},` +
            `"lease_ms":${leaseMs ?? 'null'},"lease_at":${leaseAt ?? 'null'},"terminal":${terminal},"keep_slot":${a.keepSlot === true},` +
            `"tags":${a.tags ? JSON.stringify(a.tags) : 'null'},` +
            `"workspace_id":${JSON.stringify(a.workspaceId)},"steps":${stepsJson(a.steps)},"frames":${framesJson(a.frames)},` +
            `"outbox":${outboxJson(a.outbox)}}`
          );
        })
        .join(',')}]`,
      batch.map((a) => a.runId),
    ],
  );
  const outboxIds = new Map<string, number>();
  for (const r of rows) if (r.msg_id !== null) outboxIds.set(r.msg_id, Number(r.outbox_id));
  const byRun = new Map(batch.map((a) => [a.runId, a]));
  const out = new Map<string, Applied>();
  for (const r of rows) {
    if (r.id === null) continue;
    const messages = byRun.get(r.id)!.outbox ?? [];
    out.set(r.id, { applied: true, status: r.status!, outboxIds: messages.map((m) => outboxIds.get(m.msgId!)!), dueNow: r.due === true });
  }
  return out;
}

/** Append frames to a run no replica holds (e.g. the paused frame after a pause took effect). */
export async function appendFrames(db: Database, runId: string, workspaceId: string, frames: NewFrame[]): Promise<void> {
  if (frames.length === 0) return;
  await db.query(
    `with f as (
       insert into scheduler.frames (run_id, seq, workspace_id, kind, payload, log_key, ts)
       select $1, x.seq, $2, x.kind, x.payload, x.log_key, x.ts from jsonb_to_recordset($3::jsonb) as x(seq int, kind text, payload jsonb, log_key text, ts timestamptz)
     )
     update scheduler.runs set next_seq = $4 where id = $1`,
    [runId, workspaceId, framesJson(frames), frames[frames.length - 1]!.seq + 1],
  );
}

export interface ClaimedRun {
  id: string;
  workspace_id: string;
  workflow: string;
  app: string;
  runner: string;
  status: string;
  event_name: string | null;
  input: string;
  attempt: number;
  pass: number;
  step_count: number;
  next_seq: number;
  transport_failures: number;
  no_runner_since_ms: number | null;
  parent_run_id: string | null;
  on_failure_of: string | null;
  failure_error: unknown;
  tags: string[] | null;
}

/**
 * Claim up to `limit` runs that are due: lease expired (a replica died),
 * backoff or sleep over. A run waiting for a concurrency slot is admitted
 * first (flow.ts). SKIP LOCKED lets every replica claim at once without
 * taking the same run.
 */
export async function claimDueRuns(db: Database, owner: string, leaseMs: number, limit: number, held: string[] = []): Promise<ClaimedRun[]> {
  // Not the runs this replica drives right now: a renewal that came late leaves their lease lapsed,
  // and claiming one again would drive it twice under the same owner and pass (both pass the guard).
  const rows = await db.query<ClaimedRun>(
    `update scheduler.runs r set lease_owner = $1, lease_until = now() + ($2::int * interval '1 millisecond'), updated_at = now()
      where r.id in (select id from scheduler.runs
                      where status in ('queued', 'running', 'waiting') and admitted and lease_until <= now() and not (id = any($4::text[]))
                      order by lease_until limit $3 for update skip locked)
      returning r.id, r.workspace_id, r.workflow, r.app, r.runner, r.status, r.event_name, r.input, r.attempt, r.pass,
                r.step_count, r.next_seq, r.transport_failures,
                (extract(epoch from r.no_runner_since) * 1000)::bigint as no_runner_since_ms,
                r.parent_run_id, r.on_failure_of, r.tags,
                (select o.error from scheduler.runs o where o.id = r.on_failure_of) as failure_error`,
    [owner, leaseMs, limit, held],
  );
  return rows.map((r) => ({
    ...r,
    pass: Number(r.pass),
    no_runner_since_ms: r.no_runner_since_ms === null ? null : Number(r.no_runner_since_ms),
  }));
}

/**
 * Milliseconds until the claim loop has work (0 or less: now), undefined when
 * nothing is armed: the earliest lease_until of the runs claimDueRuns would
 * take (sleeps, backoffs, the leases of a replica that died) or of the parked
 * runs that gave their concurrency slot back, and now while runs wait for a
 * slot (admission is asked each round while they do).
 */
export function nextClaimInMs(db: Database, held: string[]): Promise<number | undefined> {
  return msUntil(
    db,
    `case when exists (select 1 from scheduler.runs where status = 'queued' and not admitted) then now()
          else least((select min(lease_until) from scheduler.runs
                       where status in ('queued', 'running', 'waiting') and admitted and not (id = any($1::text[]))),
                     (select min(lease_until) from scheduler.runs where status = 'waiting' and not admitted)) end`,
    [held],
  );
}

export interface StoredStep {
  step_id: string;
  name: string;
  op: string;
  status: string;
  data: string | null;
  error: StepError | null;
  attempts: number;
  wake_at_ms: number | null;
}

/**
 * The memos of claimed runs (read once per claim, then kept in memory while
 * held), three statements for the whole claim. Parked steps whose time has
 * come are resolved first: a sleep that is over, or a wait that timed out
 * (it resolves with null), and their waiters are removed.
 */
export async function loadClaimedSteps(db: Database, runIds: string[]): Promise<Map<string, { steps: StoredStep[]; logKeys: string[] }>> {
  const out = new Map(runIds.map((id) => [id, { steps: [] as StoredStep[], logKeys: [] as string[] }]));
  if (runIds.length === 0) return out;
  await db.query(
    `with due as (
       update scheduler.steps set status = 'succeeded', data = 'null', wake_at = null, ended_at = now()
        where run_id = any($1::text[]) and status in ('sleeping', 'waiting') and wake_at <= now()
        returning run_id, step_id
     )
     delete from scheduler.waiters w using due where w.run_id = due.run_id and w.step_id = due.step_id`,
    [runIds],
  );
  const steps = await db.query<StoredStep & { run_id: string }>(
    `select run_id, step_id, name, op, status, data, error, attempts, (extract(epoch from wake_at) * 1000)::bigint as wake_at_ms
       from scheduler.steps where run_id = any($1::text[]) order by run_id, idx`,
    [runIds],
  );
  for (const { run_id, ...s } of steps) out.get(run_id)!.steps.push({ ...s, wake_at_ms: s.wake_at_ms === null ? null : Number(s.wake_at_ms) });
  const keys = await db.query<{ run_id: string; log_key: string }>(
    'select run_id, log_key from scheduler.frames where run_id = any($1::text[]) and log_key is not null',
    [runIds],
  );
  for (const k of keys) out.get(k.run_id)!.logKeys.push(k.log_key);
  return out;
}

/** Extend the leases this replica holds (passes that run longer than a lease). */
export async function renewLeases(db: Database, owner: string, runIds: string[], leaseMs: number): Promise<void> {
  if (runIds.length === 0) return;
  // SKIP LOCKED: a run whose row a checkpoint or pass statement holds right now is renewed next round
  // (renewals come every third of a lease). Waiting for it instead deadlocked with those statements,
  // which lock their runs in another order: Postgres broke each cycle only after deadlock_timeout (1 s).
  await db.query(
    `update scheduler.runs set lease_until = now() + ($3::int * interval '1 millisecond')
      where id in (select id from scheduler.runs where id = any($2::text[]) and lease_owner = $1 for update skip locked)`,
    [owner, runIds, leaseMs],
  );
}

/** A replica going away hands its runs back: due at once for any other replica (its late replies are dropped by the pass guard). */
export async function releaseLeases(db: Database, owner: string): Promise<void> {
  await db.query(
    `update scheduler.runs set lease_owner = null, lease_until = now()
      where lease_owner = $1 and status in ('queued', 'running', 'waiting')`,
    [owner],
  );
}

/** Embedded mode only (one scheduler per data directory): leases of a previous process are void. */
export async function releaseAllLeases(db: Database): Promise<void> {
  await db.query(
    `update scheduler.runs set lease_until = now() where lease_owner is not null and status in ('queued', 'running', 'waiting')`,
  );
}

/**
 * Resolve a parked step from outside the run (an event for a waiter, a
 * child's end, an approval's decision) and wake its run: due now when no
 * replica holds it, else flagged so its next park is due at once.
 */
export async function resolveStep(
  db: Database,
  r: { runId: string; stepId: string; dataJson?: string; error?: StepError; usageJson?: string },
): Promise<boolean> {
  // Locks in the order every other writer takes them: the run, then its step, then its waiter (the
  // unreferenced `w` runs after the main update). The step's update reads `r0`, so the run is locked first.
  const rows = await db.query<{ run_id: string }>(
    `with r0 as (
       select id from scheduler.runs where id = $1 for update
     ), s as (
       update scheduler.steps set status = $3, data = $4, error = $5::jsonb, usage = $6::jsonb, wake_at = null, ended_at = now()
        where run_id = (select id from r0) and step_id = $2 and status in ('sleeping', 'waiting', 'child')
        returning run_id
     ), w as (
       delete from scheduler.waiters where run_id = $1 and step_id = $2
     )
     update scheduler.runs r set
       lease_until = case when r.lease_owner is null and r.status in ('waiting', 'queued', 'running') then now() else r.lease_until end,
       wake_pending = r.lease_owner is not null
      from s where r.id = s.run_id
      returning r.id as run_id`,
    [r.runId, r.stepId, r.error ? 'failed' : 'succeeded', r.error ? null : (r.dataJson ?? 'null'), r.error ? JSON.stringify(r.error) : null, r.usageJson ?? null],
  );
  return rows.length > 0;
}

/**
 * The approvals service listed this Approval step (gated): from now until
 * it resolves, its run reads needsAttention. A step resolved meanwhile (a
 * fast decision, a cancelled run) is left as it is. Returns the run's
 * identity when the step was marked, for the workspace's live signal.
 */
export async function markApprovalListed(
  db: Database,
  r: { runId: string; stepId: string },
): Promise<{ workspace_id: string; workflow: string; app: string; status: string } | undefined> {
  const rows = await db.query<{ workspace_id: string; workflow: string; app: string; status: string }>(
    `with s as (
       update scheduler.steps set listed_at = now()
        where run_id = $1 and step_id = $2 and op = 'Approval' and status = 'waiting' and listed_at is null
        returning run_id
     )
     select r.workspace_id, r.workflow, r.app, r.status from scheduler.runs r join s on r.id = s.run_id`,
    [r.runId, r.stepId],
  );
  return rows[0];
}
