import type { Bus } from '@dws/bus';
import type { EventVars } from '@dws/cel';
import { withTxRetry, type Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { ApiRequestSchema, create, toBinary } from '@dws/proto';
import { ids, subjects, type Caller, type Outbox, type OutboxMessage, type PendingPublish } from '@dws/runtime';
import { entry, type TriggeredEntry } from '../domain/admission.js';
import type { EventInput } from '../domain/event-input.js';
import { matchCancels, matchTriggers, type CancelMatch } from '../domain/matching.js';
import { insertEvents, recordEvents, seenDedupeId, setOutcomes, type EventOutboxRow, type NewEvent } from '../store/events.js';
import type { BufferedEvent } from '../store/buffers.js';
import { dedupeLock, lockAll, type GateScope } from '../store/gates.js';
import { nowMs, tracer } from '@dws/telemetry';
import { Admission, singletonId, type SingletonCheck } from './admission.js';
import { startedRuns, traceIngest } from './ingest-trace.js';
import type { ScheduledEvents } from './scheduled-events.js';
import type { Wakes, WakeOutcome } from './wakes.js';
import { policyId, type IndexView, type WorkflowIndex, type WorkspaceIndex } from './workflow-index.js';

const enc = new TextEncoder();

export interface IngestResult {
  id?: string;
  runId?: string;
  woke: number;
  triggered: TriggeredEntry[];
  skipped: boolean;
  dropped: boolean;
  debounced: boolean;
  batched: boolean;
  deduped: boolean;
  suspended: boolean;
  /** Posted with a delay: stored, to be taken in at `scheduledFor` (nothing woken or started yet). */
  scheduled?: boolean;
  scheduledFor?: string;
}

export const emptyResult = (): IngestResult => ({
  woke: 0, triggered: [], skipped: false, dropped: false, debounced: false, batched: false, deduped: false, suspended: false,
});

/** An event to take in: validated input plus where it came from. `id` is given for emits (exactly-once) and for delayed events now due. */
export interface Incoming {
  ev: EventInput;
  source: 'api' | 'emit';
  id?: string;
  /** A delayed event taken in: the time it was due, kept on its record. */
  scheduledForMs?: number;
  /** Written in the event's own transaction once its outcome is known (an inbound webhook's source-delivery record): both commit or neither. */
  record?: (tx: Database, result: IngestResult) => Promise<void>;
}

interface Prepared {
  item: Incoming;
  id: string;
  /**
   * The wake asked of the scheduler (Wakes: batched with the events arriving
   * with it). On Postgres it runs while the event is recorded and its runs
   * admitted, and is joined before the commit (a transaction) or after the
   * statement and its StartRuns' publish (the plain path); on PGlite (one
   * connection) it is settled before.
   */
  wake: Promise<WakeOutcome>;
  repeat: boolean;
  tsMs: number;
  vars: EventVars;
  matched: { app: string; workflow: string }[];
  /** The workflows whose cancelOn the event matches (their `if` is the scheduler's to evaluate). */
  cancels: CancelMatch[];
}

/** One ingest call waiting for a transaction. */
interface Job {
  caller: Caller;
  ix: WorkspaceIndex;
  prepared: Prepared[];
  suspended: boolean;
  singletons: Map<string, SingletonCheck>;
  locks: string[];
  /** No dedupe id, no record hook, no gate: recorded in one statement, no transaction (see `isPlain`). */
  plain: boolean;
  /** The version of the cached index the job was matched against, checked by the plain path's statement; unset when it was read for this call. */
  ixVersion?: number;
  /** Tracing on: the run ids whose StartRun the job's transaction wrote (its `event.ingest` spans). */
  started?: Set<string>;
  /** `stale`: the cached index had moved; match again on a fresh read. */
  resolve(results: IngestResult[] | 'stale'): void;
  reject(err: unknown): void;
}

/**
 * The call's events are stored, but what they woke could not be: the call
 * fails (no 202), and whoever tries it again does so as its client would
 * (a retry records the events again), never as though nothing was written.
 */
export class RecordedUnsettled extends Error {
  constructor(cause: unknown) {
    super('some of the events were recorded but the rest, or their wakes, could not be settled', { cause });
    this.name = 'RecordedUnsettled';
  }
}

/** Transactions in flight at once; calls arriving meanwhile share the next one (group commit). */
const MAX_PARALLEL_TX = 2;
/** Events per shared transaction. */
const MAX_GROUP_EVENTS = 500;

/**
 * Takes events in (SPEC Events): dedupe, wake waiters, record in the event
 * log, match triggers, pass each match through the admission gates, and
 * hand the admitted runs to the scheduler through the outbox, in one
 * transaction; publish after commit. Calls that arrive while transactions
 * are in flight are committed together (one commit for many events is
 * what makes single-event POSTs cheap under load); each gets its own results.
 */
export class Ingestor {
  private readonly queue: Job[] = [];
  private active = 0;

  constructor(
    private readonly d: {
      db: Database; bus: Bus; log: Logger; outbox: Outbox; index: WorkflowIndex; admission: Admission; wakes: Wakes; scheduled: ScheduledEvents;
      /** A committed call debounced or batched an event: its timeout is armed (the timers sleep until it). */
      onArmed?: () => void;
    },
  ) {}

  async ingest(caller: Caller, items: Incoming[]): Promise<IngestResult[]> {
    if (items.some((i) => i.ev.dueAtMs !== undefined)) return this.withDelayed(caller, items);
    const t = tracer();
    const startMs = t ? nowMs() : 0;
    // Reads and bus calls happen before the transaction: on PGlite (one connection) they would wait for it.
    // The wakes need no index: they go out first.
    const started = items.map((item) => this.begin(caller, item));
    let job!: Job;
    let results: IngestResult[] | 'stale' = 'stale';
    // First on the index as cached (no read); the plain path's statement checks its version. Then read fresh: nothing left to check.
    for (let fresh = false; results === 'stale'; fresh = true) {
      const pending = await this.jobOf(caller, items, started, fresh ? await this.d.index.of(caller.workspaceId) : await this.d.index.cached(caller.workspaceId));
      results = await new Promise<IngestResult[] | 'stale'>((resolve, reject) => {
        job = { ...pending, resolve, reject };
        this.queue.push(job);
        this.pump();
      });
    }
    if (t) {
      const events = results.map((r, i) => ({ id: r.id, name: items[i]!.ev.name, source: items[i]!.source, triggered: r.triggered }));
      traceIngest(t, startMs, caller, events, job.started ?? new Set());
    }
    // Live tail of GET /v1/events/stream (best-effort, after commit); data rides as the raw JSON text it came in as.
    const receivedAt = new Date().toISOString();
    results.forEach((r, i) => {
      const { ev, source } = items[i]!;
      if (!r.id) return; // not recorded (a repeat dedupeId)
      const head = JSON.stringify({ id: r.id, name: ev.name, app: ev.app, source, tags: ev.tags, receivedAt, woke: r.woke, triggered: logged(r.triggered) });
      this.d.bus.emit(subjects.workspaceEvents(caller.workspaceId), enc.encode(`${head.slice(0, -1)},"data":${ev.dataJson}}`));
    });
    return results;
  }

  /**
   * A call with delayed events: those are stored until due (ScheduledEvents),
   * then the rest taken in now; the results in the call's order. Once the
   * delayed ones are stored, a failure of the rest fails the call as
   * recorded: trying its events again alone would store them twice.
   */
  private async withDelayed(caller: Caller, items: Incoming[]): Promise<IngestResult[]> {
    const delayed = items.filter((i) => i.ev.dueAtMs !== undefined);
    const now = items.filter((i) => i.ev.dueAtMs === undefined);
    const stored = await this.d.scheduled.schedule(caller, delayed);
    let taken: IngestResult[] = [];
    try {
      if (now.length > 0) taken = await this.ingest(caller, now);
    } catch (err) {
      throw err instanceof RecordedUnsettled ? err : new RecordedUnsettled(err);
    }
    let d = 0;
    let n = 0;
    return items.map((i) => (i.ev.dueAtMs !== undefined ? stored[d++]! : taken[n++]!));
  }

  /** Match the events on `view` and settle what the write needs; a non-plain job is matched on a fresh read (it has no check). */
  private async jobOf(caller: Caller, items: Incoming[], started: ReturnType<Ingestor['begin']>[], view: IndexView): Promise<Omit<Job, 'resolve' | 'reject'>> {
    // SPEC POST /events: a suspended workspace wakes waiters and starts nothing. The gateway knows first; the projection covers emits.
    const suspendedIn = (ix: WorkspaceIndex) => caller.suspended === true || ix.suspended;
    const prepareOn = (ix: WorkspaceIndex) => Promise.all(items.map((item, i) => this.prepare(caller, ix, item, started[i]!)));
    let prepared = await prepareOn(view.ix);
    let plain = isPlain(prepared, view.ix, suspendedIn(view.ix));
    if (!plain && !view.fresh) {
      const read = await this.d.index.of(caller.workspaceId);
      if (read.version !== view.version) prepared = await prepareOn(read.ix);
      view = read;
      plain = isPlain(prepared, view.ix, suspendedIn(view.ix));
    }
    const { ix } = view;
    const suspended = suspendedIn(ix);
    if (this.d.db.kind === 'pglite') await Promise.all(prepared.map((p) => p.wake));
    const singletons = suspended ? new Map<string, SingletonCheck>() : await this.singletonChecks(caller, ix, prepared);
    const locks = this.lockNames(caller, ix, prepared, suspended);
    return { caller, ix, prepared, suspended, singletons, locks, plain, ...(view.fresh ? {} : { ixVersion: view.version }) };
  }

  private pump(): void {
    while (this.active < MAX_PARALLEL_TX && this.queue.length > 0) {
      const group: Job[] = [];
      let events = 0;
      // A group is all plain or all not: they are written differently.
      const fits = (j: Job) => j.plain === group[0]!.plain && events + j.prepared.length <= MAX_GROUP_EVENTS;
      while (this.queue.length > 0 && (group.length === 0 || fits(this.queue[0]!))) {
        const j = this.queue.shift()!;
        events += j.prepared.length;
        group.push(j);
      }
      this.active++;
      void this.commit(group).finally(() => {
        this.active--;
        this.pump();
      });
    }
  }

  private async commit(group: Job[]): Promise<void> {
    const plain = group[0]!.plain;
    let written: { results: IngestResult[][]; pending: PendingPublish; stale: Set<Job> };
    try {
      written = plain
        ? await this.recordPlain(group)
        : await withTxRetry(this.d.db, async (tx) => {
            await lockAll(tx, group.flatMap((j) => j.locks));
            const out: OutboxMessage[] = [];
            const results = await this.accept(tx, group, out);
            return { results, pending: await this.d.outbox.enqueue(tx, out), stale: new Set<Job>() };
          });
    } catch (err) {
      // One call's bad row must not fail the calls it shared a transaction with: each alone again.
      if (group.length > 1) await Promise.all(group.map((j) => this.commit([j])));
      else group[0]!.reject(err);
      return;
    }
    const { results, pending, stale } = written;
    if (tracer()) {
      const started = startedRuns(pending);
      for (const j of group) j.started = started;
    }
    // The outbox rows are the durable copy: publish now (the relay covers a crash).
    void this.d.outbox.afterCommit(pending);
    if (!plain && results.some((rs) => rs.some((r) => r.debounced || r.batched))) this.d.onArmed?.();
    try {
      if (plain) await this.settleWakes(group, results, stale);
    } catch (err) {
      // Recorded, but a wake may be neither done nor queued: no 202 (as after a crash here, see settleWakes).
      group.forEach((j) => (stale.has(j) ? j.resolve('stale') : j.reject(new RecordedUnsettled(err))));
      return;
    }
    group.forEach((j, i) => j.resolve(stale.has(j) ? 'stale' : results[i]!));
  }

  /**
   * An event's id and time, and its wake already asked for when it has no
   * dedupe id (with one it may be a repeat, which wakes nothing: that is
   * known only after the dedupe read).
   */
  private begin(caller: Caller, item: Incoming): { id: string; tsMs: number; wake?: Promise<WakeOutcome> } {
    const id = item.id ?? ids.event();
    const tsMs = Date.now();
    return { id, tsMs, ...(item.ev.dedupeId === undefined ? { wake: boundWake(this.wake(caller, item.ev, id, tsMs)) } : {}) };
  }

  private async prepare(caller: Caller, ix: WorkspaceIndex, item: Incoming, started: ReturnType<Ingestor['begin']>): Promise<Prepared> {
    const { ev } = item;
    const { id, tsMs } = started;
    // SPEC: dedupeId is per app (ev.app); which triggers the event may start is ev.scope's business, not the dedupe's.
    const repeat = ev.dedupeId !== undefined && (await seenDedupeId(this.d.db, caller.workspaceId, ev.app, ev.dedupeId, id));
    return {
      item,
      id,
      repeat,
      tsMs,
      // SPEC: a repeat dedupeId wakes no waiter and fans out to nothing.
      wake: repeat ? Promise.resolve({ woke: 0, wakeDeferred: false }) : (started.wake ?? boundWake(this.wake(caller, ev, id, tsMs))),
      matched: repeat ? [] : matchTriggers(ix.triggers, ev),
      cancels: repeat || ix.cancels.length === 0 ? [] : matchCancels(ix.cancels, ev),
      vars: { event: { id, name: ev.name, data: ev.data, ts: tsMs } },
    };
  }

  /** Every gate row (and dedupe id) this call may lock; see lockAll. */
  private lockNames(caller: Caller, ix: WorkspaceIndex, prepared: Prepared[], suspended: boolean): string[] {
    const names: string[] = [];
    for (const p of prepared) {
      if (p.item.ev.dedupeId) names.push(dedupeLock(caller.workspaceId, p.item.ev.app, p.item.ev.dedupeId));
      if (suspended) continue; // no gate is touched
      for (const m of p.matched) {
        names.push(...this.d.admission.lockNames(caller.workspaceId, m.app, m.workflow, ix.policies.get(policyId(m.app, m.workflow)), p.vars));
      }
    }
    return names;
  }

  /** Ask about every singleton (skip) key the matches touch, once each, in parallel. */
  private async singletonChecks(caller: Caller, ix: WorkspaceIndex, prepared: Prepared[]): Promise<Map<string, SingletonCheck>> {
    const scopes = new Map<string, GateScope>();
    for (const p of prepared) {
      for (const m of p.matched) {
        const s = this.d.admission.singletonScopes(caller.workspaceId, ix.policies.get(policyId(m.app, m.workflow)), m.app, m.workflow, p.vars);
        if (s) scopes.set(singletonId(s), s);
      }
    }
    const checks = new Map<string, SingletonCheck>();
    await Promise.all([...scopes].map(async ([id, s]) => checks.set(id, await this.d.admission.singletonCheck(caller, s))));
    return checks;
  }

  /**
   * Inside the transaction: dedupe, record every event in one statement,
   * then admit each match in arrival order, then write the events'
   * `triggered` in one statement.
   */
  private async accept(tx: Database, group: Job[], out: OutboxMessage[]): Promise<IngestResult[][]> {
    const results = group.map((j) => j.prepared.map(() => ({ ...emptyResult(), suspended: j.suspended })));
    // The dedupe ids' locks were taken with the others: a concurrent repeat waits for this commit, then sees the row.
    const dedupeSeen = new Set<string>();
    const seenIds = new Set<string>();
    const rows: NewEvent[] = [];
    for (const [gi, j] of group.entries()) {
      for (const [pi, p] of j.prepared.entries()) {
        const { ev, source } = p.item;
        if (ev.dedupeId) {
          const k = dedupeLock(j.caller.workspaceId, ev.app, ev.dedupeId);
          if (p.repeat || dedupeSeen.has(k) || (await seenDedupeId(tx, j.caller.workspaceId, ev.app, ev.dedupeId, p.id))) {
            results[gi]![pi]!.deduped = true;
            continue;
          }
          dedupeSeen.add(k);
        }
        // The same emit delivered twice into one group: the second is the redelivery.
        if (seenIds.has(p.id)) {
          results[gi]![pi] = { ...emptyResult(), deduped: true };
          continue;
        }
        seenIds.add(p.id);
        rows.push({
          id: p.id, workspaceId: j.caller.workspaceId, name: ev.name, app: ev.app, source, dataJson: ev.dataJson, dedupeId: ev.dedupeId,
          runner: ev.runner, targetApp: ev.targetApp, tags: ev.tags, scheduledForMs: p.item.scheduledForMs,
        });
      }
    }
    // A redelivered emit (same id) finds its row and admits nothing twice.
    const inserted = await insertEvents(tx, rows);
    const outcomes: { id: string; triggered: unknown[]; woke: number }[] = [];
    for (const [gi, j] of group.entries()) {
      for (const [pi, p] of j.prepared.entries()) {
        const result = results[gi]![pi]!;
        if (result.deduped) continue;
        if (!inserted.has(p.id)) {
          results[gi]![pi] = { ...emptyResult(), deduped: true };
          continue;
        }
        result.id = p.id;
        const ev = p.item.ev;
        if (p.cancels.length > 0) out.push(cancelOnCommand(j.caller, ev, p.id, p.tsMs, p.cancels));
        for (const m of p.matched) {
          const policy = j.ix.policies.get(policyId(m.app, m.workflow));
          const e = j.suspended
            ? entry(m.app, m.workflow)
            : await this.d.admission.admit(tx, { workspaceId: j.caller.workspaceId, app: m.app, workflow: m.workflow, policy, ev: bufferedOf(p), vars: p.vars }, j.singletons, out);
          result.triggered.push(e);
          result.skipped ||= e.skipped;
          result.dropped ||= e.dropped;
          result.debounced ||= e.debounced;
          result.batched ||= e.batched;
          result.deduped ||= e.deduped;
        }
        // SPEC: runId when exactly one workflow matched, mirroring the first triggered entry.
        if (result.triggered.length === 1 && result.triggered[0]!.runId) result.runId = result.triggered[0]!.runId;
      }
    }
    // Join the wakes (asked of the scheduler while the statements above ran), then record
    // what each event woke and started in one statement.
    for (const [gi, j] of group.entries()) {
      for (const [pi, p] of j.prepared.entries()) {
        const w = await p.wake;
        const result = results[gi]![pi]!;
        result.woke = w.woke;
        if (!result.id) continue; // a repeat (dedupeId, or a redelivered emit): no row of its own
        if (w.wakeDeferred) out.push(wakeCommand(j.caller, p.item.ev, p.id, p.tsMs));
        const record = logged(result.triggered);
        if (record.length > 0 || w.woke > 0) outcomes.push({ id: p.id, triggered: record, woke: w.woke });
      }
    }
    await setOutcomes(tx, outcomes);
    for (const [gi, j] of group.entries()) {
      for (const [pi, p] of j.prepared.entries()) if (p.item.record) await p.item.record(tx, results[gi]![pi]!);
    }
    return results;
  }

  /**
   * The common case in one statement, no transaction: events with no dedupe
   * id, no record hook and no gate to pass (see `isPlain`). Admission then
   * writes nothing of its own, so each event's outcome is known before it is
   * stored: the events with their outcomes and the StartRuns go in together,
   * and a redelivered emit's id writes nothing at all. A job matched on the
   * cached index that has moved since writes nothing either: it is `stale`.
   */
  private async recordPlain(group: Job[]): Promise<{ results: IngestResult[][]; pending: PendingPublish; stale: Set<Job> }> {
    const results = group.map((j) => j.prepared.map(() => ({ ...emptyResult(), suspended: j.suspended })));
    const rows: (NewEvent & { triggered: unknown[]; ixVersion?: number })[] = [];
    const outbox: EventOutboxRow[] = [];
    const seenIds = new Set<string>();
    for (const [gi, j] of group.entries()) {
      for (const [pi, p] of j.prepared.entries()) {
        // The same emit delivered twice into one group: the second is the redelivery.
        if (seenIds.has(p.id)) {
          results[gi]![pi] = { ...emptyResult(), deduped: true };
          continue;
        }
        seenIds.add(p.id);
        const result = results[gi]![pi]!;
        const { ev, source } = p.item;
        const out: OutboxMessage[] = [];
        for (const m of p.matched) {
          const policy = j.ix.policies.get(policyId(m.app, m.workflow));
          // No gate: admit() only draws the run id and appends the StartRun.
          result.triggered.push(
            j.suspended ? entry(m.app, m.workflow) : await this.d.admission.admit(this.d.db, { workspaceId: j.caller.workspaceId, app: m.app, workflow: m.workflow, policy, ev: bufferedOf(p), vars: p.vars }, j.singletons, out),
          );
        }
        if (result.triggered.length === 1 && result.triggered[0]!.runId) result.runId = result.triggered[0]!.runId;
        rows.push({
          id: p.id, workspaceId: j.caller.workspaceId, name: ev.name, app: ev.app, source, dataJson: ev.dataJson, runner: ev.runner, targetApp: ev.targetApp,
          tags: ev.tags, triggered: logged(result.triggered), ixVersion: j.ixVersion,
        });
        if (p.cancels.length > 0) out.push(cancelOnCommand(j.caller, ev, p.id, p.tsMs, p.cancels));
        for (const m of out) outbox.push({ eventId: p.id, ...m });
      }
    }
    const { inserted, stale: staleIds, outboxIds } = await recordEvents(this.d.db, rows, outbox);
    // A job's events share its workspace and index version: stale together.
    const stale = new Set(group.filter((j) => j.prepared.some((p) => staleIds.has(p.id))));
    for (const [gi, j] of group.entries()) {
      if (stale.has(j)) continue;
      for (const [pi, p] of j.prepared.entries()) {
        const result = results[gi]![pi]!;
        if (result.deduped) continue;
        // A redelivered emit (its id is stored): nothing admitted twice.
        if (!inserted.has(p.id)) results[gi]![pi] = { ...emptyResult(), deduped: true };
        else result.id = p.id;
      }
    }
    const written = outbox.filter((m) => outboxIds.has(m.msgId));
    return {
      results,
      pending: { ids: written.map((m) => outboxIds.get(m.msgId)!), messages: written.map(({ subject, msgId, payload }) => ({ subject, msgId, payload })) },
      stale,
    };
  }

  /**
   * The plain path's wakes, joined after its events are stored and their
   * StartRuns sent: a new run does not wait for the scheduler's answer about
   * waiters, and the answer comes before the 202 (its `woke`). Each count is
   * written to its event's row; a wake that could not be asked goes to the
   * outbox now, before the caller hears back. A crash before that leaves no
   * wake lost that matters: the POST got no 202 (its client retries) and an
   * emit is redelivered, asking again (waking is idempotent).
   */
  private async settleWakes(group: Job[], results: IngestResult[][], stale: Set<Job>): Promise<void> {
    const woke: { id: string; triggered: unknown[]; woke: number }[] = [];
    const deferred: OutboxMessage[] = [];
    for (const [gi, j] of group.entries()) {
      if (stale.has(j)) continue; // matched again, and settled then
      for (const [pi, p] of j.prepared.entries()) {
        const w = await p.wake;
        const result = results[gi]![pi]!;
        result.woke = w.woke;
        if (w.wakeDeferred) deferred.push(wakeCommand(j.caller, p.item.ev, p.id, p.tsMs));
        if (result.id && w.woke > 0) woke.push({ id: result.id, triggered: logged(result.triggered), woke: w.woke });
      }
    }
    await setOutcomes(this.d.db, woke);
    if (deferred.length > 0) void this.d.outbox.afterCommit(await this.d.outbox.enqueue(this.d.db, deferred));
  }

  /**
   * Ask the scheduler to resume the waitForEvent steps this event satisfies
   * (the answer is the 202's `woke`; events arriving together are asked in
   * one call). When it cannot be asked now, the wake is written to the
   * outbox with the event and applied when the scheduler is back: a lost
   * request delays a wake, it never loses it.
   */
  private wake(caller: Caller, ev: EventInput, id: string, tsMs: number): Promise<WakeOutcome> {
    return this.d.wakes.wake(caller, wakeBody(ev, id, tsMs));
  }
}

/**
 * How long an event waits for the scheduler's answer to its wake. Past it the
 * wake is queued durably as well: resolving a waiter is idempotent, so a late
 * answer and the queued replay never wake it twice, and a stuck scheduler
 * can neither stall POST /events nor hold ingest's transactions (and their
 * locks) open.
 */
const WAKE_WAIT_MS = 500;

async function boundWake(wake: Promise<WakeOutcome>): Promise<WakeOutcome> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<WakeOutcome>((resolve) => {
    timer = setTimeout(() => resolve({ woke: 0, wakeDeferred: true }), WAKE_WAIT_MS);
  });
  try {
    return await Promise.race([wake, late]);
  } finally {
    clearTimeout(timer);
  }
}

