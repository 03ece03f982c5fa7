import type { Bus, Subscription } from '@dws/bus';
import type { Database } from '@dws/db';
import type { Logger } from '@dws/log';
import {
  create,
  fromBinary,
  InvokeRequestSchema,
  InvokeResult_Outcome,
  InvokeResultSchema,
  ReplicaInvokeSchema,
  RouteReplySchema,
  RouteRequestSchema,
  toBinary,
  type InvokeRequest,
} from '@dws/proto';
import { seal, signInvoke } from '@dws/protocol';
import { RunnerHttp, subjects, traceparentFor } from '@dws/runtime';
import type { Span } from '@dws/telemetry';
import { pickRunner } from '../domain/routing.js';
import { detachReplica, type RunnerRow } from '../store/runners.js';
import type { ConnectHub } from './connect-hub.js';
import type { RunnerDirectory } from './runner-directory.js';
import { traced } from './invoke-trace.js';

/** Subject on which one invoker replica takes invokes for the Connect sockets it holds. */
export const replicaSubject = (replica: string): string => `invoker.replica.${replica}`;

/** How long a serve runner that refused or dropped a connection is passed over by anycast. */
const SUSPECT_MS = 30_000;
/**
 * How long the scheduler may keep a direct route. Short: a runner that
 * re-registers elsewhere or stops is at worst called once more at its old
 * address (a refused call drops the route and goes through the invoker).
 */
const DIRECT_ROUTE_TTL_MS = 1000;
/** Targets tried for one invoke before giving up (a stale route, a dead replica, a refused connection). */
const MAX_TARGETS = 3;
/**
 * The hop to the replica holding a Connect socket fails once that replica went this
 * long without answering or reporting progress (the bus's request liveness): a
 * SIGKILLed replica costs the invoke ~5 s, not the invoke timeout, while a long step
 * keeps all of it. Same reasoning and value as the scheduler's INVOKER_SILENCE_MS.
 */
const REPLICA_SILENCE_MS = 5000;
const KEY_UNKNOWN = 'The workspace signing key is not known to the invoker yet.';
type Result = Uint8Array;
/** One attempt: `done` is the answer; `elsewhere` means the runner cannot have seen the invoke, try another. */
type Attempt = { kind: 'done'; result: Result } | { kind: 'elsewhere'; result: Result };

const result = (outcome: InvokeResult_Outcome, fields: { status?: number; body?: Uint8Array; error?: string; runnerId?: string } = {}): Result =>
  toBinary(InvokeResultSchema, create(InvokeResultSchema, { outcome, ...fields }));

export interface InvokeRouting {
  bus: Bus;
  db: Database;
  log: Logger;
  directory: RunnerDirectory;
  hub: ConnectHub;
  /** This replica's id (per-replica subject, socket ownership). */
  replica: string;
  timeoutMs: number;
  /** Seals the signing key a direct route hands to the scheduler (SERVICE_SEAL_KEY, shared by the fleet). */
  sealKey: Buffer;
  /**
   * Answer the scheduler's `invoker.invoke` requests. false leaves them to
   * the other replicas while this one still serves its sockets (drain).
   * @default true
   */
  serveScheduler?: boolean;
}

/**
 * Answers the scheduler's invoke requests: route to a runner (pinned, or a
 * random live one), sign the body it was handed (built once by the
 * scheduler, never re-serialised here), and deliver it over the runner's
 * transport: a POST through a pooled keep-alive connection, a frame on a
 * socket this replica holds, or a hop to the replica holding the socket.
 */
