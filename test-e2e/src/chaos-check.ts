import { sse } from '@dws/testing';
import { api } from './api.js';

/**
 * The chaos test's invariants, read through the public API only (GET
 * /v1/runs, /v1/runs/{id}, /v1/runs/{id}/steps, /v1/events?name=...), after
 * the load has stopped and the runs had their time to finish.
 */

/** One event the load generator got a 202 for (or a deduped retry of one). */
export interface StartedKey {
  key: string;
  /** `cancelled`: a `paced` run whose cancel was answered 200 (it must end cancelled). */
  kind: 'ten' | 'sleepy' | 'emitter' | 'waiter' | 'parent' | 'hook' | 'gated' | 'limited' | 'single' | 'paced' | 'cancelled';
  /** A replay of its run was answered with a new run (`yes`: there is one, and it must succeed), or never answered through its retries (`maybe`: at most one). */
  replayed?: 'yes' | 'maybe';
  /** Waiter only: the key of the emitter whose event it waits for. */
  pairedWith?: string;
  /** Waiter only: its wait step was seen parked before the emitter's event was sent. */
  waitingBeforeEmit?: boolean;
}

/** One event sent to a debounced, idempotent or batched workflow: `n` of its `group`'s events, numbered from 0 in the order sent. */
export interface CoalescedEvent {
  workflow: 'chaos.debounced' | 'chaos.once' | 'chaos.batched';
  group: string;
  n: number;
}

export interface StrandedRun {
  runId: string;
  key: string;
  workflow: string;
  status: string;
  lastStep?: { name: string; status: string };
}

export interface InvariantReport {
  runs: number;
  succeeded: number;
  /** Runs that ended cancelled as the load asked. */
  cancelled: number;
  failed: { runId: string; key: string; workflow: string; error: unknown }[];
  stranded: StrandedRun[];
  /** Keys whose event started no run (lost start). */
  lostStarts: string[];
  /** Keys whose event started more than one run (a retried POST that started twice). */
  duplicateStarts: string[];
  stepsChecked: number;
  /** Steps stored twice under one name, as `runId/name`. */
  duplicateSteps: string[];
  /** Runs whose stored step results differ from what the handler returned (a memo applied twice). */
  mismatches: string[];
  emits: number;
  /** Emitting runs whose event is in the log more than once, as `key xN`. */
  duplicateEmits: string[];
  /** Succeeded emitting runs whose event is not in the log. */
  missingEmits: string[];
  /** Waiters parked before their emit that did not get it, though it arrived before their wait ended. */
  missedWakes: string[];
  /** Waiters parked before their emit whose wait had timed out when the emit arrived (the emitter ran late): a diagnostic. */
  lateEmits: string[];
  /** Waiters that timed out (got no event), parked before their emit or not: a diagnostic, not an invariant. */
  waitTimeouts: string[];
  /** Parents whose result does not carry their one child's result, or with other than one child run. */
  childMismatches: string[];
  webhooks: number;
  /** Webhook runs with more than one delivery id at the receiver (a step's delivery made twice). */
  duplicateWebhooks: string[];
  /** Succeeded webhook runs whose delivery never reached the receiver. */
  lostDeliveries: string[];
  /** Debounced, idempotent and batched groups checked. */
  coalescedGroups: number;
  /**
   * A debounced group with no run carrying its last event, or an event in two runs (a debounce
   * fired twice); an idempotent group with other than one run, its first event's; a batched group
   * whose events are not each in exactly one run.
   */
  coalescedMismatches: string[];
  /** Deliveries the receiver got more than once (at-least-once over HTTP: a diagnostic, not an invariant). */
  redeliveries: number;
  /** Gated runs that did not resume with the approval granted. */
  approvalMismatches: string[];
  timelinesChecked: number;
  /** Runs whose timeline replay has a gap or a repeat in its seqs, or does not end with the run's end. */
  timelineGaps: string[];
  /** The runs that took longest from creation to their end, slowest first (a diagnostic). */
  slowest: { runId: string; key: string; workflow: string; status: string; createdAt?: string; endedAt?: string; tookMs?: number; timeline?: string }[];
}

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);

