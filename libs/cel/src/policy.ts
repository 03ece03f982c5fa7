import { Cron } from 'croner';
import { checkCel } from './cel.js';

/**
 * The parts of a registered workflow object (POST /register
 * workflows[]) that decide when its runs start: triggers, cron schedules
 * and flow control. Ingest enforces them; the invoker validates them at
 * register time with the same parser, so what is accepted is what runs.
 * Shapes follow what users of durable-workflow services know (Inngest's
 * names): `concurrency`, `rateLimit`, `throttle`, `debounce`,
 * `batchEvents`, `singleton`, `idempotency`, `priority`, and `cancelOn`
 * (which ends runs rather than starting them).
 */
export interface WorkflowPolicy {
  /** Event triggers; undefined when the workflow gave no triggers list (an implicit trigger on its name). */
  events: EventTriggerSpec[] | undefined;
  crons: CronSpec[];
  /** Each: at most `limit` runs holding a slot at once per evaluated key (enforced by the scheduler); a run needs a slot of each. */
  concurrency?: ConcurrencySpec[];
  /** At most `limit` runs per `period` per key (burst of `limit`); the excess is dropped. */
  rateLimit?: { limit: number; periodMs: number; key?: string };
  /** Runs spread evenly, `limit` per `period` per key (bursts of `burst`); the excess waits, never dropped. */
  throttle?: { limit: number; periodMs: number; burst: number; key?: string };
  /** One run per key, `period` after the last event (last event wins), at most `timeout` after the first. */
  debounce?: { periodMs: number; key?: string; timeoutMs?: number };
  /** One run over up to `maxSize` events per key, started when full or `timeout` after the first. */
  batchEvents?: { maxSize: number; timeoutMs: number; key?: string };
  /** CEL key: one run per key per 24 h. */
  idempotency?: string;
  /**
   * At most one active run per key: `skip` drops the new one, `cancel` replaces the running one, `queue`
   * keeps it waiting until the active one ends (a slot of limit 1 that its run holds from start to end).
   */
  singleton?: { key?: string; mode: 'skip' | 'cancel' | 'queue' };
  /** CEL: higher starts first among queued runs. */
  priority?: string;
  /** Runs cancelled when still queued `startMs` after their creation, or not ended `finishMs` after it. */
  timeouts?: { startMs?: number; finishMs?: number };
  /** Events that cancel the workflow's active runs (an event matching one of them cancels the runs its `if` selects). */
  cancelOn?: CancelOnSpec[];
  /**
   * Paused by an operator (the invoker sets it in the config it announces): its events and cron ticks start no run;
   * with `hold`, ingest keeps each event's match and admits it once the workflow is resumed.
   */
  paused?: { at: string; by: string; hold?: true };
}

export interface ConcurrencySpec {
  limit: number;
  /** CEL over `event`; absent: one key for the whole workflow. */
  key?: string;
  /** env: the key's slots are shared by every workflow of the workspace with such a constraint on the same key. */
  scope?: 'env';
}

export interface CancelOnSpec {
  /** The exact event name, or the prefix when `isPrefix` (registered as `prefix*`). */
  event: string;
  isPrefix: boolean;
  /** CEL over `event` (the run's triggering event) and `async` (the cancelling event); '' cancels every active run. */
  if: string;
  /** Only runs created within this long before the event; 0: any age. */
  withinMs: number;
}

export interface EventTriggerSpec {
  /** The exact name, or the prefix when `isPrefix` (registered as `prefix*`). */
  event: string;
  isPrefix: boolean;
  /** CEL filter over `event`; '' for none. */
  if: string;
}

export interface CronSpec {
  /** As registered (with any `TZ=` prefix): the schedule's identity. */
  cron: string;
  /** The pattern without the time zone prefix. */
  pattern: string;
  /** IANA time zone; 'UTC' unless given (replicas must agree, so never the host's zone). */
  tz: string;
}

/** Batches are capped like Inngest's: a run's input must stay well under the bus's message size. */
export const MAX_BATCH_SIZE = 100;
const MAX_LIMIT = 1_000_000;
const MAX_PERIOD_MS = 7 * 24 * 3600_000;
const EVENT_VARS = { variables: ['event'] };
/** cancelOn's `if`: the run's triggering event and the incoming one, as Inngest names them. */
const CANCEL_VARS = { variables: ['event', 'async'] };
/** cancelOn entries a workflow may declare. */
export const MAX_CANCEL_ON = 10;
/** Concurrency constraints a workflow may declare (as Inngest allows). */
export const MAX_CONCURRENCY = 2;
/** cancelOn's `timeout` and `timeouts`: durations up to a year (runs sleep for days). */
const MAX_RUN_SPAN_MS = 366 * 86_400_000;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/gy;

