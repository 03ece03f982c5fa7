import { parseDelay } from '@dws/cel';
import { DEFAULT_RETRY_BACKOFF, parseTags, retryDelayMs, type RetryBackoff, type StepError } from '@dws/protocol';
import { capabilityGap } from './capabilities.js';
import { spendCeilingReached, workspaceCeilingReached, type AiSpendView, type Spend, type WorkspaceModelView } from './ai-spend.js';

/** What the invoker reported for one pass. */
export type PassOutcome =
  | { kind: 'reply'; status: number; body: string; /** The body parsed once, when the caller already did. */ parsed?: unknown }
  | { kind: 'no_runner' }
  | { kind: 'transport_error'; error: string }
  /** The invoker itself did not answer (none up, or it went silent): our fault, not the runner's. */
  | { kind: 'invoker_unavailable'; error: string };

/** The parts of a run the decision reads (all in memory while a replica holds the run). */
export interface RunView {
  attempt: number;
  transportFailures: number;
  /** ms epoch of the durable stamp taken when no runner was first missing; null when one was found. */
  noRunnerSinceMs: number | null;
  /** Failed attempts so far of steps that are being retried, by hashed id. */
  stepAttempts: ReadonlyMap<string, number>;
  maxAttempts: number;
  /** The workflow's wait between step attempts (`retry`'s backoff fields); the default's when unset. */
  retryBackoff?: RetryBackoff;
  workflow: string;
  runner: string;
  /** Deadlines of steps already parked (sleeps, wait timeouts) that the new batch adds to. */
  pendingDeadlines: readonly number[];
  /** True when some step is parked without a deadline (a child, a wait with no timeout). */
  hasOpenPending: boolean;
  /** Steps the runner checkpointed during this pass: progress even when its reply reports nothing new. */
  checkpointed?: number;
  /** When the runner may have begun the steps it reports next (ms epoch): the pass's start, or its last checkpoint's answer. */
  stepsFromMs?: number;
  /** The workflow's AI spend ceilings and what is spent against them: present only when some ceiling is set and the pass asks for a model call. */
  aiSpend?: AiSpendView;
  /** The workspace's monthly model ceilings and this month's usage: present only when one is set and the pass asks for a model call. */
  workspaceModel?: WorkspaceModelView;
}

/** A step result to persist. `memo` marks what the runner will see on the next pass. */
export type StepStatus = 'succeeded' | 'failed' | 'retrying' | 'sleeping' | 'waiting' | 'child';

/** Work a step hands to another service, published through the outbox after commit. */
export type Handoff =
  | { kind: 'emit'; eventId: string; name: string; dataJson: string; dedupeId?: string; targetApp?: string; /** Its delay: taken in at this time. */ dueAtMs?: number; tags?: string[]; session?: string }
  | { kind: 'webhook'; deliveryId: string; url: string; bodyJson: string }
  | { kind: 'approval'; requestJson: string }
  | { kind: 'infer'; requestJson: string }
  /** A model call refused at the workspace's monthly ceiling: the gateway suspends the workspace. */
  | { kind: 'model_ceiling'; month: string; spent: Spend };

export interface StepOutcome {
  id: string;
  name: string;
  op: string;
  status: StepStatus;
  /** sleeping: wake time; waiting: timeout deadline (none = wait forever). */
  wakeAtMs?: number;
  /** waiting (WaitForEvent): what resumes it. */
  wait?: { eventName: string; ifExpr?: string };
  /** child (RunWorkflow): the run to start. */
  child?: { runId: string; workflow: string; app?: string; runner?: string; dataJson: string };
  handoff?: Handoff;
  /** Raw JSON text of the result. */
  dataJson?: string;
  inputJson?: string;
  error?: StepError;
  /** Attempts made so far, this one included. */
  attempts: number;
  memo: boolean;
  /** SPEC Usage a StepRun reported (a model call the runner made itself: step.ai.wrap), as JSON text. */
  usageJson?: string;
  /** A StepRun: when its code began (ms epoch), stored as the step's start; others start when stored. */
  startedAtMs?: number;
  /** A Tag step (an extension of SPEC): the tags it adds to the run; its result, the run's tags after it, is set where they are merged (the engine's apply). */
  addTags?: string[];
}

