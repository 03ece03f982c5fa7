import { nextCronTick } from '@dws/cel';
import { withTxRetry, type Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { ids, PollLoop, type Caller, type Outbox, type OutboxMessage } from '@dws/runtime';
import type { EventVars, WorkflowPolicy } from '@dws/cel';
import { closeBatch, dueBatches, firstBatchEvent, takeDueDebounces } from '../store/buffers.js';
import { advanceSchedule, claimTick, dueSchedules, pruneTicks } from '../store/cron.js';
import { dueKinds, nextDueInMs } from '../store/due.js';
import { advanceApiSchedule, dueApiSchedules } from '../store/schedules.js';
import { lockAll, pruneGates } from '../store/gates.js';
import { isSuspended, policyOf } from '../store/workflows.js';
import { nowMs, tracer } from '@dws/telemetry';
import { singletonId, type Admission, type NewRun, type SingletonCheck } from './admission.js';
import { appendTriggered, releasableHeld, takeHeld, type HeldRow } from '../store/held-events.js';
import type { BufferedEvent } from '../store/buffers.js';
import { traceScheduled } from './ingest-trace.js';

/** Rows taken per statement: a backlog drains over several polls instead of one long transaction. */
const BATCH = 100;
const PRUNE_EVERY_MS = 10 * 60_000;

export interface TimersOptions {
  /**
   * The longest sleep between looks. A replica sleeps until the earliest
   * cron tick, debounce or batch timeout and is woken when it arms one (an
   * event it debounced or batched, a registration it stored); this bounds how
   * late it fires one another replica armed and did not fire (it crashed).
   * @default 5000
   */
  pollMs?: number;
}

/**
 * The due-time work of ingest, on every replica: cron ticks (of registered
 * triggers and of schedules made through the API), debounce
 * buffers whose quiet period passed, batches whose timeout passed, delayed
 * events whose time came. Each kind is claimed with FOR UPDATE SKIP LOCKED
 * in a transaction that also writes the StartRun to the outbox (a delayed
 * event: its row is deleted by the transaction that takes it in), so a due
 * item fires once across replicas, and a crash before commit leaves it due
 * for the next poll.
 */
export class Timers {
  private readonly loop: PollLoop;
  private lastPrune = 0;

  constructor(
    private readonly d: {
      db: Database; log: Logger; outbox: Outbox; admission: Admission;
      /** Take in the delayed events that are due (ScheduledEvents.takeInDue through the ingestor). */
      takeInDelayed: () => Promise<number>;
    },
    opts: TimersOptions = {},
  ) {
    this.loop = new PollLoop(() => this.poll(), {
      pollMs: opts.pollMs ?? 5000,
      onError: (err) => this.d.log.warn({ err }, 'ingest timers poll failed'),
      // The prune is due-time work too: an idle replica wakes for it.
      nextDueInMs: async () => Math.min((await nextDueInMs(this.d.db)) ?? Infinity, this.lastPrune + PRUNE_EVERY_MS - Date.now()),
    });
  }

  start(): void {
    this.loop.start();
  }

  /** Look now (this replica armed a debounce, a batch or a schedule), not at the next poll. */
  kick(): void {
    this.loop.kick();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One round of every kind; returns how many items fired. */
  async poll(): Promise<number> {
    let n = 0;
    const due = await dueKinds(this.d.db);
    if (due.cron) n += await this.fire((tx, out) => this.cron(tx, out));
    if (due.debounces) n += await this.fire((tx, out) => this.debounces(tx, out));
    if (due.batches) n += await this.fire((tx, out) => this.batches(tx, out));
    if (due.delayed) n += await this.d.takeInDelayed();
    if (due.held) n += await this.releaseHeld();
    if (due.apiSchedules) n += await this.fire((tx, out) => this.apiSchedules(tx, out));
    if (Date.now() - this.lastPrune > PRUNE_EVERY_MS) {
      this.lastPrune = Date.now();
      await pruneGates(this.d.db);
      await pruneTicks(this.d.db);
    }
    return n;
  }

  private async fire(work: (tx: Database, out: OutboxMessage[]) => Promise<number>): Promise<number> {
    const t = tracer();
    const startMs = t ? nowMs() : 0;
    const { n, pending } = await withTxRetry(this.d.db, async (tx) => {
      const out: OutboxMessage[] = [];
      const n = await work(tx, out);
      return { n, pending: await this.d.outbox.enqueue(tx, out) };
    });
    if (t && pending.messages.length > 0) traceScheduled(t, startMs, pending);
    await this.d.outbox.afterCommit(pending);
    return n;
  }

  /**
   * Start the runs `starts` describes, locking their throttle rows first in
   * the global order (lockAll), as the event path does.
   */
  private async startAll(tx: Database, starts: { policy: WorkflowPolicy | undefined; run: NewRun }[], out: OutboxMessage[]): Promise<void> {
    const locks = starts.flatMap(({ policy, run: r }) => this.d.admission.throttleLock(r.workspaceId, r.app, r.workflow, policy, r.vars) ?? []);
    await lockAll(tx, locks);
    for (const { policy, run } of starts) await this.d.admission.startRun(tx, policy, run, out);
  }

  /**
   * Cron: one run per due schedule, for the tick it was due at, then the
   * schedule moves to its first tick after now. Ticks missed while no
   * replica ran collapse into that one run (not one per missed tick).
   * SPEC Errors: a suspended workspace's tick is refused (recorded, no run);
   * so is a paused workflow's.
   */
  private async cron(tx: Database, out: OutboxMessage[]): Promise<number> {
    const due = await dueSchedules(tx, BATCH);
    const starts: { policy: WorkflowPolicy | undefined; run: NewRun }[] = [];
    for (const s of due) {
      const tick = new Date(s.next_at);
      const now = new Date(s.db_now);
      const policy = await policyOf(tx, s.workspace_id, s.app, s.workflow);
      // A suspended workspace's tick, or a paused workflow's, is recorded with no run.
      const skip = policy?.paused !== undefined || (await isSuspended(tx, s.workspace_id));
      const runId = skip ? '' : ids.run();
      if ((await claimTick(tx, s, tick, runId)) && !skip) {
        starts.push({ policy, run: cronRun(s, runId, tick, { cron: s.cron, scheduledAt: tick.toISOString() }) });
      }
      await advanceSchedule(tx, s, nextCronTick(s, now > tick ? now : tick));
    }
    await this.startAll(tx, starts, out);
    return due.length;
  }

  /**
   * Schedules made through the API: one run per due schedule, for the tick
   * it was due at (`event.data`: `{ cron, scheduledAt, scheduleId,
   * externalId, data }`), then the schedule moves to its first tick after
   * now; the row lock and its advance in this transaction fire each tick
   * once. A tick of a workflow no longer registered, of a paused one, or of
   * a suspended workspace passes with no run.
   */
  private async apiSchedules(tx: Database, out: OutboxMessage[]): Promise<number> {
    const due = await dueApiSchedules(tx, BATCH);
    const starts: { policy: WorkflowPolicy | undefined; run: NewRun }[] = [];
    for (const s of due) {
      const tick = new Date(s.next_at!);
      const now = new Date(s.db_now);
      const policy = await policyOf(tx, s.workspace_id, s.app, s.workflow);
      if (policy && !policy.paused && !(await isSuspended(tx, s.workspace_id))) {
        const input = { cron: s.cron, scheduledAt: tick.toISOString(), scheduleId: s.id, ...(s.external_id ? { externalId: s.external_id } : {}), data: JSON.parse(s.data) as unknown };
        starts.push({ policy, run: { ...cronRun(s, ids.run(), tick, input), ...(s.tags ? { tags: s.tags } : {}) } });
      }
      await advanceApiSchedule(tx, s.id, tick, nextCronTick(s, now > tick ? now : tick));
    }
    await this.startAll(tx, starts, out);
    return due.length;
  }

  /**
   * Events held for a workflow paused with `hold`, now that it is resumed:
   * each match admitted in arrival order under the flow control of this
   * moment (rate limits, singleton, debounce, ...), as its event's would
   * have been, and its run added to the event's record. The singleton keys
   * are asked of the scheduler first, outside the transaction, as the event
   * path does; inside it each row is taken once (SKIP LOCKED) unless its
   * workflow was paused again meanwhile.
   */
  private async releaseHeld(): Promise<number> {
    const rows = await releasableHeld(this.d.db, BATCH);
    if (rows.length === 0) return 0;
    const policies = new Map<string, WorkflowPolicy | undefined>();
    const policy = async (db: Database, r: HeldRow, fresh = false) => {
      const k = [r.workspace_id, r.app, r.workflow].join('\u0000');
      if (fresh || !policies.has(k)) policies.set(k, await policyOf(db, r.workspace_id, r.app, r.workflow));
      return policies.get(k);
    };
    const vars = (r: HeldRow): EventVars => ({ event: { id: r.event_id, name: r.name, data: JSON.parse(r.data) as unknown, ts: Number(r.received_ms) } });
    const callerOf = (ws: string): Caller => ({ workspaceId: ws, actor: 'ingest', keyKind: 'secret', requestId: ids.generic('req') });
    const singletons = new Map<string, SingletonCheck>();
    for (const r of rows) {
      const s = this.d.admission.singletonScopes(r.workspace_id, await policy(this.d.db, r), r.app, r.workflow, vars(r));
      if (s && !singletons.has(singletonId(s))) singletons.set(singletonId(s), await this.d.admission.singletonCheck(callerOf(r.workspace_id), s));
    }
    return this.fire(async (tx, out) => {
      const live: { r: HeldRow; policy: WorkflowPolicy | undefined }[] = [];
      for (const r of rows) {
        const p = await policy(tx, r, true);
        if (p && !p.paused) live.push({ r, policy: p });
      }
      const taken = await takeHeld(tx, live.map(({ r }) => r.seq));
      const mine = live.filter(({ r }) => taken.has(r.seq));
      await lockAll(tx, mine.flatMap(({ r, policy: p }) => this.d.admission.lockNames(r.workspace_id, r.app, r.workflow, p, vars(r))));
      const records: { id: string; triggered: unknown[] }[] = [];
      for (const { r, policy: p } of mine) {
        const ev: BufferedEvent = {
          id: r.event_id, name: r.name, dataJson: r.data, tsMs: Number(r.received_ms), runner: r.runner ?? '',
          ...(r.session ? { session: r.session } : {}), ...(r.tags ? { tags: r.tags } : {}),
        };
        const e = await this.d.admission.admit(tx, { workspaceId: r.workspace_id, app: r.app, workflow: r.workflow, policy: p, ev, vars: vars(r) }, singletons, out);
        if (e.runId) records.push({ id: r.event_id, triggered: [{ workflow: e.workflow, app: e.app, runId: e.runId }] });
      }
      await appendTriggered(tx, records);
      return mine.length;
    });
  }

  /** Debounce buffers whose quiet period (or timeout) passed: one run with the last event. */
  private async debounces(tx: Database, out: OutboxMessage[]): Promise<number> {
    const due = await takeDueDebounces(tx, BATCH);
    const starts: { policy: WorkflowPolicy | undefined; run: NewRun }[] = [];
    for (const r of due) {
      if (await isSuspended(tx, r.workspace_id)) continue;
      const data = JSON.parse(r.data) as unknown;
      starts.push({
        policy: await policyOf(tx, r.workspace_id, r.app, r.workflow),
        run: {
          workspaceId: r.workspace_id, app: r.app, workflow: r.workflow, runId: r.run_id, runner: r.runner, eventId: r.event_id,
          eventName: r.event_name, inputJson: r.data, vars: { event: { id: r.event_id, name: r.event_name, data, ts: Date.now() } }, triggerKind: 'event',
          ...(r.session ? { session: r.session } : {}), ...(r.tags ? { tags: r.tags } : {}),
        },
      });
    }
    await this.startAll(tx, starts, out);
    return due.length;
  }

  /** Batches whose timeout passed before they filled: one run over what they hold. */
  private async batches(tx: Database, out: OutboxMessage[]): Promise<number> {
    const due = await dueBatches(tx, BATCH);
    const fire: { runId: string; policy: WorkflowPolicy | undefined }[] = [];
    for (const b of due) {
      if (await isSuspended(tx, b.workspace_id)) await closeBatch(tx, b.run_id);
      else fire.push({ runId: b.run_id, policy: await policyOf(tx, b.workspace_id, b.app, b.workflow) });
    }
    // A batch's throttle key is its first event's: read under the batch's row lock, which this transaction holds.
    const locks: string[] = [];
    for (const f of fire) {
      const b = due.find((x) => x.run_id === f.runId)!;
      const first = await firstBatchEvent(tx, f.runId);
      if (first) locks.push(...[this.d.admission.throttleLock(b.workspace_id, b.app, b.workflow, f.policy, first)].flatMap((x) => x ?? []));
    }
    await lockAll(tx, locks);
    for (const f of fire) await this.d.admission.fireBatch(tx, f.runId, f.policy, out);
    return due.length;
  }
}

/** The run a cron tick starts (a registered trigger's or a schedule's): no event; `input` is its event.data. */
function cronRun(s: { workspace_id: string; app: string; workflow: string }, runId: string, tick: Date, input: Record<string, unknown>): NewRun {
  return {
    workspaceId: s.workspace_id, app: s.app, workflow: s.workflow, runId, runner: '', eventId: '', eventName: '',
    inputJson: JSON.stringify(input), vars: { event: { id: '', name: '', data: input, ts: tick.getTime() } }, triggerKind: 'cron',
  };
}
