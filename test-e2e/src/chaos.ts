import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Runner } from '@dws/sdk';
import { seededRandom } from '@dws/testing';
import { api } from './api.js';
import { checkInvariants, isTerminal, toldEvent, type CoalescedEvent, type InvariantReport, type StartedKey } from './chaos-check.js';
import { SERVICES, startDeployment, type Deployment } from './deployment.js';
import { startPrivateInfra, type PrivateInfra } from './private-infra.js';
import { startRunner, type TestRunner } from './runner.js';

/**
 * The chaos test (issues 11 and 17): the six-process fleet under ~20 runs in
 * flight (10-step, sleeping, emit / waitForEvent pairs, child runs under a
 * limit, webhooks from steps, approvals granted through the API, bursts under
 * two concurrency limits, queued singletons, debounced, batched and
 * idempotent events, runs paused and resumed or cancelled mid-pass, then
 * replayed) while a seeded killer SIGKILLs a random service every 10 s and
 * restarts it, and (with `infraRestarts`) nats-server and Postgres crash once
 * each. When the load stops, every run must be terminal within the settle
 * time with its expected result, no step stored twice, no emit or webhook
 * duplicated, no delivery lost, every timeline gap-free, never more runs
 * inside a concurrency or singleton key at once than it admits, the
 * debounced, batched and idempotent events must have started the runs their
 * policies say, none twice, and a paused or cancelled run must have begun no
 * step but the one in flight. Everything is driven and read through the
 * public API and the SDK; see chaos-check.ts for the invariants.
 */

export interface ChaosOptions {
  /** How long the load runs and services are killed, in ms. */
  loadMs: number;
  /** Runs kept in flight (a pair counts two). @default 20 */
  inFlight?: number;
  /** One kill every this many ms while the load runs. @default 10_000 */
  killEveryMs?: number;
  /** Seed of the kill order and the workload mix. @default a random one (printed) */
  seed?: number;
  /** The first kill is the invoker, and then at least every third. @default false */
  forceInvoker?: boolean;
  /** Every run must be terminal this long after the load stops, in ms. @default 60_000 */
  settleMs?: number;
  /**
   * Also crash and restart the infrastructure once each during the load:
   * nats-server at a third, Postgres at two thirds. The fleet then runs on a
   * private Postgres and nats-server (private-infra.ts), so no other test on
   * the machine is hurt. @default false
   */
  infraRestarts?: boolean;
  /**
   * A rolling restart instead of crashes: every `killEveryMs` the next service
   * in turn gets SIGTERM, has 30 s to drain and exit by itself, and is started
   * again; each stop is recorded (and one that had to be forced, or exited
   * non-zero, breaks an invariant). @default false
   */
  rolling?: boolean;
  /**
   * Processes per service: with 2, each kill takes one replica down while the
   * other carries on, and the load goes to both gateways in turn. @default 1
   */
  replicas?: number;
  /** The runner dials the Connect socket (through the first gateway) instead of being called over HTTP. @default false */
  connect?: boolean;
  /** Extra environment for every service process. */
  env?: Record<string, string>;
  /** Progress lines. @default none */
  log?: (line: string) => void;
}

export interface ChaosReport extends InvariantReport {
  seed: number;
  loadMs: number;
  /** Events the load generator sent (each meant to start exactly one run). */
  sent: number;
  kills: Record<string, number>;
  killLog: { atMs: number; service: string; restartMs: number }[];
  /**
   * Step executions the runner saw beyond the first for one (run, step): the
   * step of a pass that died in flight runs again, which is allowed (its
   * result was never stored); a stored one re-run would show as a mismatch.
   */
  reExecutions: number;
  /** POSTs retried (with the same dedupeId) because the gateway or a service behind it was down. */
  postRetries: number;
  /** From the load stopping until no run was active, in ms; undefined when that never happened. */
  terminalAfterMs?: number;
  /** Unexpected answers during the load (an event that started no run, a 4xx). */
  loadErrors: string[];
  /** Runs paused, checked and resumed; replays asked for (each must succeed). */
  paused: number;
  /** The longest a paused run took to show `paused` after its pause was answered (600 ms at least: when it was first looked at). */
  slowestPauseMs: number;
  replays: number;
  /** Replays whose first try got no answer (or a 5xx) and were sent again with the same Idempotency-Key. */
  replaysRetried: number;
  /** Events sent with a `delay`: each must start its one run once taken in, whatever was killed meanwhile. */
  delayed: number;
  /** `chaos.ten` events held while that workflow was paused with hold: each must start its one run once it is resumed. */
  held: number;
  /** How often `chaos.ten` was paused with hold during the load (and resumed). */
  holds: number;
  /** Paused runs that were not paused, or began more than the step in flight, and cancelled runs that began more. */
  controlMismatches: string[];
  /** Rolling mode: how each SIGTERMed service went (a forced or failed exit is a violation). */
  stops: { service: string; ms: number; forced: boolean; code: number | null }[];
  /** The concurrency keys of `chaos.limited` and `chaos.child`, and `chaos.single`'s singleton keys: the most runs seen inside each at once, and its limit. */
  occupancy: { key: string; peak: number; limit: number }[];
}

export const CHAOS_APP = 'chaos';
/** A waiter gives up after this: long enough for any emit of the run, short enough to end inside the settle time. */
const WAIT_TIMEOUT_MS = 45_000;
/** During the load, a worker stops watching a run after this (it is still checked at the end) and starts another. */
const WATCH_CAP_MS = 30_000;
const POLL_MS = 500;
/** How long one GET /v1/runs/{id}/wait of the load is held at most. */
const WAIT_MS = 3_000;
/** After the load stops, how long the debounced and batched events sent last may take to start their runs. */
const COALESCED_START_MS = 5_000;
/**
 * No request of the load waits longer than this: every service call behind the gateway gives up
 * within seconds, so a request still unanswered after it is a hang, reported with its path (a
 * worker stuck in one would otherwise hold the load open until the test's own timeout).
 */
