import { createHash } from 'node:crypto';
import { withTxRetry, type Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { celMatches, checkCel } from '@dws/cel';
import { conflict, invalid, isServiceError, notFound, parseTags, ServiceError } from '@dws/protocol';
import { ids, WAKE_BATCH_MAX, type ApiHandler, type Caller, type Outbox, type PendingPublish } from '@dws/runtime';
import { addEffects, cancelLockedRun, insertQueuedRun, type RunEffects } from '../store/effects.js';
import { activeSingletons, singletonModeOf, singletonState } from '../store/flow.js';
import { resolveStep, type NewFrame } from '../store/runs.js';
import { liveRunOf, type LiveRun } from '../engine/live.js';
import { traceRunStart } from '../engine/pass-trace.js';
import { instant } from './reads-api.js';
import { cancelOnHolds, cancelOnReason, parseInput, type CancellingEvent } from '../domain/cancel-on.js';
import { lockCancelOn, storeCancelSignal } from '../store/cancel-signals.js';
import { bulkKey, bulkRunKey, forkKeyOf, keepForkKey } from '../store/fork-keys.js';
import {
  activeForBulk,
  activeRunsOf,
  cancelPauseRequest,
  countActiveForBulk,
  copySteps,
  listAudit,
  lockRun,
  requestPause,
  runsForBulk,
  setRunStatus,
  stepsBefore,
  namesWaitedFor,
  waitersFor,
  writeAudit,
  type ActiveRunRow,
  type BulkFilter,
  type ControlRun,
} from '../store/control.js';

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
const RUN_STATUSES = new Set(['queued', 'running', 'waiting', 'paused', 'succeeded', 'failed', 'cancelled']);
const ACTIVE_STATUSES = new Set(['queued', 'running', 'waiting', 'paused']);
/** Per-call ceiling of bulk replay and of bulk cancel (SPEC leaves the value open). */
export const BULK_CEILING = 1000;
/** Runs a bulk cancel with an `if` reads at most per call: the ones `if` spares stay, so a repeat must not read only them. */
export const BULK_CANCEL_SCAN = 10_000;
const BULK_PAGE = 200;
/** A run forked from `of` (replay, retry-from-step), with the frames to go live and the messages to publish once committed. */
interface Forked {
  id: string;
  of: string;
  workflow: string;
  live: RunEffects['live'];
  pending: PendingPublish;
}

/** A fork (replay, retry-from-step) made now, or the one an earlier call with the same Idempotency-Key made. */
type ForkOutcome = { forked: Forked } | { again: string };

const keyReused = () =>
  new ServiceError(422, 'idempotency_key_reused', 'This Idempotency-Key was sent within 24 h with another call (another run, action or body): use a new key.');

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/**
 * A bulk action's filter from its body: at least one field, `status` one of
 * `statuses`, the times RFC 3339 (as GET /runs reads them). `extra` names
 * the action's other fields.
 */
function bulkFilterOf(body: unknown, statuses: Set<string>, extra: string[] = []): BulkFilter {
  const fields = ['app', 'workflow', 'status', 'runType', 'tags', 'since', 'until'];
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw invalid('invalid_body', `Body must be a filter object: { ${[...fields, ...extra].map((f) => `${f}?`).join(', ')} }.`);
  }
  const b = body as Record<string, unknown>;
  // A misspelt field left out would widen the filter: what a bulk action takes is all it reads.
  const unknown = Object.keys(b).filter((k) => !fields.includes(k) && !extra.includes(k));
  if (unknown.length > 0) throw invalid('invalid_body', `Unknown filter field ${unknown.map((k) => `"${k}"`).join(', ')}: the fields are ${[...fields, ...extra].join(', ')}.`);
  for (const [k, v] of Object.entries(b)) {
    if (k !== 'tags' && v !== undefined && v !== null && typeof v !== 'string') throw invalid('invalid_body', `${k} must be a string.`);
  }
  const tags = parseTags(b.tags, 'invalid_body');
  if (tags === undefined && ![...fields, ...extra].some((f) => str(b[f]) !== undefined)) throw invalid('filter_required', 'At least one filter field is required.');
  const filter: BulkFilter = { app: str(b.app), workflow: str(b.workflow), status: str(b.status), runType: str(b.runType), tags, since: instant(b, 'since'), until: instant(b, 'until') };
  if (filter.status && !statuses.has(filter.status)) throw invalid('invalid_status', `status must be one of ${[...statuses].join(', ')}.`);
  if (filter.runType && filter.runType !== 'event' && filter.runType !== 'cron') throw invalid('invalid_run_type', 'runType must be event or cron.');
  return filter;
}