export function serveInvokes(o: InvokeRouting): { subs: Subscription[]; close(): Promise<void> } {
  const http = new RunnerHttp(o.timeoutMs);
  const suspects = new Map<string, number>();
  const suspectKey = (ws: string, id: string) => `${ws}\u0000${id}`;
  const suspected = (ws: string, rows: RunnerRow[]): Set<string> => {
    const now = Date.now();
    const out = new Set<string>();
    for (const r of rows) {
      const until = suspects.get(suspectKey(ws, r.id));
      if (until === undefined) continue;
      if (until > now) out.add(r.id);
      else suspects.delete(suspectKey(ws, r.id));
    }
    return out;
  };

  /** `span`, `tp`: the `invoker.invoke` span and its traceparent, with tracing on. */
  async function route(req: InvokeRequest, span?: Span, tp?: string): Promise<Result> {
    const key = await o.directory.signingKeyAwaited(req.workspaceId);
    if (!key) return result(InvokeResult_Outcome.TRANSPORT_ERROR, { error: KEY_UNKNOWN });
    const tried = new Set<string>();
    const triedIds = new Set<string>();
    let last: Result | undefined;
    let candidates = await o.directory.live(req.workspaceId, req.app);
    let fresh = false;
    const pick = () => pickRunner(candidates, req.workflow, req.runner, new Set([...triedIds, ...suspected(req.workspaceId, candidates)]));
    for (let i = 0; i < MAX_TARGETS; i++) {
      let runner = pick();
      if (!runner && !fresh) {
        // The cached list may predate a registration another replica has answered: re-read before calling it a miss.
        o.directory.forget(req.workspaceId, req.app);
        candidates = await o.directory.live(req.workspaceId, req.app);
        fresh = true;
        runner = pick();
      }
      // A runner that moved to another socket or replica is a new target.
      const target = runner && `${runner.id}|${runner.replica ?? ''}|${runner.connectionId ?? ''}`;
      if (!runner || !target || tried.has(target)) break;
      tried.add(target);
      triedIds.add(runner.id);
      span?.setAttributes({ 'dws.runner.id': runner.id, 'dws.runner.transport': runner.transport, 'dws.invoke.targets': tried.size });
      const attempt = runner.transport === 'connect' ? await viaSocket(runner, req, key, tp) : await viaHttp(runner, req, key, tp);
      if (attempt.kind === 'done') return attempt.result;
      last = attempt.result;
      o.directory.forget(req.workspaceId, req.app);
      candidates = await o.directory.live(req.workspaceId, req.app);
      fresh = true;
    }
    return last ?? result(InvokeResult_Outcome.NO_RUNNER);
  }

  async function viaHttp(runner: RunnerRow, req: InvokeRequest, key: string, tp?: string): Promise<Attempt> {
    const out = await http.post(runner.url, req.body, key, req.runId, tp);
    if (out.kind === 'reply') {
      suspects.delete(suspectKey(req.workspaceId, runner.id));
      return { kind: 'done', result: result(InvokeResult_Outcome.REPLY, { status: out.status, body: out.body, runnerId: runner.id }) };
    }
    // Anycast passes over this runner for a while; its next heartbeat does not clear that, a success does.
    suspects.set(suspectKey(req.workspaceId, runner.id), Date.now() + SUSPECT_MS);
    o.log.warn({ err: out.error, code: out.code, runId: req.runId, runner: runner.id }, 'invoke failed in transport');
    const failed = result(InvokeResult_Outcome.TRANSPORT_ERROR, { error: out.error, runnerId: runner.id });
    return out.neverSent ? { kind: 'elsewhere', result: failed } : { kind: 'done', result: failed };
  }

  async function viaSocket(runner: RunnerRow, req: InvokeRequest, key: string, tp?: string): Promise<Attempt> {
    if (runner.replica === o.replica) return fromSocket(await local(req, runner.id, key, tp), runner.id);
    if (!runner.replica) return { kind: 'elsewhere', result: result(InvokeResult_Outcome.NO_RUNNER) };
    try {
      const bytes = await o.bus.request(
        replicaSubject(runner.replica),
        toBinary(ReplicaInvokeSchema, create(ReplicaInvokeSchema, { request: req, runnerId: runner.id })),
        { timeoutMs: o.timeoutMs + 5000, idleTimeoutMs: REPLICA_SILENCE_MS, ...(tp && { headers: { traceparent: tp } }) },
      );
      const res = fromBinary(InvokeResultSchema, bytes);
      if (res.outcome === InvokeResult_Outcome.NO_RUNNER) return { kind: 'elsewhere', result: bytes };
      return { kind: 'done', result: bytes };
    } catch (err) {
      if ((err as { code?: unknown }).code === 'no_responders') {
        // Nobody answers for that replica: it is gone, and so are its sockets.
        const n = await detachReplica(o.db, runner.replica);
        o.log.warn({ replica: runner.replica, runners: n }, 'invoker replica is gone; its connect runners left routing');
        return { kind: 'elsewhere', result: result(InvokeResult_Outcome.NO_RUNNER) };
      }
      return { kind: 'done', result: result(InvokeResult_Outcome.TRANSPORT_ERROR, { error: (err as Error).message, runnerId: runner.id }) };
    }
  }

  function local(req: InvokeRequest, runnerId: string, key: string, tp?: string) {
    return o.hub.invoke(req.workspaceId, runnerId, req.body, signInvoke(key, req.body), tp ?? traceparentFor(req.runId));
  }

  function fromSocket(out: Awaited<ReturnType<typeof local>>, runnerId: string): Attempt {
    if (out.kind === 'reply') return { kind: 'done', result: result(InvokeResult_Outcome.REPLY, { status: out.status, body: out.body, runnerId }) };
    if (out.kind === 'not_held') return { kind: 'elsewhere', result: result(InvokeResult_Outcome.NO_RUNNER, { error: 'not_held' }) };
    return { kind: 'done', result: result(InvokeResult_Outcome.TRANSPORT_ERROR, { error: out.error, runnerId }) };
  }

  /**
   * The scheduler's RouteRequest: when every live runner able to take the
   * pass is a serve runner, hand over their addresses and the sealed signing
   * key so the scheduler POSTs itself (two bus hops fewer per pass). Connect
   * runners, and apps with no runner yet, stay with route() above.
   */
  async function directRoute(workspaceId: string, app: string, workflow: string, pinned: string): Promise<Uint8Array> {
    const none = toBinary(RouteReplySchema, create(RouteReplySchema, { direct: false, ttlMs: DIRECT_ROUTE_TTL_MS }));
    const key = await o.directory.signingKey(workspaceId);
    if (!key) return none;
    const candidates = await o.directory.live(workspaceId, app);
    const capable = candidates.filter((r) => r.workflows.includes(workflow) && (!pinned || r.id === pinned));
    if (capable.length === 0 || capable.some((r) => r.transport !== 'serve')) return none;
    const avoid = suspected(workspaceId, capable);
    const healthy = capable.filter((r) => !avoid.has(r.id));
    const targets = (healthy.length > 0 ? healthy : capable).map((r) => ({ runnerId: r.id, url: r.url }));
    return toBinary(RouteReplySchema, create(RouteReplySchema, { direct: true, targets, sealedSigningKey: seal(key, o.sealKey), ttlMs: DIRECT_ROUTE_TTL_MS }));
  }

  const subs: Subscription[] = [];
  if (o.serveScheduler !== false) {
    subs.push(
      o.bus.respond(subjects.invoke, 'invoker', async (data, _s, headers) => {
        const req = fromBinary(InvokeRequestSchema, data);
        return traced('invoker.invoke', { headers, runId: req.runId, attributes: invokeAttributes(req) }, (span, tp) => route(req, span, tp));
      }),
    );
    subs.push(
      o.bus.respond(subjects.route, 'invoker', async (data, _s, headers) => {
        const r = fromBinary(RouteRequestSchema, data);
        const attributes = { 'dws.workspace.id': r.workspaceId, 'dws.app': r.app, 'dws.workflow': r.workflow };
        return traced('invoker.route', { headers, attributes }, () => directRoute(r.workspaceId, r.app, r.workflow, r.runner));
      }),
    );
  }
  // Invokes other replicas route to the sockets this one holds.
  subs.push(
    o.bus.respond(replicaSubject(o.replica), `invoker-${o.replica}`, async (data, _s, headers) => {
      const msg = fromBinary(ReplicaInvokeSchema, data);
      const req = msg.request;
      if (!req) return result(InvokeResult_Outcome.TRANSPORT_ERROR, { error: 'ReplicaInvoke without a request' });
      const attributes = { ...invokeAttributes(req), 'dws.runner.id': msg.runnerId, 'dws.runner.transport': 'connect' };
      return traced('invoker.relay', { headers, runId: req.runId, attributes }, async (_span, tp) => {
        const key = await o.directory.signingKeyAwaited(req.workspaceId);
        if (!key) return result(InvokeResult_Outcome.TRANSPORT_ERROR, { error: KEY_UNKNOWN });
        return fromSocket(await local(req, msg.runnerId, key, tp), msg.runnerId).result;
      });
    }),
  );
  return {
    subs,
    async close() {
      await http.close();
    },
  };
}

const invokeAttributes = (req: InvokeRequest) => ({
  'dws.workspace.id': req.workspaceId,
  'dws.run.id': req.runId,
  'dws.app': req.app,
  'dws.workflow': req.workflow,
  'dws.pass': Number(req.pass),
});