const REQUEST_TIMEOUT_MS = 20_000;

const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A seeded PRNG, so a seed replays the kill order and the mix. */
const prng = seededRandom;

/** `chaos.limited`'s limits: runs inside a step at once in all, and per user. */
const LIMITED_ALL = 3;
const LIMITED_USERS = ['u0', 'u1', 'u2', 'u3'];
/** The users of `chaos.single`'s bursts (three runs over two: one user's second run waits). */
const SINGLE_USERS = ['u0', 'u1'];
/** `chaos.child`'s limit. */
const CHILD_LIMIT = 1;

/**
 * Which runs are inside each concurrency key (a step of it, or for a queued
 * singleton all of the run from its first step's start to its last step's
 * end), and the most seen at once. A run counts once however many of its
 * executions overlap: a pass that died in flight may leave its step running
 * while the run's next pass starts, and both hold the one slot the run was
 * admitted to.
 */
class Occupancy {
  private readonly inside = new Map<string, Map<string, number>>();
  readonly peak = new Map<string, number>();

  private runsOf(key: string): Map<string, number> {
    const runs = this.inside.get(key) ?? new Map<string, number>();
    this.inside.set(key, runs);
    return runs;
  }

  private enter(key: string, runId: string, executions: number): void {
    const runs = this.runsOf(key).set(runId, executions);
    this.peak.set(key, Math.max(this.peak.get(key) ?? 0, runs.size));
  }

  async during<T>(keys: string[], runId: string, fn: () => Promise<T>): Promise<T> {
    for (const k of keys) this.enter(k, runId, (this.runsOf(k).get(runId) ?? 0) + 1);
    try {
      return await fn();
    } finally {
      for (const k of keys) {
        const runs = this.runsOf(k);
        const n = runs.get(runId)! - 1;
        if (n === 0) runs.delete(runId);
        else runs.set(runId, n);
      }
    }
  }

  /** The run is inside `key` from now until `close` (opened again meanwhile: still inside, once). */
  open(key: string, runId: string): void {
    this.enter(key, runId, 1);
  }

  close(key: string, runId: string): void {
    this.runsOf(key).delete(runId);
  }
}