interface RunView {
  id: string;
  status: string;
  workflow: string;
  createdAt?: string;
  endedAt?: string;
  /** An event's data; a batch's: its events. */
  input?: { key?: string; group?: string; n?: number } | { data?: { group?: string; n?: number } }[];
  result?: unknown;
  error?: unknown;
  replayOf?: string;
}
/** The suffix of a replay's key. */
const REPLAY = '#replay';
/** The load's key of an event-started run (a batch has none). */
const keyOf = (r: RunView): string | undefined => (Array.isArray(r.input) ? undefined : r.input?.key);

interface StepView {
  name: string;
  op: string;
  status: string;
  output?: unknown;
  endedAt?: string;
}

type Get = <T>(path: string) => Promise<T>;

/** A GET that must answer 200: the fleet is whole again by now, so anything else is a finding. */
function getter(base: string, key: string): Get {
  return async <T>(path: string): Promise<T> => {
    const res = await api<T>(base, 'GET', path, { key });
    if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body;
  };
}

/** Every run of `app`, paging GET /v1/runs by its cursor. */
export async function listRunIds(base: string, key: string, app: string): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const q = new URLSearchParams({ app, limit: '200' });
    if (cursor) q.set('cursor', cursor);
    const res = await api<{ id: string }[]>(base, 'GET', `/v1/runs?${q}`, { key });
    if (res.status !== 200) throw new Error(`GET /v1/runs answered ${res.status}: ${JSON.stringify(res.body)}`);
    ids.push(...res.body.map((r) => r.id));
    const next = res.headers['x-next-cursor'];
    if (typeof next !== 'string' || next === '') return ids;
    cursor = next;
  }
}

/** Map `items` through `fn`, `width` at a time (the fleet shares two cores with everything else). */
async function pool<T, R>(items: T[], width: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!);
      }
    }),
  );
  return out;
}

/** The tokens a workflow's result claims, paired with the step names that produced them. */
function expectedSteps(kind: StartedKey['kind'], result: unknown): Map<string, unknown> | undefined {
  const r = result as { tokens?: unknown[]; token?: unknown } | null | undefined;
  if ((kind === 'ten' || kind === 'paced' || kind === 'cancelled') && Array.isArray(r?.tokens)) return new Map(r.tokens.map((t, i) => [`s${i + 1}`, t]));
  if ((kind === 'sleepy' || kind === 'limited' || kind === 'single') && Array.isArray(r?.tokens)) return new Map(r.tokens.map((t, i) => [['a', 'b', 'c'][i]!, t]));
  if (kind === 'emitter' && r?.token !== undefined) return new Map([['prep', r.token]]);
  if (kind === 'waiter') return new Map();
  if (kind === 'parent' && r?.token !== undefined) return new Map([['p', r.token]]);
  if (kind === 'hook' && r?.token !== undefined) return new Map([['h', r.token]]);
  if (kind === 'gated' && r?.token !== undefined) return new Map([['after', r.token]]);
  return undefined;
}

/** The event name an emitter of `key` emits and its waiter waits for: one name per pair, so the log read is exact. */
export const toldEvent = (key: string): string => `chaos.told.${key}`;