/** A duration: ms as a number, or text like "500ms", "30s", "5m", "1h30m", "2d". Undefined when not one. */
export function parseDuration(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) && v >= 0 ? Math.round(v) : undefined;
  if (typeof v !== 'string') return undefined;
  const s = v.replace(/\s+/g, '').toLowerCase();
  if (s === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(s)) return Math.round(Number(s));
  let total = 0;
  let consumed = 0;
  PART.lastIndex = 0;
  for (let m = PART.exec(s); m; m = PART.exec(s)) {
    total += Number(m[1]) * UNIT_MS[m[2]!]!;
    consumed = PART.lastIndex;
  }
  return consumed === s.length ? Math.round(total) : undefined;
}

const TZ_PREFIX = /^(?:CRON_)?TZ=(\S+)\s+(.+)$/;

/**
 * A cron trigger: `{ cron: "0 9 * * *" }`, with the zone as a prefix
 * (`TZ=Europe/Paris 0 9 * * *`) or a field (`tz` / `timezone`). Five
 * fields, or six with seconds first; croner's nicknames (`@hourly`) too.
 */
export function parseCron(trigger: { cron: string; tz?: unknown; timezone?: unknown }): { ok: true; spec: CronSpec } | { ok: false; error: string } {
  const raw = trigger.cron.trim();
  const m = TZ_PREFIX.exec(raw);
  const field = typeof trigger.tz === 'string' ? trigger.tz : typeof trigger.timezone === 'string' ? trigger.timezone : undefined;
  const tz = m?.[1] ?? field ?? 'UTC';
  const pattern = (m?.[2] ?? raw).trim();
  try {
    const c = new Cron(pattern, { timezone: tz, paused: true });
    c.nextRun();
  } catch (err) {
    return { ok: false, error: `cron "${raw}" is not valid: ${(err as Error).message}` };
  }
  // A zone given as a field is part of the identity too (a change of zone is a new schedule).
  return { ok: true, spec: { cron: m || !field ? raw : `TZ=${tz} ${raw}`, pattern, tz } };
}

/** The first tick of a schedule strictly after `after`; null when it never fires again. */
export function nextCronTick(spec: Pick<CronSpec, 'pattern' | 'tz'>, after: Date): Date | null {
  return new Cron(spec.pattern, { timezone: spec.tz, paused: true }).nextRun(after);
}

/**
 * A registered `timeouts` in ms, leaving out what does not parse (the
 * registration's parse names it): for readers of stored configs.
 */
export function runTimeouts(v: unknown): { startMs?: number; finishMs?: number } | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const ms = (x: unknown) => {
    const d = x === undefined || x === null ? undefined : parseDuration(x);
    return d !== undefined && d >= 1 && d <= MAX_RUN_SPAN_MS ? d : undefined;
  };
  const { start, finish } = v as { start?: unknown; finish?: unknown };
  const startMs = ms(start);
  const finishMs = ms(finish);
  return startMs === undefined && finishMs === undefined ? undefined : { ...(startMs !== undefined && { startMs }), ...(finishMs !== undefined && { finishMs }) };
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Parse a registered workflow object. Never throws: what does not parse is
 * left out of the policy and named in `problems` (the invoker turns
 * problems into a 400 at register time; ingest logs them and enforces the
 * rest).
 */