/** The workflows; `executed` counts each (run, step) execution to report re-runs; webhooks go to `hookUrl`. */
function defineWorkflows(r: Runner, executed: Map<string, number>, hookUrl: string, occupancy: Occupancy, starts: Map<string, number[]>): void {
  const token = () => randomBytes(6).toString('hex');
  // A step takes a few ms, so some pass is nearly always in flight when a process dies.
  const work = async (runId: string, name: string) => {
    const k = `${runId}/${name}`;
    executed.set(k, (executed.get(k) ?? 0) + 1);
    await delay(5 + Math.floor(Math.random() * 20));
    return token();
  };

  r.workflow('chaos.ten', {}, async ({ step, ctx }) => {
    const tokens: string[] = [];
    for (let i = 1; i <= 10; i++) tokens.push(await step.run(`s${i}`, () => work(ctx.runId, `s${i}`)));
    return { tokens };
  });
  r.workflow<{ key: string; sleepMs: [number, number] }>('chaos.sleepy', {}, async ({ event, step, ctx }) => {
    const a = await step.run('a', () => work(ctx.runId, 'a'));
    await step.sleep('nap-1', event.data.sleepMs[0]);
    const b = await step.run('b', () => work(ctx.runId, 'b'));
    await step.sleep('nap-2', event.data.sleepMs[1]);
    const c = await step.run('c', () => work(ctx.runId, 'c'));
    return { tokens: [a, b, c] };
  });
  // The emit's step id is fixed ('tell') and carries no dedupeId: exactly-once is the service's job.
  r.workflow<{ key: string }>('chaos.emitter', {}, async ({ event, step, ctx }) => {
    const t = await step.run('prep', () => work(ctx.runId, 'prep'));
    await step.emit('tell', { name: toldEvent(event.data.key), data: { key: event.data.key, token: t } });
    return { token: t };
  });
  r.workflow<{ key: string; emitter: string }>('chaos.waiter', {}, async ({ event, step }) => {
    const ev = await step.waitForEvent<{ token: string }>('told', { event: toldEvent(event.data.emitter), timeout: WAIT_TIMEOUT_MS });
    return { got: ev !== null, token: ev?.data.token ?? null };
  });
  // A child run: its result comes back to the parent exactly once, however often either is re-driven.
  r.workflow<{ key: string }>('chaos.parent', {}, async ({ event, step, ctx }) => {
    const token = await step.run('p', () => work(ctx.runId, 'p'));
    const child = await step.runWorkflow('kid', { workflow: 'chaos.child', data: { key: childKey(event.data.key) } });
    return { token, child };
  });
  // Under a limit of its own: the children of parents that overlap queue for it.
  r.workflow<{ key: string }>('chaos.child', { concurrency: { limit: CHILD_LIMIT } }, async ({ step, ctx }) => ({
    token: await step.run('c', () => occupancy.during(['child'], ctx.runId, () => work(ctx.runId, 'c'))),
  }));
  // A webhook from a step: one delivery per run (its id memoised), received at least once.
  r.workflow<{ key: string }>('chaos.hook', {}, async ({ event, step, ctx }) => {
    const token = await step.run('h', () => work(ctx.runId, 'h'));
    const sent = (await ctx.webhook.send('hook', { url: hookUrl, body: { key: event.data.key, token } })) as { deliveryId: string };
    return { token, deliveryId: sent.deliveryId };
  });
  // An approval the load generator grants: the run resumes once, with the decision.
  r.workflow<{ key: string }>('chaos.gated', {}, async ({ event, step, ctx }) => {
    const decision = await step.approval('gate', { tool: 'chaos.tool', args: { key: event.data.key } });
    const token = await step.run('after', () => work(ctx.runId, 'after'));
    return { status: decision.status, token };
  });
  // Two concurrency constraints: a slot in all and one of its user's, held inside the steps and given back for the nap.
  r.workflow<{ key: string; user: string; napMs: number }>(
    'chaos.limited',
    { concurrency: [{ limit: LIMITED_ALL }, { limit: 1, key: 'event.data.user' }] },
    async ({ event, step, ctx }) => {
      const keys = ['all', `user ${event.data.user}`];
      const a = await step.run('a', () => occupancy.during(keys, ctx.runId, () => work(ctx.runId, 'a')));
      await step.sleep('nap', event.data.napMs);
      const b = await step.run('b', () => occupancy.during(keys, ctx.runId, () => work(ctx.runId, 'b')));
      return { tokens: [a, b] };
    },
  );
  // Events of a group coalesce: one run with the last (debounce), with the first (idempotency), or over all (a batch).
  r.workflow<{ key: string; group: string; n: number }>(
    'chaos.debounced',
    { debounce: { key: 'event.data.group', period: '500ms' } },
    async ({ event, step, ctx }) => ({ n: event.data.n, token: await step.run('d', () => work(ctx.runId, 'd')) }),
  );
  r.workflow<{ key: string; group: string; n: number }>(
    'chaos.once',
    { idempotency: 'event.data.group' },
    async ({ event, step, ctx }) => ({ n: event.data.n, token: await step.run('o', () => work(ctx.runId, 'o')) }),
  );
  r.workflow<{ data: { group: string; n: number } }[]>(
    'chaos.batched',
    { batchEvents: { maxSize: 3, timeout: '1s', key: 'event.data.group' } },
    async ({ event, step, ctx }) => ({ ns: event.data.map((e) => e.data.n), token: await step.run('b', () => work(ctx.runId, 'b')) }),
  );
  // Six steps in one pass, paused or cancelled by the load while they go: `starts` says when each began.
  r.workflow('chaos.paced', {}, async ({ step, ctx }) => {
    const tokens: string[] = [];
    for (let i = 1; i <= 6; i++) {
      tokens.push(
        await step.run(`s${i}`, async () => {
          starts.set(ctx.runId, [...(starts.get(ctx.runId) ?? []), Date.now()]);
          await delay(30);
          return work(ctx.runId, `s${i}`);
        }),
      );
    }
    return { tokens };
  });
  // A queued singleton: one run of a user's from its first step to its last, its nap included.
  r.workflow<{ key: string; user: string; napMs: number }>(
    'chaos.single',
    { singleton: { key: 'event.data.user', mode: 'queue' } },
    async ({ event, step, ctx }) => {
      const key = `single ${event.data.user}`;
      const a = await step.run('a', () => (occupancy.open(key, ctx.runId), work(ctx.runId, 'a')));
      await step.sleep('nap', event.data.napMs);
      const b = await step.run('b', async () => {
        const t = await work(ctx.runId, 'b');
        occupancy.close(key, ctx.runId);
        return t;
      });
      return { tokens: [a, b] };
    },
  );
}

/** The key a parent's child run carries in its input. */
export const childKey = (key: string): string => `${key}c`;

/** Start the fleet and a runner, run the chaos, check the invariants, stop everything. */
export async function runChaos(opts: ChaosOptions): Promise<ChaosReport> {
  const seed = opts.seed ?? randomBytes(4).readUInt32LE();
  const log = opts.log ?? (() => undefined);
  log(
    `chaos: seed ${seed}, load ${Math.round(opts.loadMs / 1000)} s, ${opts.inFlight ?? 20} in flight, ${opts.rolling ? 'a rolling restart' : 'a kill'} every ${(opts.killEveryMs ?? 10_000) / 1000} s${opts.forceInvoker ? ' (invoker forced)' : ''}`,
  );
  const infra = opts.infraRestarts ? await startPrivateInfra() : undefined;
  const saved = { db: process.env.TEST_DATABASE_URL, nats: process.env.TEST_NATS_URL };
  if (infra) {
    // startDeployment takes the infrastructure where the jest setup publishes it.
    process.env.TEST_DATABASE_URL = infra.databaseUrl;
    process.env.TEST_NATS_URL = infra.natsUrl;
    log(`chaos: private Postgres ${infra.databaseUrl}, nats-server ${infra.natsUrl}`);
  }
  let dep: Deployment | undefined;
  let runner: TestRunner | undefined;
  let hooks: HookReceiver | undefined;
  try {
    dep = await startDeployment('fleet', { env: opts.env, replicas: Object.fromEntries(SERVICES.map((s) => [s, opts.replicas ?? 1])) });
    const executed = new Map<string, number>();
    const occupancy = new Occupancy();
    const starts = new Map<string, number[]>();
    hooks = await startHookReceiver();
    runner = await startRunner(dep, (r) => defineWorkflows(r, executed, hooks!.url, occupancy, starts), { app: CHAOS_APP, connect: opts.connect });
    const report = await drive(dep, seed, opts, log, infra, hooks, starts);
    report.reExecutions = [...executed.values()].reduce((n, c) => n + c - 1, 0);
    // Each user's slot and each queued singleton's key admit one.
    const limitOf = (key: string) => (key === 'all' ? LIMITED_ALL : key === 'child' ? CHILD_LIMIT : 1);
    report.occupancy = [...occupancy.peak].map(([key, peak]) => ({ key, peak, limit: limitOf(key) }));
    log(summaryLine(report));
    return report;
  } finally {
    await runner?.close();
    await dep?.stop();
    await hooks?.close();
    if (infra) {
      await infra.stop();
      process.env.TEST_DATABASE_URL = saved.db;
      process.env.TEST_NATS_URL = saved.nats;
    }
  }
}