export type Decision =
  /** `steps`: steps the runner finished in the pass that returned (a 200's `opcodes`), stored with the result. */
  | { type: 'succeed'; resultJson: string; steps: StepOutcome[] }
  | { type: 'fail'; error: StepError; steps: StepOutcome[] }
  | { type: 'continue'; steps: StepOutcome[] }
  /** Nothing to run now: wait for the earliest deadline (null: only an outside event can wake it). */
  | { type: 'park'; untilMs: number | null; steps: StepOutcome[]; attempt: number }
  | {
      type: 'retry_later';
      delayMs: number;
      steps: StepOutcome[];
      transportFailures: number;
      noRunnerSinceMs: number | null;
      /** A step retry starts a new run attempt (logs stay distinct per attempt). */
      attempt: number;
    };

/** SPEC Limits: a run waits at most 5 minutes for a capable runner. */
export const MISSING_RUNNER_LIMIT_MS = 5 * 60_000;
/** Transport failures (5xx, timeouts, connection errors) tolerated before the run fails. */
export const TRANSPORT_BUDGET = 5;

/** Exponential backoff with jitter over [base/2, base], base = 1 s * 2^(n-1), capped at 30 s: transport failures, and steps without a policy. */
export function backoffMs(failures: number, rnd = Math.random): number {
  return retryDelayMs(failures, DEFAULT_RETRY_BACKOFF, rnd);
}

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

/** Parse a reply body once: the engine parses it up front and shares the result. */
export function withParsedBody(outcome: PassOutcome): PassOutcome {
  return outcome.kind === 'reply' && outcome.parsed === undefined ? { ...outcome, parsed: parseJson(outcome.body) ?? null } : outcome;
}

const bodyOf = (o: { body: string; parsed?: unknown }): unknown => (o.parsed !== undefined ? o.parsed : parseJson(o.body));

const asStepError = (v: unknown, fallback: string): StepError => {
  const e = v as { message?: unknown; stack?: unknown } | undefined;
  if (e && typeof e.message === 'string') return typeof e.stack === 'string' ? { message: e.message, stack: e.stack } : { message: e.message };
  return { message: fallback };
};

/**
 * Pure: what the scheduler does with one pass's outcome (SPEC "Invoke reply
 * statuses", "Opcode semantics", retries). No I/O; the engine persists the
 * decision in one statement.
 */
export interface IdSource {
  run(): string;
  event(): string;
  delivery(): string;
}

/** Runner log lines of a reply (SPEC Runner log line), as sent. */
export interface RawLogLine {
  level?: unknown;
  message?: unknown;
  fields?: unknown;
  scope?: unknown;
  index?: unknown;
}

/** The log lines riding a reply body (every status carries them in protocol v1). */
export function logsOf(outcome: PassOutcome): RawLogLine[] {
  if (outcome.kind !== 'reply') return [];
  const parsed = bodyOf(outcome) as { logs?: unknown } | undefined;
  return Array.isArray(parsed?.logs) ? (parsed.logs as RawLogLine[]) : [];
}