export function parseWorkflowPolicy(config: Obj): { policy: WorkflowPolicy; problems: string[] } {
  const problems: string[] = [];
  const policy: WorkflowPolicy = { events: undefined, crons: [] };
  if (isObj(config.paused)) {
    policy.paused = { at: String(config.paused.at ?? ''), by: String(config.paused.by ?? ''), ...(config.paused.hold === true ? { hold: true as const } : {}) };
  }

  const cel = (field: string, v: unknown, type?: 'bool' | 'int', vars = EVENT_VARS): string | undefined => {
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string') {
      problems.push(`${field} must be a CEL expression (string).`);
      return undefined;
    }
    const err = checkCel(v, { ...vars, type });
    if (err) {
      problems.push(`${field} does not compile: ${err}.`);
      return undefined;
    }
    return v;
  };
  const int = (field: string, v: unknown, min: number, max: number): number | undefined => {
    if (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max) return v;
    problems.push(`${field} must be an integer from ${min} to ${max}.`);
    return undefined;
  };
  const duration = (field: string, v: unknown, min = 1, max = MAX_PERIOD_MS): number | undefined => {
    const ms = parseDuration(v);
    if (ms !== undefined && ms >= min && ms <= max) return ms;
    problems.push(`${field} must be a duration from ${min}ms to ${max / 86_400_000}d (ms, or text like "30s", "5m", "1h").`);
    return undefined;
  };
  const obj = (field: string): Obj | undefined => {
    const v = config[field];
    if (v === undefined || v === null) return undefined;
    if (isObj(v)) return v;
    problems.push(`${field} must be an object.`);
    return undefined;
  };

  if (Array.isArray(config.triggers)) {
    policy.events = [];
    for (const [i, t] of config.triggers.entries()) {
      if (!isObj(t)) continue; // shape errors are the registration's own check
      if (typeof t.event === 'string') {
        const expr = cel(`triggers[${i}].if`, t.if, 'bool');
        if (t.if !== undefined && t.if !== null && t.if !== '' && expr === undefined) continue; // never match on a broken filter
        const isPrefix = t.event.endsWith('*');
        policy.events.push({ event: isPrefix ? t.event.slice(0, -1) : t.event, isPrefix, if: expr ?? '' });
      } else if (typeof t.cron === 'string') {
        const c = parseCron(t as { cron: string });
        if (c.ok) policy.crons.push(c.spec);
        else problems.push(`triggers[${i}]: ${c.error}.`);
      }
    }
  }

  // concurrency: a number (the limit), { limit, key?, scope? } or up to two of them (Inngest's shape).
  const concs = config.concurrency === undefined || config.concurrency === null ? [] : Array.isArray(config.concurrency) ? config.concurrency : [config.concurrency];
  if (concs.length > MAX_CONCURRENCY) problems.push(`concurrency: at most ${MAX_CONCURRENCY} constraints.`);
  const constraints: ConcurrencySpec[] = [];
  for (const [i, raw] of concs.slice(0, MAX_CONCURRENCY).entries()) {
    const field = Array.isArray(config.concurrency) ? `concurrency[${i}]` : 'concurrency';
    const c = typeof raw === 'number' ? { limit: raw } : raw;
    if (!isObj(c)) {
      problems.push(`${field} must be { limit, key? } or a number.`);
      continue;
    }
    // env: the key's slots are shared by every workflow of the workspace that names it (Inngest's environment);
    // account would span workspaces, which share nothing here: refused rather than run per workspace.
    const scope = c.scope === undefined || c.scope === 'fn' ? 'fn' : c.scope === 'env' ? 'env' : undefined;
    if (!scope) problems.push(`${field}.scope must be "fn" (per workflow) or "env" (shared by the workspace's workflows); "account" is not supported.`);
    const limit = int(`${field}.limit`, c.limit, 1, MAX_LIMIT);
    const key = cel(`${field}.key`, c.key);
    if (scope === 'env' && !key) problems.push(`${field}.key is required with scope "env": it names the shared slots.`);
    if (limit === undefined || !scope || (scope === 'env' && !key)) continue;
    if (scope === 'env' && constraints.some((o) => o.scope === 'env')) problems.push(`${field}: at most one constraint with scope "env".`);
    else if (constraints.some((o) => (o.scope ?? 'fn') === scope && (o.key ?? '') === (key ?? ''))) problems.push(`${field} repeats the key of another constraint.`);
    else constraints.push({ limit, ...(key && { key }), ...(scope === 'env' && { scope }) });
  }
  if (constraints.length > 0) policy.concurrency = constraints;

  const rl = obj('rateLimit');
  if (rl) {
    const limit = int('rateLimit.limit', rl.limit, 1, MAX_LIMIT);
    const periodMs = duration('rateLimit.period', rl.period);
    const key = cel('rateLimit.key', rl.key);
    if (limit !== undefined && periodMs !== undefined) policy.rateLimit = { limit, periodMs, ...(key && { key }) };
  }

  const th = obj('throttle');
  if (th) {
    const limit = int('throttle.limit', th.limit, 1, MAX_LIMIT);
    const periodMs = duration('throttle.period', th.period);
    const burst = th.burst === undefined ? 1 : int('throttle.burst', th.burst, 1, MAX_LIMIT);
    const key = cel('throttle.key', th.key);
    if (limit !== undefined && periodMs !== undefined && burst !== undefined) policy.throttle = { limit, periodMs, burst, ...(key && { key }) };
  }

  const db = obj('debounce');
  if (db) {
    const periodMs = duration('debounce.period', db.period);
    const timeoutMs = db.timeout === undefined ? undefined : duration('debounce.timeout', db.timeout);
    const key = cel('debounce.key', db.key);
    if (periodMs !== undefined && (db.timeout === undefined || timeoutMs !== undefined)) {
      policy.debounce = { periodMs, ...(key && { key }), ...(timeoutMs !== undefined && { timeoutMs }) };
    }
  }

  const be = obj('batchEvents');
  if (be) {
    const maxSize = int('batchEvents.maxSize', be.maxSize, 1, MAX_BATCH_SIZE);
    const timeoutMs = duration('batchEvents.timeout', be.timeout);
    const key = cel('batchEvents.key', be.key);
    if (maxSize !== undefined && timeoutMs !== undefined) policy.batchEvents = { maxSize, timeoutMs, ...(key && { key }) };
  }
  if (policy.debounce && policy.batchEvents) {
    problems.push('debounce and batchEvents cannot be combined.');
    delete policy.batchEvents;
  }

  if (config.idempotency !== undefined && config.idempotency !== null) {
    const key = cel('idempotency', config.idempotency);
    if (key) policy.idempotency = key;
  }

  const sg = obj('singleton');
  if (sg) {
    const mode = sg.mode === undefined ? 'skip' : sg.mode;
    if (mode !== 'skip' && mode !== 'cancel' && mode !== 'queue') problems.push('singleton.mode must be "skip", "cancel" or "queue".');
    else if (mode === 'queue' && policy.concurrency) {
      // A queued singleton holds its slot through sleeps and waits; concurrency's are given back then. One run
      // holding one slot and not another is not modelled: refused rather than quietly holding both.
      problems.push('singleton mode "queue" cannot be combined with concurrency: it is a limit of 1 per key held from start to end.');
    } else {
      const key = cel('singleton.key', sg.key);
      policy.singleton = { mode, ...(key && { key }) };
    }
  }

  // priority: CEL text, or { run: CEL } as Inngest spells it.
  const pr = isObj(config.priority) ? config.priority.run : config.priority;
  if (pr !== undefined && pr !== null) {
    const expr = cel('priority', pr, 'int');
    if (expr) policy.priority = expr;
  }

  if (config.cancelOn !== undefined && config.cancelOn !== null) {
    const list = Array.isArray(config.cancelOn) ? config.cancelOn : [config.cancelOn];
    if (list.length > MAX_CANCEL_ON) problems.push(`cancelOn: at most ${MAX_CANCEL_ON} entries.`);
    const specs: CancelOnSpec[] = [];
    for (const [i, c] of list.slice(0, MAX_CANCEL_ON).entries()) {
      const field = `cancelOn[${i}]`;
      if (!isObj(c) || typeof c.event !== 'string' || c.event === '' || c.event === '*') {
        problems.push(`${field} must be { event, if?, timeout? } with a non-empty event name.`);
        continue;
      }
      const expr = cel(`${field}.if`, c.if, 'bool', CANCEL_VARS);
      if (c.if !== undefined && c.if !== null && c.if !== '' && expr === undefined) continue; // never cancel on a broken filter
      const withinMs = c.timeout === undefined || c.timeout === null ? 0 : duration(`${field}.timeout`, c.timeout, 1, MAX_RUN_SPAN_MS);
      if (withinMs === undefined) continue;
      const isPrefix = c.event.endsWith('*');
      specs.push({ event: isPrefix ? c.event.slice(0, -1) : c.event, isPrefix, if: expr ?? '', withinMs });
    }
    if (specs.length > 0) policy.cancelOn = specs;
  }

  const to = obj('timeouts');
  if (to) {
    const unknown = Object.keys(to).filter((k) => k !== 'start' && k !== 'finish');
    if (unknown.length > 0) problems.push(`timeouts takes start and finish only (not ${unknown.join(', ')}).`);
    const within = (k: 'start' | 'finish') => (to[k] === undefined || to[k] === null ? undefined : duration(`timeouts.${k}`, to[k], 1, MAX_RUN_SPAN_MS));
    const startMs = within('start');
    const finishMs = within('finish');
    if (startMs !== undefined || finishMs !== undefined) policy.timeouts = { ...(startMs !== undefined && { startMs }), ...(finishMs !== undefined && { finishMs }) };
  }

  return { policy, problems };
}