const wakeBody = (ev: EventInput, id: string, tsMs: number) =>
  JSON.stringify({ name: ev.name, data: ev.data, id, ts: new Date(tsMs).toISOString() });

/** The deferred wake: the same `waiters.wake` call, as a command on the scheduler's stream (keyed by the event id). */
function wakeCommand(caller: Caller, ev: EventInput, id: string, tsMs: number): OutboxMessage {
  const req = create(ApiRequestSchema, {
    workspaceId: caller.workspaceId,
    actor: caller.actor,
    keyKind: caller.keyKind,
    requestId: caller.requestId,
    op: 'waiters.wake',
    body: enc.encode(`{"params":{},"query":{},"body":${wakeBody(ev, id, tsMs)}}`),
  });
  return { subject: subjects.schedulerApiCommand, msgId: `wake:${id}`, payload: toBinary(ApiRequestSchema, req) };
}

/**
 * The event matched workflows' cancelOn: the scheduler cancels their active
 * runs that each entry's `if` selects. Written with the event (so once per
 * event, and never lost), applied from the scheduler's stream.
 */
function cancelOnCommand(caller: Caller, ev: EventInput, id: string, tsMs: number, matches: CancelMatch[]): OutboxMessage {
  const req = create(ApiRequestSchema, {
    workspaceId: caller.workspaceId,
    actor: caller.actor,
    keyKind: caller.keyKind,
    requestId: caller.requestId,
    op: 'runs.cancelOn',
    body: enc.encode(`{"params":{},"query":{},"body":{"event":${wakeBody(ev, id, tsMs)},"matches":${JSON.stringify(matches)}}}`),
  });
  return { subject: subjects.schedulerApiCommand, msgId: `cancel-on:${id}`, payload: toBinary(ApiRequestSchema, req) };
}

/** The event as admission (and the debounce and batch buffers) take it. */
const bufferedOf = (p: Prepared): BufferedEvent => {
  const ev = p.item.ev;
  return { id: p.id, name: ev.name, dataJson: ev.dataJson, tsMs: p.tsMs, runner: ev.runner ?? '', ...(ev.session ? { session: ev.session } : {}), ...(ev.tags ? { tags: ev.tags } : {}) };
};

/** A call that needs no transaction: no dedupe id, no record hook, and (unless suspended: nothing is admitted) no gate to pass. */
const isPlain = (prepared: Prepared[], ix: WorkspaceIndex, suspended: boolean): boolean =>
  prepared.every(
    (p) => !p.item.ev.dedupeId && !p.item.record && (suspended || p.matched.every((m) => Admission.passesNoGate(ix.policies.get(policyId(m.app, m.workflow))))),
  );

/** The event record's `triggered` (SPEC Event record): the runs it produced or joined. */
const logged = (t: TriggeredEntry[]) => t.flatMap((e) => (e.runId ? [{ workflow: e.workflow, app: e.app, runId: e.runId }] : []));
