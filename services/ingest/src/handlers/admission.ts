import type { Bus } from '@dws/bus';
import { gateKey, runFields, type EventVars, type WorkflowPolicy } from '@dws/cel';
import type { Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { create, StartRunSchema, toBinary } from '@dws/proto';
import { mergeTags } from '@dws/protocol';
import { callApi, ids, subjects, type Caller, type OutboxMessage } from '@dws/runtime';
import { entry, gcraParams, idempotencyKey, type TriggeredEntry } from '../domain/admission.js';
import { batchEvent, closeBatch, debounceEvent, type BufferedEvent } from '../store/buffers.js';
import { holdEvent } from '../store/held-events.js';
import {
  claimIdempotencyKey,
  gcraAdmit,
  lockName,
  lockSingleton,
  releaseIdempotencyKey,
  setSingleton,
  singletonClaim,
  type GateScope,
} from '../store/gates.js';

const enc = new TextEncoder();

/** A batch is started early past this many bytes of event data: its input rides one bus message. */
const MAX_BATCH_BYTES = 512 * 1024;
/** A started singleton run the scheduler has not stored yet counts as active this long (its StartRun is on the way). */
const SINGLETON_IN_FLIGHT_MS = 10 * 60_000;

/** What ingest learned about a singleton key before its transaction: the run it last started, and whether the key is free. */
export interface SingletonCheck {
  claimRunId: string;
  free: boolean;
}

export const singletonId = (s: Omit<GateScope, 'workspaceId'>) => `${s.app}\u0000${s.workflow}\u0000${s.key}`;

/** A run about to be handed to the scheduler. */
export interface NewRun {
  workspaceId: string;
  app: string;
  workflow: string;
  runId: string;
  runner: string;
  eventId: string;
  eventName: string;
  /** Raw JSON text of the run's input. */
  inputJson: string;
  vars: EventVars;
  triggerKind: 'event' | 'cron';
  batch?: boolean;
  /** The triggering event's session, which the run joins. */
  session?: string;
  /** The run's tags: its triggering event's, or its batch's. */
  tags?: string[];
}

/**
 * The admission gates that decide at ingest time (see docs/architecture.md,
 * Flow control): idempotency, rateLimit, singleton skip, debounce,
 * batchEvents, and throttle's start time. Each gate's state is a row locked
 * in the caller's transaction, so concurrent events of one key take turns
 * and the StartRun lands in the same transaction as the state that admits
 * it.
 */
export class Admission {
  constructor(private readonly d: { db: Database; bus: Bus; log: Logger }) {}

  /**
   * Before the transaction (a bus call inside it would stall PGlite's one
   * connection): is the singleton key free? Ingest's own claim says which
   * run it last started; the scheduler says whether that run, or any run of
   * the key, is still active (`runs.activeForKey`).
   */
  async singletonCheck(caller: Caller, s: GateScope): Promise<SingletonCheck> {
    const claim = await singletonClaim(this.d.db, s);
    const claimRunId = claim?.runId ?? '';
    let reply: { active?: unknown; finished?: unknown };
    try {
      const res = await callApi(
        this.d.bus,
        'scheduler',
        'runs.activeForKey',
        caller,
        { rawBody: JSON.stringify({ app: s.app, workflow: s.workflow, key: s.key, runIds: claimRunId ? [claimRunId] : [] }) },
        2000,
      );
      reply = JSON.parse(res.bodyJson ?? '{}') as typeof reply;
    } catch (err) {
      // A scheduler without the op (404) or not there (no_responders, timeout): treat as none active.
      this.d.log.debug({ err, workflow: s.workflow }, 'runs.activeForKey unavailable; treating the key as free');
      return { claimRunId, free: true };
    }
    const active = Array.isArray(reply.active) ? reply.active : [];
    const finished = Array.isArray(reply.finished) ? reply.finished : [];
    if (active.length > 0) return { claimRunId, free: false };
    if (!claimRunId || finished.includes(claimRunId)) return { claimRunId, free: true };
    // Unknown to the scheduler: still on its way, unless it is so old it never will be.
    return { claimRunId, free: Date.now() - claim!.claimedAt.getTime() > SINGLETON_IN_FLIGHT_MS };
  }

  /** True when admitting a match of this policy writes nothing but its StartRun (no gate row to claim or lock). */
  static passesNoGate(policy: WorkflowPolicy | undefined): boolean {
    return (
      !policy ||
      (!policy.idempotency && !policy.rateLimit && policy.singleton?.mode !== 'skip' && !policy.debounce && !policy.batchEvents && !policy.throttle && !policy.paused?.hold)
    );
  }

  /** The singleton keys a set of matches needs checked, each once. */
  singletonScopes(workspaceId: string, policy: WorkflowPolicy | undefined, app: string, workflow: string, vars: EventVars): GateScope | undefined {
    if (policy?.singleton?.mode !== 'skip' || policy.debounce || policy.batchEvents || policy.paused) return undefined;
    return { workspaceId, app, workflow, key: gateKey(policy.singleton.key, vars) };
  }

  /**
   * The gate rows admitting this match may lock, as advisory lock names
   * (see lockAll): taken up front in one order by the whole transaction.
   */
  lockNames(workspaceId: string, app: string, workflow: string, policy: WorkflowPolicy | undefined, vars: EventVars): string[] {
    if (!policy) return [];
    const scope = (key: string): GateScope => ({ workspaceId, app, workflow, key });
    const names: string[] = [];
    const idem = policy.idempotency && idempotencyKey(policy.idempotency, vars);
    if (idem) names.push(lockName('idempotency', scope(idem)));
    if (policy.rateLimit) names.push(lockName('rate_limit', scope(gateKey(policy.rateLimit.key, vars))));
    const sg = this.singletonScopes(workspaceId, policy, app, workflow, vars);
    if (sg) names.push(lockName('singleton', sg));
    if (policy.debounce) names.push(lockName('debounce', scope(gateKey(policy.debounce.key, vars))));
    if (policy.batchEvents) names.push(lockName('batch', scope(gateKey(policy.batchEvents.key, vars))));
    if (policy.throttle) names.push(this.throttleLock(workspaceId, app, workflow, policy, vars)!);
    return names;
  }

  /** The throttle row a start of this run locks, if the workflow is throttled. */
  throttleLock(workspaceId: string, app: string, workflow: string, policy: WorkflowPolicy | undefined, vars: EventVars): string | undefined {
    return policy?.throttle ? lockName('throttle', { workspaceId, app, workflow, key: gateKey(policy.throttle.key, vars) }) : undefined;
  }

  /**
   * Admit one (event, workflow) match inside `tx`: none while the workflow
   * is paused (paused with `hold`, the match is kept for its resume), else
   * the gates in order idempotency, rateLimit, singleton skip, then debounce
   * or batch or a StartRun (with throttle's not-before) appended to `out`.
   */
  async admit(
    tx: Database,
    a: { workspaceId: string; app: string; workflow: string; policy: WorkflowPolicy | undefined; ev: BufferedEvent; vars: EventVars },
    singletons: Map<string, SingletonCheck>,
    out: OutboxMessage[],
  ): Promise<TriggeredEntry> {
    const { workspaceId, app, workflow, policy, ev, vars } = a;
    // Paused by an operator: no gate is touched, no run starts (those under way go on).
    if (policy?.paused) {
      if (!policy.paused.hold) return entry(app, workflow, { paused: true });
      await holdEvent(tx, { workspaceId, app, workflow, eventId: ev.id, session: ev.session });
      return entry(app, workflow, { paused: true, held: true });
    }
    const scope = (key: string): GateScope => ({ workspaceId, app, workflow, key });
    const runId = ids.run();

    let held: GateScope | undefined;
    if (policy?.idempotency) {
      const k = idempotencyKey(policy.idempotency, vars);
      if (k !== undefined) {
        if (!(await claimIdempotencyKey(tx, scope(k), runId))) return entry(app, workflow, { deduped: true });
        held = scope(k);
      }
    }
    // A key claimed for a run that a later gate stops is given back.
    const stop = async (over: Partial<TriggeredEntry>) => {
      if (held) await releaseIdempotencyKey(tx, held, runId);
      return entry(app, workflow, over);
    };

    if (policy?.rateLimit) {
      const rl = policy.rateLimit;
      const r = await gcraAdmit(tx, { ...scope(gateKey(rl.key, vars)), kind: 'rate_limit', ...gcraParams(rl, 'rate_limit'), drop: true });
      if (!r.allowed) return stop({ dropped: true });
    }

    const sg = this.singletonScopes(workspaceId, policy, app, workflow, vars);
    if (sg) {
      const current = await lockSingleton(tx, sg);
      const pre = singletons.get(singletonId(sg)) ?? { claimRunId: '', free: true };
      // Another event claimed the key after our check (this request or a concurrent one): that run is active.
      if (current !== pre.claimRunId || !pre.free) return stop({ skipped: true });
      await setSingleton(tx, sg, runId);
    }

    if (policy?.debounce) {
      const db = policy.debounce;
      const id = await debounceEvent(tx, scope(gateKey(db.key, vars)), ev, { runId, periodMs: db.periodMs, timeoutMs: db.timeoutMs });
      return entry(app, workflow, { runId: id, debounced: true });
    }

    if (policy?.batchEvents) {
      const be = policy.batchEvents;
      const b = await batchEvent(tx, scope(gateKey(be.key, vars)), ev, { runId, timeoutMs: be.timeoutMs });
      if (b.size >= be.maxSize || b.bytes >= MAX_BATCH_BYTES) await this.fireBatch(tx, b.runId, policy, out);
      return entry(app, workflow, { runId: b.runId, batched: true });
    }

    await this.startRun(tx, policy, {
      workspaceId, app, workflow, runId, runner: ev.runner, eventId: ev.id, eventName: ev.name, inputJson: ev.dataJson, vars, triggerKind: 'event',
      ...(ev.session ? { session: ev.session } : {}), ...(ev.tags ? { tags: ev.tags } : {}),
    }, out);
    return entry(app, workflow, { runId });
  }

  /** Close a batch and start its run: input is the array of its events, oldest first. */
  async fireBatch(tx: Database, runId: string, policy: WorkflowPolicy | undefined, out: OutboxMessage[]): Promise<boolean> {
    const b = await closeBatch(tx, runId);
    const first = b?.events[0];
    if (!b || !first) return false;
    const inputJson = `[${b.events
      .map((e) => `{"id":${JSON.stringify(e.event_id)},"name":${JSON.stringify(e.name)},"data":${e.data},"ts":${Number(e.ts_ms)}}`)
      .join(',')}]`;
    const vars: EventVars = { event: { id: first.event_id, name: first.name, data: JSON.parse(first.data) as unknown, ts: Number(first.ts_ms) } };
    const tags = mergeTags(b.events.map((e) => e.tags));
    await this.startRun(tx, policy, {
      workspaceId: b.workspace_id, app: b.app, workflow: b.workflow, runId, runner: b.runner, eventId: first.event_id, eventName: first.name,
      inputJson, vars, triggerKind: 'event', batch: true, ...(first.session ? { session: first.session } : {}), ...(tags ? { tags } : {}),
    }, out);
    return true;
  }

  /**
   * Hand a run to the scheduler through the outbox, with the fields it
   * enforces (concurrency, priority, singleton, timeouts) and throttle's start time,
   * decided here under the throttle row's lock.
   */
  async startRun(tx: Database, policy: WorkflowPolicy | undefined, r: NewRun, out: OutboxMessage[]): Promise<void> {
    let notBeforeMs = 0;
    if (policy?.throttle) {
      const th = policy.throttle;
      const g = await gcraAdmit(tx, {
        workspaceId: r.workspaceId, app: r.app, workflow: r.workflow, key: gateKey(th.key, r.vars), kind: 'throttle', ...gcraParams(th, 'throttle'), drop: false,
      });
      if (g.startAtMs > g.nowMs) notBeforeMs = g.startAtMs;
    }
    const f = runFields(policy, r.vars);
    const cmd = create(StartRunSchema, {
      workspaceId: r.workspaceId,
      runId: r.runId,
      workflow: r.workflow,
      app: r.app,
      runner: r.runner,
      eventId: r.eventId,
      eventName: r.eventName,
      input: enc.encode(r.inputJson),
      triggerKind: r.triggerKind,
      createdAtMs: BigInt(Date.now()),
      notBeforeMs: BigInt(notBeforeMs),
      concurrencyKey: f.concurrencyKey,
      concurrencyLimit: f.concurrencyLimit,
      concurrencyKey2: f.concurrencyKey2,
      concurrencyLimit2: f.concurrencyLimit2,
      concurrencyShared2: f.concurrencyShared2,
      priority: f.priority,
      singletonKey: f.singletonKey,
      singletonMode: f.singletonMode,
      batch: r.batch ?? false,
      session: r.session ?? '',
      tags: r.tags ?? [],
      timeoutStartMs: BigInt(policy?.timeouts?.startMs ?? 0),
      timeoutFinishMs: BigInt(policy?.timeouts?.finishMs ?? 0),
      cancelOn: (policy?.cancelOn?.length ?? 0) > 0,
    });
    out.push({ subject: subjects.startRun, msgId: r.runId, payload: toBinary(StartRunSchema, cmd) });
  }
}