interface WakeEvent {
  name: string;
  data: unknown;
  id: string | undefined;
  ts: string | undefined;
}

/** An event to wake waiters with, as ingest sends it; undefined without a name. */
function wakeEvent(body: unknown): WakeEvent | undefined {
  const b = body as { name?: unknown; data?: unknown; id?: unknown; ts?: unknown } | undefined;
  const name = str(b?.name);
  return name ? { name, data: b?.data ?? null, id: str(b?.id), ts: str(b?.ts) } : undefined;
}

export interface ControlDeps {
  db: Database;
  log: Logger;
  /** The run record of the API, read after the action. */
  runRecord(workspaceId: string, id: string): Promise<Record<string, unknown>>;
  /** Something became due: claim now rather than at the next poll. */
  nudge(): void;
  outbox: Outbox;
  /** Frames an action stored go live (engine/live.ts), once its transaction committed. */
  live(run: LiveRun, frames: NewFrame[]): void;
}

/** Cancel one run (and audit it): see controlActions. */
export type CancelRun = (caller: Caller, id: string | undefined, message: string, detail?: unknown, strict?: boolean) => Promise<boolean>;

/** What every control action shares, and the cancel that run timeouts use too. */
export function controlActions(deps: ControlDeps) {
  const { db, log } = deps;

  const audit = async (caller: Caller, action: string, e: { runId?: string; newRunId?: string; detail?: unknown }) => {
    try {
      await writeAudit(db, { workspaceId: caller.workspaceId, action, actor: caller.actor || undefined, ...e });
    } catch (err) {
      log.error({ err, action, runId: e.runId }, 'control audit write failed; the action stands');
    }
  };

  const mustLock = async (tx: Database, caller: Caller, id: string | undefined): Promise<ControlRun> => {
    const run = id ? await lockRun(tx, caller.workspaceId, id) : undefined;
    if (!run) throw notFound('run');
    return run;
  };

  /** Frames a committed transaction stored go live. */
  const publish = (live: RunEffects['live']) => {
    for (const [r, frames] of live) deps.live(r, frames);
  };

  /**
   * Cancel one run and audit it. An ended run is a 409, or (`strict` false:
   * cancelOn racing the run's end, or its deletion) nothing: false.
   */
  const cancel: CancelRun = async (caller: Caller, id: string | undefined, message: string, detail?: unknown, strict = true) => {
    const done = await withTxRetry(db, async (tx) => {
      const run = strict ? await mustLock(tx, caller, id) : id ? await lockRun(tx, caller.workspaceId, id) : undefined;
      if (!run || TERMINAL.has(run.status)) {
        if (strict) throw conflict('run_terminal', `Run is already ${run!.status}.`);
        return undefined;
      }
      const cancelled = await cancelLockedRun(tx, run, { message });
      return { pending: await deps.outbox.enqueue(tx, cancelled.messages), live: cancelled.live };
    });
    if (!done) return false;
    publish(done.live);
    deps.nudge(); // a cancelled child fails its parent's step: the parent is due now
    await deps.outbox.afterCommit(done.pending);
    await audit(caller, 'cancel', { runId: id, ...(detail === undefined ? {} : { detail }) });
    return true;
  };

  return { audit, mustLock, publish, cancel };
}

/**
 * Run control (SPEC Run control and transitions), each action written to the
 * audit log. A failed audit write is logged and never fails the action.
 */