export async function checkInvariants(opts: {
  base: string;
  secretKey: string;
  app: string;
  started: StartedKey[];
  /** What the webhook receiver got: delivery id -> { key, times }. */
  hooks?: Map<string, { key: string; times: number }>;
  /** How long to wait for deliveries still under way. @default 60_000 */
  settleMs?: number;
  /** The events sent to the debounced, idempotent and batched workflows that got a 202 (a retry's `deduped` one too). */
  coalesced?: CoalescedEvent[];
}): Promise<InvariantReport> {
  const get = getter(opts.base, opts.secretKey);
  const ids = await listRunIds(opts.base, opts.secretKey, opts.app);
  const runs = await pool(ids, 8, async (id) => {
    const [run, steps] = await Promise.all([get<RunView>(`/v1/runs/${id}`), get<StepView[]>(`/v1/runs/${id}/steps`)]);
    return { run, steps };
  });

  const report: InvariantReport = {
    runs: runs.length,
    succeeded: 0,
    cancelled: 0,
    failed: [],
    stranded: [],
    lostStarts: [],
    duplicateStarts: [],
    stepsChecked: 0,
    duplicateSteps: [],
    mismatches: [],
    emits: 0,
    duplicateEmits: [],
    missingEmits: [],
    missedWakes: [],
    lateEmits: [],
    waitTimeouts: [],
    childMismatches: [],
    webhooks: 0,
    duplicateWebhooks: [],
    lostDeliveries: [],
    redeliveries: 0,
    approvalMismatches: [],
    timelinesChecked: 0,
    timelineGaps: [],
    slowest: [],
    coalescedGroups: 0,
    coalescedMismatches: [],
  };
  const byKey = new Map<string, typeof runs>();
  for (const r of runs) {
    // A replay carries its source's input: it is checked as a run of its own.
    const k = `${keyOf(r.run) ?? `?${r.run.id}`}${r.run.replayOf ? REPLAY : ''}`;
    byKey.set(k, [...(byKey.get(k) ?? []), r]);
  }
  const kindOf = new Map(opts.started.map((s) => [s.key, s]));

  for (const s of opts.started) {
    const found = byKey.get(s.key) ?? [];
    if (found.length === 0) report.lostStarts.push(s.key);
    if (found.length > 1) report.duplicateStarts.push(`${s.key} x${found.length}`);
    const replays = byKey.get(`${s.key}${REPLAY}`)?.length ?? 0;
    if (replays === 0 && s.replayed === 'yes') report.lostStarts.push(`${s.key} (its replay)`);
    if (replays > (s.replayed ? 1 : 0)) report.duplicateStarts.push(`${s.key}: ${replays} replays`);
  }

  const emitterTokens = new Map<string, unknown>();
  for (const [key, found] of byKey) {
    const started = kindOf.get(key);
    for (const { run, steps } of found) {
      if (run.status === 'succeeded') report.succeeded++;
      else if (run.status === 'cancelled' && started?.kind === 'cancelled') report.cancelled++;
      else if (run.status === 'failed' || run.status === 'cancelled')
        report.failed.push({ runId: run.id, key, workflow: run.workflow, error: run.error });
      else {
        const last = steps.at(-1);
        report.stranded.push({
          runId: run.id,
          key,
          workflow: run.workflow,
          status: run.status,
          lastStep: last && { name: last.name, status: last.status },
        });
      }

      // No step applied twice: one stored step per name.
      report.stepsChecked += steps.length;
      const seen = new Set<string>();
      for (const st of steps) {
        if (seen.has(st.name)) report.duplicateSteps.push(`${run.id}/${st.name}`);
        seen.add(st.name);
      }

      // What the handler returned is what the steps stored: a memo applied twice, or a step re-run
      // after its result was stored, would hand the handler a token that is not the stored one.
      if (run.status !== 'succeeded' || !started) continue;
      const expected = expectedSteps(started.kind, run.result);
      const runSteps = steps.filter((st) => expected?.has(st.name));
      const ok =
        expected !== undefined &&
        runSteps.length === expected.size &&
        runSteps.every((st) => st.status === 'succeeded' && JSON.stringify(st.output) === JSON.stringify(expected.get(st.name))) &&
        (started.kind !== 'ten' || steps.filter((st) => st.status === 'succeeded').length === 10);
      if (!ok)
        report.mismatches.push(
          `${run.id} (${started.kind}): result ${JSON.stringify(run.result)}, steps ${JSON.stringify(steps.map((st) => [st.name, st.status, st.output]))}`,
        );
      if (started.kind === 'emitter') emitterTokens.set(key, (run.result as { token?: unknown }).token);
    }
  }

  // No emit duplicated: each emitting run's event is in the log exactly once.
  const emitters = opts.started.filter((s) => s.kind === 'emitter');
  /** When each emitter's event reached the log, by emitter key. */
  const emittedAt = new Map<string, number>();
  await pool(emitters, 8, async (s) => {
    const events = await get<{ data?: { token?: unknown }; receivedAt?: string }[]>(`/v1/events?name=${encodeURIComponent(toldEvent(s.key))}&limit=100`);
    if (events[0]?.receivedAt) emittedAt.set(s.key, Date.parse(events[0].receivedAt));
    report.emits += events.length;
    if (events.length > 1) report.duplicateEmits.push(`${s.key} x${events.length}`);
    if (events.length === 0 && emitterTokens.has(s.key)) report.missingEmits.push(s.key);
  });

  for (const s of opts.started) {
    const waiter = s.kind === 'waiter' ? byKey.get(s.key)?.[0]?.run : undefined;
    if (waiter?.status === 'succeeded' && !(waiter.result as { got?: boolean }).got) {
      report.waitTimeouts.push(`${waiter.id} (${s.key}, ${s.waitingBeforeEmit ? 'parked' : 'not seen parked'} before its emit)`);
    }
  }
  const took = (r: RunView) => (r.createdAt && r.endedAt ? Date.parse(r.endedAt) - Date.parse(r.createdAt) : Infinity);
  report.slowest = runs
    .map((r) => r.run)
    .sort((a, b) => took(b) - took(a))
    .slice(0, 5)
    .map((r) => ({
      runId: r.id,
      key: keyOf(r) ?? '?',
      workflow: r.workflow,
      status: r.status,
      createdAt: r.createdAt,
      endedAt: r.endedAt,
      tookMs: Number.isFinite(took(r)) ? took(r) : undefined,
    }));

  // A parent's result holds its one child's result.
  for (const s of opts.started.filter((x) => x.kind === 'parent')) {
    const parent = byKey.get(s.key)?.[0]?.run;
    if (parent?.status !== 'succeeded') continue;
    const children = byKey.get(`${s.key}c`) ?? [];
    const child = children[0]?.run;
    if (children.length !== 1 || child?.status !== 'succeeded' || JSON.stringify((parent.result as { child?: unknown }).child) !== JSON.stringify(child.result)) {
      report.childMismatches.push(`${parent.id} (${s.key}): ${children.length} child run(s), parent got ${JSON.stringify(parent.result)}, child ${JSON.stringify(child?.result)}`);
    }
  }

  // One delivery per webhook step, received at least once (retries may still be under way: wait for them).
  const hookRuns = opts.started
    .filter((x) => x.kind === 'hook')
    .map((x) => ({ key: x.key, run: byKey.get(x.key)?.[0]?.run }))
    .filter((x) => x.run?.status === 'succeeded');
  report.webhooks = hookRuns.length;
  if (opts.hooks) {
    const got = opts.hooks;
    const deadline = Date.now() + (opts.settleMs ?? 60_000);
    const missing = () => hookRuns.filter((h) => !got.has((h.run!.result as { deliveryId?: string }).deliveryId ?? ''));
    while (missing().length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 500));
    for (const h of missing()) report.lostDeliveries.push(`${h.run!.id} (${h.key}): ${JSON.stringify(h.run!.result)}`);
    const idsByKey = new Map<string, string[]>();
    for (const [id, v] of got) {
      idsByKey.set(v.key, [...(idsByKey.get(v.key) ?? []), id]);
      report.redeliveries += v.times - 1;
    }
    for (const [key, ids] of idsByKey) if (ids.length > 1) report.duplicateWebhooks.push(`${key}: ${ids.join(', ')}`);
  }

  // A gated run resumed with the approval it was granted.
  for (const s of opts.started.filter((x) => x.kind === 'gated')) {
    const run = byKey.get(s.key)?.[0]?.run;
    if (run?.status === 'succeeded' && (run.result as { status?: string }).status !== 'approved') {
      report.approvalMismatches.push(`${run.id} (${s.key}): ${JSON.stringify(run.result)}`);
    }
  }

  const coalesced = checkCoalesced(opts.coalesced ?? [], runs.map((r) => r.run));
  report.coalescedGroups = coalesced.groups;
  report.coalescedMismatches = coalesced.mismatches;

  // Every timeline replays gap-free: seqs 1..n, each once, ending with the run's terminal status.
  await pool(runs, 8, async ({ run }) => {
    if (!isTerminal(run.status)) return;
    const stream = await sse(opts.base, `/v1/runs/${run.id}/stream`, { key: opts.secretKey });
    await stream.ended;
    const seqs = stream.events.map((e) => Number(e.id));
    const last = stream.events.at(-1);
    report.timelinesChecked++;
    // Where a slow run's time went: each frame, seconds after the run was created.
    const slow = report.slowest.find((x) => x.runId === run.id);
    if (slow && run.createdAt) {
      const t0 = Date.parse(run.createdAt);
      slow.timeline = stream.events
        .map((e) => {
          const f = JSON.parse(e.data ?? '{}') as { ts?: string; status?: string; name?: string };
          const at = f.ts ? ((Date.parse(f.ts) - t0) / 1000).toFixed(1) : '?';
          return `${at} ${e.event}${f.name ? ` ${f.name}` : ''}${f.status ? ` ${f.status}` : ''}`;
        })
        .join(' | ');
    }
    if (!seqs.every((q, i) => q === i + 1) || last?.event !== 'run_status' || !last.data?.includes(`"status":"${run.status}"`)) {
      report.timelineGaps.push(`${run.id}: seqs ${seqs.join(',')}; last ${last?.event} ${last?.data}`);
    }
  });

  // A waiter parked before its emit was sent gets that emit's token, unless the emit reached the
  // log only after the wait had timed out (an emitter held up by a kill): that is waitForEvent's
  // timeout doing its job. Within a second of the timeout either may win.
  for (const s of opts.started) {
    if (s.kind !== 'waiter' || !s.waitingBeforeEmit || !s.pairedWith) continue;
    const token = emitterTokens.get(s.pairedWith);
    const found = byKey.get(s.key)?.[0];
    const waiter = found?.run;
    if (token === undefined || waiter?.status !== 'succeeded') continue;
    const got = waiter.result as { got?: boolean; token?: unknown };
    if (got.got && got.token === token) continue;
    const waitEnded = Date.parse(found!.steps.find((st) => st.name === 'told')?.endedAt ?? '');
    const emitted = emittedAt.get(s.pairedWith);
    const what = `${waiter.id} (${s.key}): ${JSON.stringify(got)}, emitted ${JSON.stringify(token)}`;
    if (!got.got && emitted !== undefined && emitted > waitEnded - 1_000) {
      report.lateEmits.push(`${what} ${Math.round((emitted - waitEnded) / 1000)} s after the wait timed out`);
    } else {
      report.missedWakes.push(`${what}, ${emitted === undefined ? 'emit time unknown' : `${Math.round((waitEnded - emitted) / 1000)} s before the wait ended`}`);
    }
  }
  return report;
}