/** The partner end of the chaos webhooks: every POST it got, by delivery id (a redelivery is allowed, a second id per run is not). */
interface HookReceiver {
  url: string;
  /** delivery id -> { key, times received } */
  got: Map<string, { key: string; times: number }>;
  close(): Promise<void>;
}

async function startHookReceiver(): Promise<HookReceiver> {
  const got: HookReceiver['got'] = new Map();
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const id = String(req.headers['x-service-delivery-id'] ?? '');
      let key = '?';
      try {
        key = String((JSON.parse(raw) as { key?: unknown }).key);
      } catch {
        /* recorded under '?' */
      }
      const seen = got.get(id);
      got.set(id, { key, times: (seen?.times ?? 0) + 1 });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    got,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

async function drive(
  dep: Deployment,
  seed: number,
  opts: ChaosOptions,
  log: (line: string) => void,
  infra: PrivateInfra | undefined,
  hooks: HookReceiver,
  starts: Map<string, number[]>,
): Promise<ChaosReport> {
  // Two streams: the workers draw from theirs in whatever order their runs end, so the kill order
  // replays from the seed only if the killer has its own.
  const rng = prng(seed);
  const killRng = prng(seed ^ 0x9e3779b9);
  const started: StartedKey[] = [];
  const coalesced: CoalescedEvent[] = [];
  const controlMismatches: string[] = [];
  let paused = 0;
  let slowestPauseMs = 0;
  let replays = 0;
  let replaysRetried = 0;
  let delayed = 0;
  let held = 0;
  let holds = 0;
  const loadErrors: string[] = [];
  let postRetries = 0;
  let posts = 0;
  let seq = 0;
  const t0 = Date.now();
  const loadEnd = t0 + opts.loadMs;
  const loading = () => Date.now() < loadEnd;
  const at = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
  let requests = 0;
  /** A request of the load, to each gateway in turn; one that hangs is recorded as a load error naming it, and rejects like a lost answer. */
  const call = async (method: 'GET' | 'POST', path: string, body?: unknown, headers?: Record<string, string>) => {
    const sent = Date.now();
    try {
      const base = dep.bases[requests++ % dep.bases.length]!;
      return await api(base, method, path, { key: dep.secretKey, body, headers, timeoutMs: REQUEST_TIMEOUT_MS });
    } catch (err) {
      if ((err as Error).name === 'TimeoutError') {
        loadErrors.push(`${at()} ${method} ${path}: no answer ${Date.now() - sent} ms after it was sent (at ${((sent - t0) / 1000).toFixed(1)}s)`);
      }
      throw err;
    }
  };
  const get = (path: string) => call('GET', path);

  /** The run an event of ours started, from the event log: for a retried POST whose first 202 was lost. */
  const runOfEvent = async (name: string, key: string): Promise<string | undefined> => {
    const res = await get(`/v1/events?name=${encodeURIComponent(name)}&app=${CHAOS_APP}&limit=1000`).catch(() => undefined);
    if (res?.status !== 200) return undefined;
    const ev = (res.body as { data?: { key?: string }; triggered?: { runId?: string }[] }[]).find((e) => e.data?.key === key);
    return ev?.triggered?.[0]?.runId;
  };

  /**
   * POST /v1/events until it is answered; a retry reuses the dedupeId, so it never starts a second run.
   * With `delayMs` the event is taken in that much later: its run is found in the event log then.
   */
  const send = async (s: StartedKey | CoalescedEvent, name: string, data: Record<string, unknown>, delayMs?: number): Promise<string | undefined> => {
    const key = 'key' in s ? s.key : `${s.group}.${s.n}`;
    // Retried under one dedupe id: in the body, or for every other event as the POST's Idempotency-Key (which ingest takes as it).
    const byHeader = ++posts % 2 === 0;
    const body = { name, app: CHAOS_APP, data: { ...data, key }, ...(!byHeader && { dedupeId: `chaos-${key}` }), ...(delayMs !== undefined && { delay: delayMs }) };
    const headers = byHeader ? { 'idempotency-key': `chaos-${key}` } : undefined;
    for (let attempt = 0; ; attempt++) {
      const res = await call('POST', '/v1/events', body, headers).catch(() => undefined);
      if (res?.status === 202) {
        const b = res.body as { runId?: string; deduped?: boolean; scheduled?: boolean; triggered?: { held?: boolean }[] };
        // A debounced, batched or idempotent event starts a run later, now or not at all: checked at the end, by group.
        // (`deduped` here is this event again, a retry whose first 202 was lost, or the group's idempotency key seen.)
        if (!('key' in s)) {
          coalesced.push(s);
          return undefined;
        }
        started.push(s);
        if (b.runId) return b.runId;
        if (b.scheduled) delayed++;
        const wasHeld = b.triggered?.some((t) => t.held) === true;
        if (wasHeld) held++;
        if (wasHeld || (delayMs !== undefined && (b.scheduled || b.deduped))) {
          // Its run is started once it is taken in, or its workflow resumed (a retry's repeat may come before that too).
          let runId: string | undefined;
          await until(async () => (runId = await runOfEvent(name, key)) !== undefined, WATCH_CAP_MS, true);
          return runId;
        }
        if (b.deduped) return runOfEvent(name, key);
        loadErrors.push(`${at()} ${name} ${key}: 202 that started no run: ${JSON.stringify(b)}`);
        return undefined;
      }
      // 5xx or no answer: the gateway, or a service behind it, is down; retry. Another 4xx is ours to report.
      if (res && res.status < 500 && res.status !== 408 && res.status !== 429) {
        loadErrors.push(`${at()} ${name} ${key}: ${res.status} ${JSON.stringify(res.body)}`);
        return undefined;
      }
      postRetries++;
      if (attempt >= 300) {
        loadErrors.push(`${at()} ${name} ${key}: gave up after ${attempt} attempts (${res?.status ?? 'no answer'})`);
        return undefined;
      }
      await delay(Math.min(1000, 50 * 2 ** Math.min(attempt, 5)));
    }
  };

  /** Poll until `check` holds, the cap passes, or (unless `pastLoad`) the load stops. */
  const until = async (check: () => Promise<boolean>, capMs: number, pastLoad = false): Promise<boolean> => {
    const deadline = Date.now() + capMs;
    while (Date.now() < deadline && (pastLoad || loading())) {
      if (await check().catch(() => false)) return true;
      await delay(POLL_MS);
    }
    return false;
  };
  /** Half the runs are awaited with GET /wait (a gateway holds the call until the run ends, through the kills), half polled. */
  const terminal = (runId: string) => {
    const path = rng() < 0.5 ? `/v1/runs/${runId}/wait?timeoutMs=${WAIT_MS}` : `/v1/runs/${runId}`;
    return async () => {
      const r = await get(path);
      return r.status === 200 && isTerminal((r.body as { status: string }).status);
    };
  };
  const approve = (runId: string) => async () => {
    const list = await get(`/v1/approvals?runId=${runId}`);
    const a = list.status === 200 ? (list.body as { id: string; status: string }[])[0] : undefined;
    if (!a) return false;
    if (a.status !== 'pending') return true;
    const res = await call('POST', `/v1/approvals/${a.id}/decision`, { status: 'approved' });
    return res.status === 200 || res.status === 409;
  };
  /** A request answered by the API (not 5xx, not lost), retried through the kills (`tries`: how often it was sent); undefined when it never was. */
  const answered = async (method: 'GET' | 'POST', path: string, body?: unknown, headers?: Record<string, string>) => {
    for (let attempt = 0; attempt < 60; attempt++) {
      const res = await call(method, path, body, headers).catch(() => undefined);
      if (res && res.status < 500) return { ...res, tries: attempt + 1 };
      await delay(500);
    }
    loadErrors.push(`${at()} ${method} ${path}: no answer through 60 attempts`);
    return undefined;
  };
  /** Steps of the run that began after `t`: the one in flight when a pause or cancel was answered may, no other. */
  const startedAfter = (runId: string, t: number) => (starts.get(runId) ?? []).filter((x) => x > t).length;
  /**
   * Pause the run while its steps go, check it stays paused with no new step, resume it; or cancel
   * it. Then replay it. A 409 means it had finished first: nothing to check but its end.
   */
  const control = async (s: StartedKey, runId: string) => {
    await delay(Math.floor(rng() * 200));
    const action = rng() < 0.5 ? 'pause' : 'cancel';
    const res = await answered('POST', `/v1/runs/${runId}/${action}`);
    const t = Date.now();
    if (res?.status === 200 && action === 'pause') {
      // It stops when its pass does: at once, or when a pass stuck behind a killed process is given up.
      // (A pass whose last step was in flight ends the run instead.)
      let status: string | undefined;
      const stopped = async () => {
        status = ((await answered('GET', `/v1/runs/${runId}`))?.body as { status?: string } | undefined)?.status;
        return status === 'paused' || status === 'succeeded';
      };
      await delay(600);
      if (!(await until(stopped, WATCH_CAP_MS, true))) controlMismatches.push(`${runId} (${s.key}): ${status} ${WATCH_CAP_MS / 1000} s after its pause was answered`);
      slowestPauseMs = Math.max(slowestPauseMs, Date.now() - t);
      const after = startedAfter(runId, t);
      if (after > 1) controlMismatches.push(`${runId} (${s.key}): ${after} steps began while it was paused`);
      if (status === 'paused') await answered('POST', `/v1/runs/${runId}/resume`);
      paused++;
    } else if (res?.status === 200) {
      s.kind = 'cancelled';
    } else if (res?.status !== 409) {
      loadErrors.push(`${at()} ${action} ${runId}: ${res?.status} ${JSON.stringify(res?.body)}`);
    }
    await until(terminal(runId), WATCH_CAP_MS, true);
    const status = ((await answered('GET', `/v1/runs/${runId}`))?.body as { status?: string } | undefined)?.status;
    // A cancel whose answer was lost (a kill, a restart) and whose retry found the run ended: it was ours.
    if (action === 'cancel' && status === 'cancelled') s.kind = 'cancelled';
    if (s.kind === 'cancelled') {
      if (status !== 'cancelled') controlMismatches.push(`${runId} (${s.key}): ${status} after its cancel was answered`);
      const after = startedAfter(runId, t);
      if (after > 1) controlMismatches.push(`${runId} (${s.key}): ${after} steps began after its cancel was answered`);
    }
    // Sent twice at once (to two gateways when there are two), as a client that retries before its first
    // answer came, each retried under one Idempotency-Key until answered: however many tries got
    // through, one replay, and both answers name it.
    s.replayed = 'maybe';
    const key = { 'idempotency-key': `replay-${runId}` };
    const [replay, twin] = await Promise.all([0, 1].map(() => answered('POST', `/v1/runs/${runId}/replay`, undefined, key)));
    const newId = (replay?.body as { id?: string } | undefined)?.id;
    const twinId = (twin?.body as { id?: string } | undefined)?.id;
    if (replay?.status === 201 && newId) {
      s.replayed = 'yes';
      replays++;
      if (replay.tries > 1 || (twin?.tries ?? 0) > 1) replaysRetried++;
      if (twin?.status !== 201 || twinId !== newId) controlMismatches.push(`${runId} (${s.key}): a replay sent twice under one key answered ${newId} and ${twin?.status} ${twinId}`);
      await until(terminal(newId), WATCH_CAP_MS);
    } else if (replay) {
      s.replayed = undefined;
      if (replay.status !== 409) loadErrors.push(`${at()} replay ${runId}: ${replay.status} ${JSON.stringify(replay.body)}`);
    }
  };
  const parked = (runId: string) => async () => {
    const r = await get(`/v1/runs/${runId}/steps`);
    return r.status === 200 && (r.body as { name: string; status: string }[]).some((st) => st.name === 'told' && st.status === 'waiting');
  };

  // One worker keeps one run (or one pair) in flight: start it, watch it end, start the next.
  const worker = async () => {
    while (loading()) {
      const pick = rng();
      const key = `k${++seq}`;
      if (pick < 0.15) {
        // Some taken in later: stored across whatever is killed meanwhile, then started once.
        const delayMs = rng() < 0.3 ? 300 + Math.floor(rng() * 2000) : undefined;
        const id = await send({ key, kind: 'ten' }, 'chaos.ten', {}, delayMs);
        if (id) await until(terminal(id), WATCH_CAP_MS);
      } else if (pick < 0.2) {
        const s: StartedKey = { key, kind: 'paced' };
        const id = await send(s, 'chaos.paced', {});
        if (id) await control(s, id);
      } else if (pick < 0.3) {
        // A burst of six over four users: the runs queue for their user's slot and for the slots in all.
        const ids = await Promise.all(
          Array.from({ length: 6 }, (_, i) =>
            send({ key: `${key}l${i}`, kind: 'limited' }, 'chaos.limited', {
              user: LIMITED_USERS[i % LIMITED_USERS.length],
              napMs: 200 + Math.floor(rng() * 600),
            }),
          ),
        );
        await Promise.all(ids.map((id) => id && until(terminal(id), WATCH_CAP_MS)));
      } else if (pick < 0.4) {
        const id = await send({ key, kind: 'parent' }, 'chaos.parent', {});
        if (id) await until(terminal(id), WATCH_CAP_MS);
      } else if (pick < 0.5) {
        const id = await send({ key, kind: 'hook' }, 'chaos.hook', {});
        if (id) await until(terminal(id), WATCH_CAP_MS);
      } else if (pick < 0.6) {
        const id = await send({ key, kind: 'gated' }, 'chaos.gated', {});
        // Granted as soon as it is listed, through the public API (a retry after a lost answer finds it decided).
        if (id) await until(approve(id), WATCH_CAP_MS, true);
        if (id) await until(terminal(id), WATCH_CAP_MS);
      } else if (pick < 0.7) {
        // Three over two users: one user's second run waits for the first to end, naps included.
        const ids = await Promise.all(
          Array.from({ length: 3 }, (_, i) =>
            send({ key: `${key}s${i}`, kind: 'single' }, 'chaos.single', { user: SINGLE_USERS[i % SINGLE_USERS.length], napMs: 200 + Math.floor(rng() * 400) }),
          ),
        );
        await Promise.all(ids.map((id) => id && until(terminal(id), WATCH_CAP_MS)));
      } else if (pick < 0.75) {
        // Events of a group, one after another: three to a debounce (500 ms), two under one idempotency key, three to a batch of three (1 s).
        const workflow = (['chaos.debounced', 'chaos.once', 'chaos.batched'] as const)[Math.floor(rng() * 3)]!;
        const group = `${key}-${workflow.slice('chaos.'.length)}`;
        for (let n = 0; n < (workflow === 'chaos.once' ? 2 : 3); n++) await send({ workflow, group, n }, workflow, { group, n });
        await delay(1500);
      } else if (pick < 0.8) {
        const sleepMs = [1000 + Math.floor(rng() * 2000), 1000 + Math.floor(rng() * 2000)];
        const id = await send({ key, kind: 'sleepy' }, 'chaos.sleepy', { sleepMs });
        if (id) await until(terminal(id), WATCH_CAP_MS);
      } else {
        // The waiter must be parked before the emit exists: waitForEvent does not look back. Even
        // when the load stops meanwhile, or an emitter sent too early would leave the waiter to time out.
        const emitter = `${key}e`;
        const waiter: StartedKey = { key: `${key}w`, kind: 'waiter', pairedWith: emitter };
        const wid = await send(waiter, 'chaos.waiter', { emitter });
        waiter.waitingBeforeEmit = wid !== undefined && (await until(parked(wid), 15_000, true));
        const eid = await send({ key: emitter, kind: 'emitter' }, 'chaos.emitter', {});
        await Promise.all([wid && until(terminal(wid), WATCH_CAP_MS), eid && until(terminal(eid), WATCH_CAP_MS)]);
      }
    }
  };

  const kills: Record<string, number> = {};
  const killLog: ChaosReport['killLog'] = [];
  const stops: ChaosReport['stops'] = [];
  // Replicas past the first are `<service>-<i>`.
  const processes = SERVICES.flatMap((s) => Array.from({ length: opts.replicas ?? 1 }, (_, i) => (i === 0 ? s : `${s}-${i}`)));
  const killer = async () => {
    const every = opts.killEveryMs ?? 10_000;
    let sinceInvoker = Infinity;
    for (let k = 1; t0 + k * every < loadEnd; k++) {
      await delay(Math.max(0, t0 + k * every - Date.now()));
      const forced = opts.forceInvoker && (k === 1 || sinceInvoker >= 2);
      const service = opts.rolling ? processes[(k - 1) % processes.length]! : forced ? 'invoker' : processes[Math.floor(killRng() * processes.length)]!;
      sinceInvoker = service.startsWith('invoker') ? 0 : sinceInvoker + 1;
      const atMs = Date.now() - t0;
      if (opts.rolling) {
        log(`chaos: ${at()} SIGTERM ${service}`);
        const stop = await dep.restart!(service);
        stops.push({ service, ...stop });
        log(`chaos: ${at()} ${service} exited ${stop.forced ? 'only when killed' : `by itself with ${stop.code}`} after ${stop.ms} ms`);
      } else {
        log(`chaos: ${at()} SIGKILL ${service}`);
        await dep.crashAndRestart(service);
      }
      killLog.push({ atMs, service, restartMs: Date.now() - t0 - atMs });
      kills[service] = (kills[service] ?? 0) + 1;
      log(`chaos: ${at()} ${service} back (${killLog.at(-1)!.restartMs} ms)`);
    }
  };

  // The infrastructure crashes once each, while the service kills go on.
  const infraCrashes = async () => {
    if (!infra) return;
    for (const [frac, what, restart] of [
      [1 / 3, 'nats-server', () => infra.restartNats()],
      [2 / 3, 'postgres', () => infra.restartPostgres()],
    ] as const) {
      await delay(Math.max(0, t0 + opts.loadMs * frac - Date.now()));
      const atMs = Date.now() - t0;
      log(`chaos: ${at()} crash ${what}`);
      await restart();
      killLog.push({ atMs, service: what, restartMs: Date.now() - t0 - atMs });
      kills[what] = (kills[what] ?? 0) + 1;
      log(`chaos: ${at()} ${what} back (${killLog.at(-1)!.restartMs} ms)`);
    }
  };

  /**
   * Every few seconds `chaos.ten` is paused with hold for a second or two and resumed: the events sent
   * meanwhile are kept and admitted on the resume, across whatever is killed. Each call is retried until
   * answered (the invoker may be down); the load ends resumed.
   */
  const holder = async () => {
    const setPaused = async (verb: 'pause' | 'resume') => {
      for (let attempt = 0; attempt < 300; attempt++) {
        const res = await call('POST', `/v1/workflows/${verb}`, { app: CHAOS_APP, workflow: 'chaos.ten', ...(verb === 'pause' && { hold: true }) }).catch(() => undefined);
        if (res?.status === 200) return;
        if (res && res.status < 500) {
          loadErrors.push(`${at()} ${verb} chaos.ten: ${res.status} ${JSON.stringify(res.body)}`);
          return;
        }
        await delay(200);
      }
    };
    while (loading()) {
      await delay(4000 + Math.floor(rng() * 4000));
      if (!loading()) break;
      await setPaused('pause');
      holds++;
      await delay(1000 + Math.floor(rng() * 1000));
      await setPaused('resume');
    }
  };

  // A worker holds ~1.9 runs on average (a pair, a fifth of the time, is two; the bursts, a tenth each, six and three).
  const workers = Math.max(1, Math.round((opts.inFlight ?? 20) / 1.9));
  const killing = Promise.all([killer(), infraCrashes()]);
  await Promise.all([...Array.from({ length: workers }, worker), holder()]);
  await killing; // a restart in progress at the end finishes first (its kill was during the load)
  const stoppedAt = loadEnd;
  log(`chaos: ${at()} load stopped: ${started.length} events sent, ${postRetries} POST retries; waiting for every run to end`);

  // Every run terminal within the settle time of the load stopping: nothing active in the app's stats.
  const settleMs = opts.settleMs ?? 60_000;
  let terminalAfterMs: number | undefined;
  while (Date.now() < stoppedAt + settleMs) {
    // A gated run whose approval was listed only after its worker stopped watching is granted here: a run
    // still waiting with no approval pending would be a lost request, and shows as stranded.
    const pending = await get('/v1/approvals?status=pending&limit=1000').catch(() => undefined);
    for (const a of pending?.status === 200 ? (pending.body as { id: string }[]) : []) {
      await call('POST', `/v1/approvals/${a.id}/decision`, { status: 'approved' }).catch(() => undefined);
    }
    const s = await get(`/v1/runs/stats?app=${CHAOS_APP}`).catch(() => undefined);
    const stats = s?.body as { total?: number; active?: number } | undefined;
    // A debounce or a batch sent last starts its run up to a second later (more through a restart): none is active before.
    if (s?.status === 200 && stats?.active === 0 && Date.now() >= stoppedAt + COALESCED_START_MS) {
      terminalAfterMs = Date.now() - stoppedAt;
      break;
    }
    await delay(POLL_MS);
  }
  log(
    terminalAfterMs === undefined
      ? `chaos: runs still active ${settleMs / 1000} s after the load stopped`
      : `chaos: every run ended ${terminalAfterMs} ms after the load stopped`,
  );

  const inv = await checkInvariants({ base: dep.base, secretKey: dep.secretKey, app: CHAOS_APP, started, hooks: hooks.got, settleMs, coalesced });
  return {
    ...inv,
    seed,
    loadMs: opts.loadMs,
    sent: started.length,
    kills,
    killLog,
    reExecutions: 0,
    postRetries,
    terminalAfterMs,
    loadErrors,
    stops,
    occupancy: [],
    paused,
    slowestPauseMs,
    replays,
    replaysRetried,
    delayed,
    held,
    holds,
    controlMismatches,
  };
}

/** The one line of counts the test and the script print. */
export function summaryLine(r: ChaosReport): string {
  const kills =
    Object.entries(r.kills)
      .map(([s, n]) => `${s}:${n}`)
      .join(',') || 'none';
  return [
    `chaos summary: seed=${r.seed}`,
    `runs started=${r.runs} (events ${r.sent})`,
    `succeeded=${r.succeeded}`,
    `failed=${r.failed.length}`,
    `stranded=${r.stranded.length}`,
    `terminal after=${r.terminalAfterMs === undefined ? 'never' : `${r.terminalAfterMs}ms`}`,
    `steps checked=${r.stepsChecked}`,
    `duplicate steps=${r.duplicateSteps.length}`,
    `result mismatches=${r.mismatches.length}`,
    `emits=${r.emits}`,
    `duplicate emits=${r.duplicateEmits.length}`,
    `missing emits=${r.missingEmits.length}`,
    `missed wakes=${r.missedWakes.length}`,
    `late emits=${r.lateEmits.length}`,
    `wait timeouts=${r.waitTimeouts.length}`,
    `children mismatched=${r.childMismatches.length}`,
    `webhooks=${r.webhooks}`,
    `duplicate webhooks=${r.duplicateWebhooks.length}`,
    `lost deliveries=${r.lostDeliveries.length}`,
    `redeliveries=${r.redeliveries}`,
    `approvals mismatched=${r.approvalMismatches.length}`,
    `paused=${r.paused} (slowest ${r.slowestPauseMs}ms)`,
    `cancelled=${r.cancelled}`,
    `replays=${r.replays} (retried ${r.replaysRetried})`,
    `delayed events=${r.delayed}`,
    `held events=${r.held} (holds ${r.holds})`,
    `control mismatched=${r.controlMismatches.length}`,
    `coalesced groups=${r.coalescedGroups}`,
    `coalesced mismatched=${r.coalescedMismatches.length}`,
    `timelines checked=${r.timelinesChecked}`,
    `timeline gaps=${r.timelineGaps.length}`,
    `lost starts=${r.lostStarts.length}`,
    `duplicate starts=${r.duplicateStarts.length}`,
    `re-executed steps=${r.reExecutions}`,
    `most inside=${r.occupancy.map((o) => `${o.key.replace(' ', ':')}:${o.peak}/${o.limit}`).join(',') || 'none'}`,
    `POST retries=${r.postRetries}`,
    `kills=${kills}`,
  ].join(' ');
}

/** What the load did not exercise, one line each (a run too short or too quiet to be worth its verdict); empty when it did it all. */
export function unexercised(r: ChaosReport): string[] {
  const out: string[] = [];
  if (r.runs <= 50) out.push(`only ${r.runs} runs`);
  if (r.stepsChecked <= r.runs) out.push(`only ${r.stepsChecked} steps checked for ${r.runs} runs`);
  if (r.timelinesChecked !== r.runs) out.push(`${r.timelinesChecked} timelines checked for ${r.runs} runs`);
  if (r.emits === 0) out.push('no emit');
  if (r.webhooks === 0) out.push('no webhook');
  if (r.coalescedGroups === 0) out.push('no debounced, batched or idempotent group');
  if (r.paused + r.cancelled === 0) out.push('no run paused or cancelled');
  // Runs under concurrency limits went inside their steps (the slots in all and each user's, the children's), and queued singletons ran.
  const keys = ['all', 'child', ...LIMITED_USERS.map((u) => `user ${u}`), ...SINGLE_USERS.map((u) => `single ${u}`)];
  const seen = new Set(r.occupancy.map((o) => o.key));
  for (const k of keys) if (!seen.has(k)) out.push(`no run inside key ${k}`);
  return out;
}

/** Everything that broke an invariant, one line each; empty when the run is clean. */
export function violations(r: ChaosReport): string[] {
  const out: string[] = [];
  for (const s of r.stranded)
    out.push(
      `stranded: run ${s.runId} (${s.workflow}, ${s.key}) is ${s.status}, last step ${s.lastStep ? `${s.lastStep.name} ${s.lastStep.status}` : 'none'}`,
    );
  if (r.terminalAfterMs === undefined) out.push('runs still active when the settle time ran out');
  for (const f of r.failed) out.push(`failed: run ${f.runId} (${f.workflow}, ${f.key}): ${JSON.stringify(f.error)}`);
  for (const d of r.duplicateSteps) out.push(`step stored twice: ${d}`);
  for (const m of r.mismatches) out.push(`result does not match the stored steps: ${m}`);
  for (const d of r.duplicateEmits) out.push(`emit logged more than once: ${d}`);
  for (const m of r.missingEmits) out.push(`emit missing from the log: ${m}`);
  for (const m of r.missedWakes) out.push(`waiter missed its emit: ${m}`);
  for (const k of r.lostStarts) out.push(`event started no run: ${k}`);
  for (const k of r.duplicateStarts) out.push(`event started more than one run: ${k}`);
  for (const e of r.loadErrors) out.push(`during the load: ${e}`);
  for (const m of r.childMismatches) out.push(`child run not handed back once: ${m}`);
  for (const d of r.duplicateWebhooks) out.push(`webhook step delivered under more than one id: ${d}`);
  for (const l of r.lostDeliveries) out.push(`webhook delivery never received: ${l}`);
  for (const m of r.approvalMismatches) out.push(`gated run did not resume approved: ${m}`);
  for (const m of r.controlMismatches) out.push(`pause or cancel not honoured: ${m}`);
  for (const m of r.coalescedMismatches) out.push(`events did not start the runs their debounce, idempotency key or batch says: ${m}`);
  for (const g of r.timelineGaps) out.push(`timeline not gap-free: ${g}`);
  for (const o of r.occupancy) if (o.peak > o.limit) out.push(`${o.peak} runs inside key ${o.key} at once (limit ${o.limit})`);
  for (const st of r.stops) {
    if (st.forced || st.code !== 0) out.push(`${st.service} did not drain and exit by itself on SIGTERM: ${JSON.stringify(st)}`);
  }
  return out;
}