export function decide(run: RunView, outcome: PassOutcome, nowMs: number, newIds: IdSource, rnd = Math.random): Decision {
  if (outcome.kind === 'invoker_unavailable') {
    // A restart or outage of the service's own invoker never fails a user's run, nor spends
    // its runner's transport budget: the run retries every 1-2 s until an invoker answers.
    return {
      type: 'retry_later',
      delayMs: 1000 + Math.floor(rnd() * 1000),
      steps: [],
      transportFailures: run.transportFailures,
      noRunnerSinceMs: run.noRunnerSinceMs,
      attempt: run.attempt,
    };
  }
  if (outcome.kind === 'no_runner') {
    const since = run.noRunnerSinceMs ?? nowMs;
    if (nowMs - since >= MISSING_RUNNER_LIMIT_MS) {
      const who = run.runner ? ` on runner ${run.runner}` : '';
      return { type: 'fail', steps: [], error: { message: `No capable runner registered for workflow ${run.workflow}${who} within 5 minutes.` } };
    }
    const waited = nowMs - since;
    return {
      type: 'retry_later',
      delayMs: Math.min(10_000, Math.max(250, waited / 4)),
      steps: [],
      transportFailures: run.transportFailures,
      noRunnerSinceMs: since,
      attempt: run.attempt,
    };
  }
  if (outcome.kind === 'transport_error' || outcome.status >= 500) {
    const failures = run.transportFailures + 1;
    if (failures > TRANSPORT_BUDGET) {
      const detail = outcome.kind === 'transport_error' ? outcome.error : errorFromBody(bodyOf(outcome), `runner answered ${outcome.status}`).message;
      return { type: 'fail', steps: [], error: { message: `Runner unreachable after ${TRANSPORT_BUDGET} transport retries: ${detail}` } };
    }
    return { type: 'retry_later', delayMs: backoffMs(failures, rnd), steps: [], transportFailures: failures, noRunnerSinceMs: null, attempt: run.attempt };
  }
  const { status } = outcome;
  const body = bodyOf(outcome);
  if (status === 200) {
    const parsed = body as { data?: unknown } | undefined;
    if (!parsed || typeof parsed !== 'object') return { type: 'fail', steps: [], error: { message: 'Runner answered 200 with a body that is not a protocol v1 reply.' } };
    const steps = finishedSteps(run, (parsed as { opcodes?: unknown }).opcodes, nowMs, newIds, rnd);
    if (typeof steps === 'string') return { type: 'fail', steps: [], error: { message: steps } };
    return { type: 'succeed', resultJson: JSON.stringify(parsed.data ?? null), steps };
  }
  if (status === 206) return decideOpcodes(run, body, nowMs, newIds, rnd);
  // 4xx (and anything else unexpected): non-retriable, the run fails.
  return { type: 'fail', steps: [], error: errorFromBody(body, `Runner answered ${status}.`) };
}

const BAD_STEP_ID = 'Runner sent an opcode without a valid hashed step id.';
/** The opcode's step id when it is a lowercase hex SHA-256 (SPEC step id hashing). */
const hashedIdOf = (raw: RawOpcode | undefined): string | undefined =>
  typeof raw?.id === 'string' && /^[0-9a-f]{64}$/.test(raw.id) ? raw.id : undefined;

/**
 * A 200 may carry `opcodes`: steps the runner finished in the pass whose
 * handler then returned (the SDK's last pass runs its last step and returns
 * at once). Only successful StepRuns belong there: anything else would
 * still need the service, so it is a protocol error (the message).
 */
function finishedSteps(run: RunView, ops: unknown, nowMs: number, newIds: IdSource, rnd: () => number, what = 'Runner answered 200 with'): StepOutcome[] | string {
  if (ops === undefined) return [];
  if (!Array.isArray(ops)) return `${what} opcodes that are not an array.`;
  const steps: StepOutcome[] = [];
  const seen = new Set<string>();
  for (const raw of ops as RawOpcode[]) {
    const id = hashedIdOf(raw);
    if (!id) return BAD_STEP_ID;
    if (raw.op !== 'StepRun' || raw.error !== undefined) return `${what} opcodes other than finished steps.`;
    if (seen.has(id)) continue;
    seen.add(id);
    steps.push(opcodeOutcome(run, raw, id, nowMs, newIds, rnd).step);
  }
  return steps;
}

/**
 * The steps of a checkpoint (a runner reporting finished steps while its
 * pass goes on): successful StepRuns only, each as it will be stored; a
 * message when the checkpoint holds anything else.
 */
export function checkpointSteps(run: RunView, ops: unknown, nowMs: number, newIds: IdSource): StepOutcome[] | string {
  if (!Array.isArray(ops) || ops.length === 0) return 'A checkpoint needs a non-empty opcodes array.';
  return finishedSteps(run, ops, nowMs, newIds, Math.random, 'A checkpoint carries');
}

function errorFromBody(body: unknown, fallback: string): StepError {
  const parsed = body as { error?: unknown } | undefined;
  const err = parsed?.error;
  if (typeof err === 'string') return { message: err };
  if (err && typeof err === 'object' && typeof (err as { message?: unknown }).message === 'string') return asStepError(err, fallback);
  return { message: fallback };
}