export const isTerminal = (status: string): boolean => TERMINAL.has(status);

/**
 * A debounced group's runs carry its last event (the one sent last, so the last to arrive), and no
 * event twice: a group split by a pause longer than the debounce period (POSTs retried through a
 * kill) may start a run for an earlier event too, a debounce fired twice would start two for one.
 * An idempotent group (one key) has one run, its first event's. A batched group's events are each
 * in exactly one run's batch, however the batches were cut.
 */
function checkCoalesced(sent: CoalescedEvent[], runs: RunView[]): { groups: number; mismatches: string[] } {
  const groups = new Map<string, { workflow: CoalescedEvent['workflow']; sent: number[]; got: number[]; runs: string[] }>();
  for (const e of sent) {
    const g = groups.get(e.group) ?? { workflow: e.workflow, sent: [], got: [], runs: [] };
    g.sent.push(e.n);
    groups.set(e.group, g);
  }
  for (const run of runs) {
    if (!sent.some((e) => e.workflow === run.workflow)) continue;
    const events = Array.isArray(run.input) ? run.input.map((e) => e.data ?? {}) : [run.input ?? {}];
    for (const d of events) {
      const g = groups.get(String(d.group));
      if (!g) continue; // a group whose every POST went unanswered: no event of it was recorded as sent
      g.got.push(Number(d.n));
      g.runs.push(run.id);
    }
  }
  const mismatches: string[] = [];
  for (const [group, g] of groups) {
    const got = [...g.got].sort((a, b) => a - b);
    const ok =
      g.workflow === 'chaos.batched'
        ? JSON.stringify(got) === JSON.stringify([...new Set(g.sent)].sort((a, b) => a - b))
        : g.workflow === 'chaos.once'
          ? JSON.stringify(got) === JSON.stringify([Math.min(...g.sent)])
          : new Set(got).size === got.length && got.includes(Math.max(...g.sent));
    if (!ok) mismatches.push(`${g.workflow} ${group}: sent ${JSON.stringify(g.sent)}, in runs ${JSON.stringify(got)} (${g.runs.join(', ') || 'none'})`);
  }
  return { groups: groups.size, mismatches };
}