export function controlApi(deps: ControlDeps): Record<string, ApiHandler> {
  const { db, log } = deps;
  const { audit, mustLock, publish, cancel } = controlActions(deps);

  /**
   * A replay is a new run of its source's singleton key. With the workflow's
   * singleton skip it is refused (409) while another run of the key is
   * active; with cancel, the active ones are cancelled (returned: what that
   * did). Queue needs nothing here: the fork took its source's hold of the
   * key's one slot with its other slots.
   */
  const singletonGate = async (tx: Database, src: ControlRun): Promise<RunEffects> => {
    const ended: RunEffects = { live: [], messages: [] };
    if (src.singleton_key === null) return ended;
    const scope = { workspaceId: src.workspace_id, app: src.app, workflow: src.workflow };
    const mode = await singletonModeOf(tx, scope);
    if (mode !== 'skip' && mode !== 'cancel') return ended;
    const active = await activeSingletons(tx, { ...scope, key: src.singleton_key });
    if (mode === 'skip' && active.length > 0) {
      throw conflict('singleton_active', `Run ${active[0]} of this singleton key is active, and the workflow skips new runs of the key: replay once it ends, or cancel it.`);
    }
    for (const id of active) {
      const locked = await lockRun(tx, src.workspace_id, id);
      if (locked) addEffects(ended, await cancelLockedRun(tx, locked, { message: 'Cancelled: a replay of this singleton key started.' }));
    }
    return ended;
  };

  /** A new run from a finished one (replay, retry-from-step, bulk replay), with its effects to publish once `tx` commits (`launch`). */
  const fork = async (tx: Database, src: ControlRun, inputJson: string): Promise<Forked> => {
    const id = ids.run();
    const ended = await singletonGate(tx, src);
    const { live } = await insertQueuedRun(tx, {
      id,
      workspaceId: src.workspace_id,
      workflow: src.workflow,
      app: src.app,
      runner: src.runner,
      triggerKind: src.trigger_kind,
      eventId: src.event_id,
      eventName: src.event_name,
      replayOf: src.id,
      inputJson,
      singletonKey: src.singleton_key,
    });
    return { id, live: [...ended.live, ...live], pending: await deps.outbox.enqueue(tx, ended.messages), of: src.id, workflow: src.workflow };
  };

  /** A fork committed: its frames go live, its messages go out and its trace gets its root (`run.start`). */
  const launch = async (f: Forked) => {
    publish(f.live);
    traceRunStart(f.id, { 'dws.workflow': f.workflow, 'dws.trigger': 'replay', 'dws.replay.of': f.of }, f.of);
    await deps.outbox.afterCommit(f.pending);
  };

  /**
   * Fork run `id` with `make` in one transaction, at most once per
   * Idempotency-Key (`key`): a repeat of the call waits on the source's lock,
   * finds the key and gets the run the first made; the key sent with another
   * call (`asked`: the action and its body) is 422.
   */
  const forkOnce = async (
    caller: Caller,
    id: string | undefined,
    key: string | undefined,
    asked: unknown[],
    make: (tx: Database, run: ControlRun) => Promise<Forked>,
  ): Promise<ForkOutcome> => {
    const fingerprint = key === undefined ? undefined : createHash('sha256').update(JSON.stringify([id, ...asked])).digest('base64url');
    return withTxRetry(db, async (tx): Promise<ForkOutcome> => {
      const run = await mustLock(tx, caller, id);
      const kept = key === undefined ? undefined : await forkKeyOf(tx, caller.workspaceId, key);
      if (kept) {
        if (kept.fingerprint !== fingerprint) throw keyReused();
        return { again: kept.newRunId };
      }
      const forked = await make(tx, run);
      if (key !== undefined && !(await keepForkKey(tx, caller.workspaceId, key, { fingerprint: fingerprint!, newRunId: forked.id }))) throw keyReused();
      return { forked };
    });
  };

  /** The new run, as POST replay and retry-from-step answer it (201); a fork made now goes live and is audited, a repeat says so. */
  const forkAnswer = async (caller: Caller, done: ForkOutcome, action: string, detail: unknown) => {
    if ('again' in done) return { status: 201, body: await deps.runRecord(caller.workspaceId, done.again), headers: { 'idempotent-replayed': 'true' } };
    const { forked } = done;
    await launch(forked);
    await audit(caller, action, { runId: forked.of, newRunId: forked.id, detail });
    const body = await deps.runRecord(caller.workspaceId, forked.id);
    // As resume: the answer says what the call made (a queued run), then it is claimed.
    deps.nudge();
    return { status: 201, body };
  };

  return {
    async 'runs.cancel'({ caller, params }) {
      await cancel(caller, params.id, `Cancelled by ${caller.actor || 'a user'}.`);
      return { body: await deps.runRecord(caller.workspaceId, params.id!) };
    },

    /**
     * An event matched the workflows' cancelOn (ingest's command, written
     * with the event): each workflow's active runs whose `if` holds, `event`
     * being the run's own triggering event and `async` this one, are
     * cancelled and audited as cancels. A repeat finds them ended.
     */
    async 'runs.cancelOn'({ caller, body }) {
      const b = (body ?? {}) as { event?: unknown; matches?: unknown };
      const ev = wakeEvent(b.event);
      if (!ev?.id || !Array.isArray(b.matches)) throw invalid('invalid_body', 'runs.cancelOn needs { event: { name, data, id }, matches: [...] }.');
      const async_: CancellingEvent = { name: ev.name, data: ev.data, id: ev.id, ts: ev.ts };
      const { message, detail } = cancelOnReason(async_);
      const cancelled = new Set<string>();
      for (const m of b.matches as { app?: unknown; workflow?: unknown; if?: unknown; withinMs?: unknown }[]) {
        const app = typeof m?.app === 'string' ? m.app : undefined;
        const workflow = str(m?.workflow);
        if (app === undefined || !workflow) continue;
        const withinMs = typeof m.withinMs === 'number' && m.withinMs > 0 ? Math.floor(m.withinMs) : 0;
        const expr = str(m.if);
        // Kept first, under the workflow's lock, for its runs whose StartRun comes after this (store/cancel-signals.ts).
        await withTxRetry(db, async (tx) => {
          await lockCancelOn(tx, caller.workspaceId, app, workflow);
          await storeCancelSignal(tx, {
            workspaceId: caller.workspaceId, app, workflow, eventId: ev.id!, eventName: ev.name, eventData: JSON.stringify(ev.data),
            eventTs: ev.ts ?? new Date().toISOString(), ifExpr: expr ?? '', withinMs, actor: caller.actor || null,
          });
        });
        for (const run of await activeRunsOf(db, { workspaceId: caller.workspaceId, app, workflow, eventId: ev.id, withinMs })) {
          if (cancelled.has(run.id)) continue;
          if (!cancelOnHolds(expr, { eventName: run.event_name, input: run.input }, async_)) continue;
          if (await cancel(caller, run.id, message, detail, false)) cancelled.add(run.id);
        }
      }
      return { body: { cancelled: [...cancelled] } };
    },

    async 'runs.pause'({ caller, params }) {
      const live = await withTxRetry(db, async (tx) => {
        const run = await mustLock(tx, caller, params.id);
        if (TERMINAL.has(run.status)) throw conflict('run_terminal', `Run is already ${run.status}.`);
        if (run.status === 'paused') return undefined; // idempotent
        // A held run stops at its next step boundary (its engine tells streams); an idle one stops now.
        if (run.lease_owner) {
          await requestPause(tx, run.id);
          return undefined;
        }
        const frame = await setRunStatus(tx, run, 'paused');
        return () => deps.live(liveRunOf(run, 'paused'), [frame]);
      });
      live?.();
      await audit(caller, 'pause', { runId: params.id });
      return { body: await deps.runRecord(caller.workspaceId, params.id!) };
    },

    async 'runs.resume'({ caller, params }) {
      const live = await withTxRetry(db, async (tx) => {
        const run = await mustLock(tx, caller, params.id);
        if (run.status !== 'paused') {
          if (run.pause_requested && !TERMINAL.has(run.status)) {
            await cancelPauseRequest(tx, run.id);
            return undefined;
          }
          throw conflict('run_not_paused', `Run is ${run.status}, not paused.`);
        }
        const frame = await setRunStatus(tx, run, 'queued', { leaseUntilNow: true });
        return () => deps.live(liveRunOf(run, 'queued'), [frame]);
      });
      live?.();
      await audit(caller, 'resume', { runId: params.id });
      const body = await deps.runRecord(caller.workspaceId, params.id!);
      // Claimed once the answer is read: it says what the resume did (queued), not how far the run got since.
      deps.nudge();
      return { body };
    },

    async 'runs.replay'({ caller, params, body, headers }) {
      const override = body !== undefined && body !== null && typeof body === 'object' && 'input' in (body as object);
      const input = override ? JSON.stringify((body as { input: unknown }).input ?? null) : undefined;
      const done = await forkOnce(caller, params.id, headers['idempotency-key'], ['replay', input ?? null], async (tx, run) => {
        if (!TERMINAL.has(run.status)) throw conflict('run_not_finished', `Run is ${run.status}; only a finished run can be replayed.`);
        return fork(tx, run, input ?? run.input);
      });
      return forkAnswer(caller, done, 'replay', override ? { inputOverridden: true } : undefined);
    },

    async 'runs.retryFromStep'({ caller, params, body, headers }) {
      const step = str((body as { step?: unknown } | undefined)?.step);
      if (!step) throw invalid('step_required', 'Body must name the step to retry from: { "step": "<name>" }.');
      const done = await forkOnce(caller, params.id, headers['idempotency-key'], ['retry_from_step', step], async (tx, run) => {
        if (!TERMINAL.has(run.status)) throw conflict('run_not_finished', `Run is ${run.status}; only a finished run can be retried.`);
        const carried = await stepsBefore(tx, run.id, step);
        if (!carried) throw notFound('step');
        const f = await fork(tx, run, run.input);
        await copySteps(tx, f.id, run.workspace_id, carried);
        return f;
      });
      return forkAnswer(caller, done, 'retry_from_step', { step });
    },

    /**
     * Replay the finished runs matching a filter, newest first, up to the
     * per-call ceiling. With an Idempotency-Key the call is made once: sent
     * again (a client retrying after a lost answer, or while the first is
     * still at work) it considers only runs created before the first call
     * began, and counts as replayed, without replaying again, each source
     * run the first (or any repeat) replayed; the key sent with another
     * filter is 422.
     */
    async 'runs.bulkReplay'({ caller, body, headers }) {
      let filter = bulkFilterOf(body, RUN_STATUSES);
      const key = headers['idempotency-key'];
      let repeat = false;
      if (key !== undefined) {
        const kept = await bulkKey(db, caller.workspaceId, key, createHash('sha256').update(JSON.stringify(['bulk_replay', filter])).digest('base64url'));
        if (kept === 'reused') throw keyReused();
        repeat = kept.repeat;
        if (filter.until === undefined || Date.parse(filter.until) > kept.at.getTime()) filter = { ...filter, until: kept.at.toISOString() };
      }
      const { matched, rows } = await runsForBulk(db, caller.workspaceId, filter, BULK_CEILING + 1);
      let replayed = 0;
      let skipped = 0;
      let failed = 0;
      for (const r of rows.slice(0, BULK_CEILING)) {
        if (!TERMINAL.has(r.status)) {
          skipped++;
          continue;
        }
        try {
          const forked = await withTxRetry(db, async (tx) => {
            const run = await lockRun(tx, caller.workspaceId, r.id);
            if (!run || !TERMINAL.has(run.status)) return undefined;
            // Under the source run's lock: a repeat waits for the first call's replay of it, then finds its key.
            const sub = key === undefined ? undefined : bulkRunKey(key, run.id);
            if (sub !== undefined && (await forkKeyOf(tx, caller.workspaceId, sub))) return 'replayed before' as const;
            const f = await fork(tx, run, run.input);
            if (sub !== undefined) await keepForkKey(tx, caller.workspaceId, sub, { fingerprint: '', newRunId: f.id });
            return f;
          });
          if (forked === 'replayed before') replayed++;
          else if (forked) {
            await launch(forked);
            replayed++;
          } else skipped++;
        } catch (err) {
          // Another run of its singleton key is active (skip): passed over, as a run that has not ended is.
          if (isServiceError(err) && err.code === 'singleton_active') {
            skipped++;
            continue;
          }
          failed++;
          log.warn({ err, runId: r.id }, 'bulk replay of one run failed');
        }
      }
      deps.nudge();
      const result = { matched, replayed, skipped, failed, capped: matched > replayed + skipped + failed };
      await audit(caller, 'bulk_replay', { detail: { filter, ...result, ...(repeat ? { repeat: true } : {}) } });
      return { body: result, ...(repeat ? { headers: { 'idempotent-replayed': 'true' } } : {}) };
    },

    /**
     * Cancel the runs that have not ended matching a filter, newest first, up
     * to the per-call ceiling; `if` (CEL over `event`, the run's triggering
     * event) narrows them. Each run is cancelled as POST /cancel does and
     * audited as its cancel. A run that ended meanwhile is skipped.
     */
    async 'runs.bulkCancel'({ caller, body }) {
      const filter = bulkFilterOf(body, ACTIVE_STATUSES, ['if']);
      const expr = str((body as { if?: unknown }).if);
      if (expr) {
        const err = checkCel(expr, { variables: ['event'], type: 'bool' });
        if (err) throw invalid('invalid_if', `if does not compile: ${err}.`);
      }
      const detail = { bulkCancel: { ...filter, if: expr } };
      const message = `Cancelled by ${caller.actor || 'a user'} in a bulk cancel.`;
      let matched = expr ? 0 : await countActiveForBulk(db, caller.workspaceId, filter);
      let cancelled = 0;
      let skipped = 0;
      let failed = 0;
      let examined = 0;
      const spent = () => cancelled + skipped + failed >= BULK_CEILING || examined >= BULK_CANCEL_SCAN;
      let capped = false;
      for (let after: ActiveRunRow | undefined; ; ) {
        const page = await activeForBulk(db, caller.workspaceId, filter, after, BULK_PAGE);
        for (const run of page) {
          if ((capped = spent())) break;
          examined++;
          if (expr) {
            if (!celMatches(expr, { event: { name: run.event_name ?? '', data: parseInput(run.input) } })) continue;
            matched++;
          }
          try {
            if (await cancel(caller, run.id, message, detail, false)) cancelled++;
            else skipped++;
          } catch (err) {
            failed++;
            log.warn({ err, runId: run.id }, 'bulk cancel of one run failed');
          }
        }
        if (capped || page.length < BULK_PAGE) break;
        after = page.at(-1);
      }
      return { body: { matched, cancelled, skipped, failed, capped } };
    },

    async 'control.list'({ caller, query }) {
      const limitRaw = query.limit === undefined ? 100 : Number(query.limit);
      if (!Number.isInteger(limitRaw) || limitRaw < 1) throw invalid('invalid_limit', 'limit must be an integer from 1 to 1000.');
      const rows = await listAudit(db, caller.workspaceId, { action: str(query.action), runId: str(query.runId), limit: Math.min(1000, limitRaw) });
      return {
        body: rows.map((r) => ({
          id: String(r.id),
          action: r.action,
          runId: r.run_id ?? undefined,
          newRunId: r.new_run_id ?? undefined,
          actor: r.actor ?? undefined,
          detail: r.detail ?? undefined,
          createdAt: new Date(r.created_at).toISOString(),
        })),
      };
    },

    /** Internal (ingest, singleton skip): the active runs of a singleton key, and which of `runIds` have finished. */
    async 'runs.activeForKey'({ caller, body }) {
      const b = (body ?? {}) as { app?: unknown; workflow?: unknown; key?: unknown; runIds?: unknown };
      const app = str(b.app);
      const workflow = str(b.workflow);
      if (!app || !workflow || typeof b.key !== 'string') throw invalid('invalid_body', 'app, workflow and key are required.');
      const runIds = Array.isArray(b.runIds) ? b.runIds.filter((x): x is string => typeof x === 'string').slice(0, 100) : [];
      return { body: await singletonState(db, { workspaceId: caller.workspaceId, app, workflow, key: b.key, runIds }) };
    },

    /** Internal (ingest's deferred wake, and ingest before waiters.wakeMany): one event's wake. Returns { woke }. */
    async 'waiters.wake'({ caller, body }) {
      const event = wakeEvent(body);
      if (!event) throw invalid('invalid_event', 'name is required.');
      return { body: { woke: (await wakeAll(caller, [event]))[0] } };
    },

    /**
     * Internal (ingest): events arrived; resume the waitForEvent steps each
     * satisfies, in order. Returns { woke: [per event] }. Ingest sends the
     * events that arrive together in one call, so most calls cost one read.
     */
    async 'waiters.wakeMany'({ caller, body }) {
      const list = (body as { events?: unknown } | undefined)?.events;
      if (!Array.isArray(list) || list.length > WAKE_BATCH_MAX) throw invalid('invalid_body', `events must be an array of at most ${WAKE_BATCH_MAX}.`);
      const events = list.map(wakeEvent);
      const woke = await wakeAll(caller, events.filter((e): e is WakeEvent => e !== undefined));
      let i = 0;
      return { body: { woke: events.map((e) => (e ? woke[i++]! : 0)) } };
    },
  };

  /** How many waiters each event resumed; most events have none: one indexed read for all, no transaction. */
  async function wakeAll(caller: Caller, events: WakeEvent[]): Promise<number[]> {
    const woke = events.map(() => 0);
    if (events.length === 0) return woke;
    const waited = await namesWaitedFor(db, caller.workspaceId, [...new Set(events.map((e) => e.name))]);
    if (waited.size === 0) return woke;
    for (const [i, event] of events.entries()) {
      if (!waited.has(event.name)) continue;
      // Each waiter resolves in a statement of its own, not one transaction holding them all: a cancel or
      // a wait's timeout locks a run or step first and its waiter last, so holding waiters while locking
      // steps and runs deadlocked with them. Two wakes for one waiter: the first resolves it, the second
      // finds the step no longer waiting.
      const data = JSON.stringify(event);
      for (const w of await waitersFor(db, caller.workspaceId, event.name)) {
        if (w.if_expr && !celMatches(w.if_expr, { event, async: event })) continue;
        if (await resolveStep(db, { runId: w.run_id, stepId: w.step_id, dataJson: data })) woke[i]!++;
      }
    }
    if (woke.some((n) => n > 0)) deps.nudge();
    return woke;
  }
}