interface RawOpcode {
  op?: unknown;
  id?: unknown;
  name?: unknown;
  data?: unknown;
  input?: unknown;
  error?: unknown;
  retriable?: unknown;
  retryAfterMs?: unknown;
  sleepMs?: unknown;
  sleepUntilMs?: unknown;
  eventName?: unknown;
  eventIf?: unknown;
  timeoutMs?: unknown;
  childName?: unknown;
  childData?: unknown;
  childApp?: unknown;
  childRunner?: unknown;
  dedupeId?: unknown;
  targetApp?: unknown;
  /** Emit (an extension of SPEC): take the event in later. */
  delay?: unknown;
  webhookUrl?: unknown;
  [k: string]: unknown;
}

const optStr = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
/** An opcode's `tags` (Emit's, Tag's: extensions of SPEC), checked as POST /events checks an event's; none when empty. */
function opcodeTags(value: unknown): { ok: true; tags?: string[] } | { ok: false; message: string } {
  try {
    return { ok: true, tags: parseTags(value, 'invalid_tags') };
  } catch (err) {
    return { ok: false, message: (err as Error).message };
  }
}

/** SPEC Limits: a session is at most 256 characters, as POST /events takes it. */
const MAX_SESSION = 256;
const finite = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/**
 * SPEC Usage as reported on a StepRun, kept to its known fields with the
 * right types (model a string up to 256 characters, the numbers finite and
 * not negative, cacheHit a boolean); undefined when nothing usable is there.
 */
export function usageOf(raw: unknown): string | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const u = raw as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  if (typeof u.model === 'string') out.model = u.model.slice(0, 256);
  for (const k of ['tokensIn', 'tokensOut', 'cost', 'latencyMs'] as const) {
    const v = finite(u[k]);
    if (v !== undefined && v >= 0) out[k] = v;
  }
  if (typeof u.cacheHit === 'boolean') out.cacheHit = u.cacheHit;
  return Object.keys(out).length > 0 ? JSON.stringify(out) : undefined;
}

/**
 * When a StepRun began: what the runner says (`startedAtMs`), kept between
 * the earliest it can have begun in this pass and now (the runner's clock is
 * not ours); without it, that earliest moment.
 */
export function stepStart(run: Pick<RunView, 'stepsFromMs'>, said: unknown, nowMs: number): number {
  const from = Math.min(run.stepsFromMs ?? nowMs, nowMs);
  const at = finite(said);
  return at === undefined ? from : Math.min(Math.max(at, from), nowMs);
}

/**
 * One opcode -> one step outcome. Pure except for the ids it draws (child
 * runs, emitted events, deliveries), which are persisted with the step so a
 * replay sees the same ones.
 */
function opcodeOutcome(run: RunView, raw: RawOpcode, id: string, nowMs: number, newIds: IdSource, rnd: () => number): { step: StepOutcome; retryAfterMs?: number; fatal?: StepError } {
  const name = typeof raw.name === 'string' ? raw.name : id;
  const op = typeof raw.op === 'string' ? raw.op : 'unknown';
  const attempts = (run.stepAttempts.get(id) ?? 0) + 1;
  const base = { id, name, op, attempts };
  const failStep = (message: string): { step: StepOutcome } => ({ step: { ...base, status: 'failed', memo: true, error: { message } } });
  const gap = capabilityGap(op);
  if (gap) {
    // Not retriable: no attempt can succeed until the missing service exists, so the run fails with it too.
    const error = { message: gap };
    return { step: { ...base, status: 'failed', memo: true, error }, fatal: error };
  }
  switch (op) {
    case 'StepRun': {
      const inputJson = raw.input === undefined ? undefined : JSON.stringify(raw.input);
      const usageJson = usageOf(raw.usage);
      const startedAtMs = stepStart(run, raw.startedAtMs, nowMs);
      if (raw.error === undefined) {
        return { step: { ...base, status: 'succeeded', dataJson: JSON.stringify(raw.data ?? null), inputJson, memo: true, startedAtMs, ...(usageJson ? { usageJson } : {}) } };
      }
      const error = asStepError(raw.error, 'Step failed.');
      const retriable = raw.retriable !== false;
      if (retriable && attempts < run.maxAttempts) {
        const after = finite(raw.retryAfterMs) !== undefined && (raw.retryAfterMs as number) >= 0 ? (raw.retryAfterMs as number) : retryDelayMs(attempts, run.retryBackoff, rnd);
        // The memo never holds an error that will still be retried.
        return { step: { ...base, status: 'retrying', error, inputJson, memo: false, startedAtMs }, retryAfterMs: after };
      }
      return { step: { ...base, status: 'failed', error, inputJson, memo: true, startedAtMs }, fatal: retriable ? undefined : error };
    }
    case 'Sleep': {
      const ms = finite(raw.sleepMs);
      if (ms === undefined || ms < 0) return failStep('Sleep needs a non-negative sleepMs.');
      // SPEC: the wake time is resolved once, when the sleep is persisted.
      return { step: { ...base, status: 'sleeping', wakeAtMs: nowMs + ms, memo: true } };
    }
    case 'SleepUntil': {
      const at = finite(raw.sleepUntilMs);
      if (at === undefined) return failStep('SleepUntil needs sleepUntilMs (UTC epoch ms).');
      // Stored verbatim: a past deadline wakes on the next cycle.
      return { step: { ...base, status: 'sleeping', wakeAtMs: at, memo: true } };
    }
    case 'WaitForEvent': {
      const eventName = optStr(raw.eventName);
      if (!eventName) return failStep('WaitForEvent needs eventName.');
      const ifExpr = optStr(raw.eventIf);
      const timeout = finite(raw.timeoutMs);
      return {
        step: { ...base, status: 'waiting', wait: { eventName, ifExpr }, wakeAtMs: timeout !== undefined && timeout >= 0 ? nowMs + timeout : undefined, memo: true },
      };
    }
    case 'RunWorkflow': {
      const workflow = optStr(raw.childName);
      if (!workflow) return failStep('RunWorkflow needs childName.');
      return {
        step: {
          ...base,
          status: 'child',
          memo: true,
          child: { runId: newIds.run(), workflow, app: optStr(raw.childApp), runner: optStr(raw.childRunner), dataJson: JSON.stringify(raw.childData ?? null) },
        },
      };
    }
    case 'Emit': {
      const eventName = optStr(raw.eventName) ?? (typeof (raw.data as { name?: unknown })?.name === 'string' ? ((raw.data as { name: string }).name) : undefined);
      if (!eventName) return failStep('Emit needs eventName.');
      // An extension of SPEC's Emit: `delay` stores the event to be taken in later, its time resolved once, here.
      const delay = parseDelay(raw.delay, nowMs);
      if (!delay.ok) return failStep(`Emit: ${delay.error}`);
      const { dueAtMs } = delay;
      // Extensions of SPEC's Emit: the event's tags and session, as POST /events takes them.
      const tags = opcodeTags(raw.tags);
      if (!tags.ok) return failStep(`Emit: ${tags.message}`);
      const session = optStr(raw.session);
      if (session && session.length > MAX_SESSION) return failStep(`Emit: session is over ${MAX_SESSION} characters.`);
      const eventId = newIds.event();
      return {
        step: {
          ...base,
          status: 'succeeded',
          memo: true,
          dataJson: JSON.stringify(dueAtMs === undefined ? { id: eventId } : { id: eventId, scheduledFor: new Date(dueAtMs).toISOString() }),
          handoff: {
            kind: 'emit', eventId, name: eventName, dataJson: JSON.stringify(raw.data ?? null), dedupeId: optStr(raw.dedupeId), targetApp: optStr(raw.targetApp),
            ...(dueAtMs === undefined ? {} : { dueAtMs }),
            ...(tags.tags ? { tags: tags.tags } : {}),
            ...(session ? { session } : {}),
          },
        },
      };
    }
    case 'Webhook': {
      const url = optStr(raw.webhookUrl);
      if (!url || !/^https?:\/\//.test(url)) return failStep('Webhook needs an absolute http(s) webhookUrl.');
      const deliveryId = newIds.delivery();
      return {
        step: { ...base, status: 'succeeded', memo: true, dataJson: JSON.stringify({ deliveryId }), handoff: { kind: 'webhook', deliveryId, url, bodyJson: JSON.stringify(raw.data ?? null) } },
      };
    }
    case 'Tag': {
      const tags = opcodeTags(raw.tags);
      if (!tags.ok) return failStep(`Tag: ${tags.message}`);
      if (!tags.tags) return failStep('Tag needs tags: a non-empty array of strings.');
      return { step: { ...base, status: 'succeeded', memo: true, dataJson: JSON.stringify(tags.tags), addTags: tags.tags } };
    }
    case 'Score': {
      const d = raw.data as { name?: unknown; value?: unknown } | undefined;
      if (!d || typeof d.name !== 'string' || d.value === undefined) return failStep('Score needs data { name, value }.');
      // Memoised: a replay never writes the score twice.
      return { step: { ...base, status: 'succeeded', memo: true, dataJson: JSON.stringify(raw.data) } };
    }
    case 'Approval':
    case 'Infer': {
      // A model call past an AI spend ceiling is not made: the step fails (the handler may catch it).
      const over = op === 'Infer' && run.aiSpend ? spendCeilingReached(run.aiSpend) : undefined;
      if (over) return failStep(over);
      const ws = op === 'Infer' ? run.workspaceModel : undefined;
      const wsOver = ws ? workspaceCeilingReached(ws) : undefined;
      if (ws && wsOver) {
        const failed = failStep(wsOver);
        return { step: { ...failed.step, handoff: { kind: 'model_ceiling', month: ws.month, spent: ws.spent } } };
      }
      // Reached only once capabilities.ts lists the op: handed to the approvals service / the invoker's
      // model calls, the step stays pending until they answer (ResolveStep). No deadline here: an
      // Approval's timeoutMs is the approvals service's to act on (its onTimeout), never a null result.
      return {
        step: {
          ...base,
          status: 'waiting',
          memo: true,
          handoff: { kind: op === 'Approval' ? 'approval' : 'infer', requestJson: JSON.stringify(raw) },
        },
      };
    }
    default:
      // SPEC: an unrecognized op fails the step rather than re-invoking forever.
      return failStep(`Opcode ${op} is not supported by this service.`);
  }
}

function decideOpcodes(run: RunView, body: unknown, nowMs: number, newIds: IdSource, rnd: () => number): Decision {
  const parsed = body as { opcodes?: unknown } | undefined;
  const ops = parsed?.opcodes;
  if (!Array.isArray(ops)) return { type: 'fail', steps: [], error: { message: 'Runner answered 206 without an opcodes array.' } };
  const steps: StepOutcome[] = [];
  let retryAt: number | undefined;
  let failure: StepError | undefined;
  let progressed = false;
  const seen = new Set<string>();
  for (const raw of ops as RawOpcode[]) {
    const id = hashedIdOf(raw);
    if (!id) return { type: 'fail', steps, error: { message: BAD_STEP_ID } };
    if (seen.has(id)) continue;
    seen.add(id);
    const r = opcodeOutcome(run, raw, id, nowMs, newIds, rnd);
    steps.push(r.step);
    if (r.retryAfterMs !== undefined) retryAt = Math.min(retryAt ?? Infinity, nowMs + r.retryAfterMs);
    if (r.fatal) failure ??= r.fatal;
    if (r.step.status === 'succeeded' || r.step.status === 'failed') progressed = true;
  }
  if (failure) return { type: 'fail', steps, error: failure };
  if ((run.checkpointed ?? 0) > 0) progressed = true;
  // Something completed: the handler may go further at once.
  if (progressed && retryAt === undefined) return { type: 'continue', steps };
  const deadlines = [retryAt, ...steps.map((s) => s.wakeAtMs), ...run.pendingDeadlines].filter((d): d is number => d !== undefined);
  const untilMs = deadlines.length ? Math.min(...deadlines) : null;
  if (steps.length === 0 && untilMs === null && !run.hasOpenPending) {
    return { type: 'fail', steps, error: { message: 'Runner reported no new steps and nothing is pending: the run cannot make progress.' } };
  }
  return { type: 'park', untilMs, steps, attempt: retryAt !== undefined ? run.attempt + 1 : run.attempt };
}
