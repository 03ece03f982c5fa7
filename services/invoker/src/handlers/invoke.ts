import { createHash } from 'node:crypto';
import { Pool } from 'undici';
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
  toBinary,
  type InvokeRequest,
} from '@dws/proto';
import { checkProtocolVersion, errorBody, PROTOCOL_HEADER, PROTOCOL_VERSION, SIGNATURE_HEADER, signInvoke } from '@dws/protocol';
import { randomPooled, subjects } from '@dws/runtime';
import { pickRunner } from '../domain/routing.js';
import { detachReplica, type RunnerRow } from '../store/runners.js';
import { MAX_REPLY_BYTES, tooLargeBody, type ConnectHub } from './connect-hub.js';
import type { RunnerDirectory } from './runner-directory.js';

/** Subject on which one invoker replica takes invokes for the Connect sockets it holds. */
export const replicaSubject = (replica: string): string => `invoker.replica.${replica}`;

/** How long a serve runner that refused or dropped a connection is passed over by anycast. */
const SUSPECT_MS = 30_000;
/** Targets tried for one invoke before giving up (a stale route, a dead replica, a refused connection). */
const MAX_TARGETS = 3;
/** Connection-level failures: the request never reached the runner, so another runner may take it at once. */
const NEVER_SENT = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

type Result = Uint8Array;
/** One attempt: `done` is the answer; `elsewhere` means the runner cannot have seen the invoke, try another. */
type Attempt = { kind: 'done'; result: Result } | { kind: 'elsewhere'; result: Result };

/**
 * W3C trace context of one invoke: the trace id is derived from the run id
 * (every pass of a run lands in one trace), the span id is this invoke's.
 * Sent as the `traceparent` header and on the Connect frame; the SDK puts it
 * in ctx.traceparent when the body (built by the scheduler) has none.
 */
export function traceparentFor(runId: string): string {
  const trace = createHash('sha256').update(runId).digest('hex').slice(0, 32);
  return `00-${trace}-${randomPooled(8).toString('hex')}-01`;
}

const result = (outcome: InvokeResult_Outcome, fields: { status?: number; body?: Uint8Array; error?: string; runnerId?: string } = {}): Result =>
  toBinary(InvokeResultSchema, create(InvokeResultSchema, { outcome, ...fields }));

function errorCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; cause?: { code?: unknown } };
  if (typeof e?.cause?.code === 'string') return e.cause.code;
  return typeof e?.code === 'string' ? e.code : undefined;
}

export interface InvokeRouting {
  bus: Bus;
  db: Database;
  log: Logger;
  directory: RunnerDirectory;
  hub: ConnectHub;
  /** This replica's id (per-replica subject, socket ownership). */
  replica: string;
  timeoutMs: number;
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
  const pools = new Map<string, Pool>();
  const suspects = new Map<string, number>();
  const poolFor = (origin: string): Pool => {
    let p = pools.get(origin);
    if (!p) {
      p = new Pool(origin, { connections: 64, pipelining: 1, keepAliveTimeout: 30_000, headersTimeout: o.timeoutMs, bodyTimeout: o.timeoutMs });
      pools.set(origin, p);
    }
    return p;
  };
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

  async function route(req: InvokeRequest): Promise<Result> {
    const key = await o.directory.signingKey(req.workspaceId);
    if (!key) return result(InvokeResult_Outcome.TRANSPORT_ERROR, { error: 'The workspace signing key is not known to the invoker yet.' });
    const tried = new Set<string>();
    const triedIds = new Set<string>();
    let last: Result | undefined;
    let candidates = await o.directory.live(req.workspaceId, req.app);
    for (let i = 0; i < MAX_TARGETS; i++) {
      const runner = pickRunner(candidates, req.workflow, req.runner, new Set([...triedIds, ...suspected(req.workspaceId, candidates)]));
      // A runner that moved to another socket or replica is a new target.
      const target = runner && `${runner.id}|${runner.replica ?? ''}|${runner.connectionId ?? ''}`;
      if (!runner || !target || tried.has(target)) break;
      tried.add(target);
      triedIds.add(runner.id);
      const attempt = runner.transport === 'connect' ? await viaSocket(runner, req, key) : await viaHttp(runner, req, key);
      if (attempt.kind === 'done') return attempt.result;
      last = attempt.result;
      o.directory.forget(req.workspaceId, req.app);
      candidates = await o.directory.live(req.workspaceId, req.app);
    }
    return last ?? result(InvokeResult_Outcome.NO_RUNNER);
  }

  async function viaHttp(runner: RunnerRow, req: InvokeRequest, key: string): Promise<Attempt> {
    const url = new URL(runner.url);
    try {
      const res = await poolFor(url.origin).request({
        method: 'POST',
        path: url.pathname + url.search,
        headers: {
          'content-type': 'application/json',
          [SIGNATURE_HEADER]: signInvoke(key, req.body),
          [PROTOCOL_HEADER]: String(PROTOCOL_VERSION),
          traceparent: traceparentFor(req.runId),
        },
        body: req.body,
      });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > MAX_REPLY_BYTES) {
          res.body.destroy();
          return { kind: 'done', result: result(InvokeResult_Outcome.REPLY, { status: 413, body: Buffer.from(tooLargeBody(0)), runnerId: runner.id }) };
        }
        chunks.push(chunk as Buffer);
      }
      // SPEC Versioning 3: a reply that states another version is refused, not guessed at.
      const version = checkProtocolVersion(res.headers[PROTOCOL_HEADER]);
      if (!version.ok) {
        const body = Buffer.from(JSON.stringify({ ...errorBody('protocol_version_mismatch', `Runner reply: ${version.message}`), logs: [] }));
        return { kind: 'done', result: result(InvokeResult_Outcome.REPLY, { status: 400, body, runnerId: runner.id }) };
      }
      suspects.delete(suspectKey(req.workspaceId, runner.id));
      return { kind: 'done', result: result(InvokeResult_Outcome.REPLY, { status: res.statusCode, body: Buffer.concat(chunks), runnerId: runner.id }) };
    } catch (err) {
      // Anycast passes over this runner for a while; its next heartbeat does not clear that, a success does.
      suspects.set(suspectKey(req.workspaceId, runner.id), Date.now() + SUSPECT_MS);
      const code = errorCode(err);
      o.log.warn({ err, code, runId: req.runId, runner: runner.id }, 'invoke failed in transport');
      const failed = result(InvokeResult_Outcome.TRANSPORT_ERROR, { error: (err as Error).message, runnerId: runner.id });
      return code !== undefined && NEVER_SENT.has(code) ? { kind: 'elsewhere', result: failed } : { kind: 'done', result: failed };
    }
  }

  async function viaSocket(runner: RunnerRow, req: InvokeRequest, key: string): Promise<Attempt> {
    if (runner.replica === o.replica) return fromSocket(await local(req, runner.id, key), runner.id);
    if (!runner.replica) return { kind: 'elsewhere', result: result(InvokeResult_Outcome.NO_RUNNER) };
    try {
      const bytes = await o.bus.request(
        replicaSubject(runner.replica),
        toBinary(ReplicaInvokeSchema, create(ReplicaInvokeSchema, { request: req, runnerId: runner.id })),
        { timeoutMs: o.timeoutMs + 5000 },
      );
      const res = fromBinary(InvokeResultSchema, bytes);
      if (res.outcome === InvokeResult_Outcome.NO_RUNNER) return { kind: 'elsewhere', result: bytes };
      return { kind: 'done', result: bytes };
    } catch (err) {
      if (errorCode(err) === 'no_responders') {
        // Nobody answers for that replica: it is gone, and so are its sockets.
        const n = await detachReplica(o.db, runner.replica);
        o.log.warn({ replica: runner.replica, runners: n }, 'invoker replica is gone; its connect runners left routing');
        return { kind: 'elsewhere', result: result(InvokeResult_Outcome.NO_RUNNER) };
      }
      return { kind: 'done', result: result(InvokeResult_Outcome.TRANSPORT_ERROR, { error: (err as Error).message, runnerId: runner.id }) };
    }
  }

  function local(req: InvokeRequest, runnerId: string, key: string) {
    return o.hub.invoke(req.workspaceId, runnerId, req.body, signInvoke(key, req.body), traceparentFor(req.runId));
  }

  function fromSocket(out: Awaited<ReturnType<typeof local>>, runnerId: string): Attempt {
    if (out.kind === 'reply') return { kind: 'done', result: result(InvokeResult_Outcome.REPLY, { status: out.status, body: out.body, runnerId }) };
    if (out.kind === 'not_held') return { kind: 'elsewhere', result: result(InvokeResult_Outcome.NO_RUNNER, { error: 'not_held' }) };
    return { kind: 'done', result: result(InvokeResult_Outcome.TRANSPORT_ERROR, { error: out.error, runnerId }) };
  }

  const subs: Subscription[] = [];
  if (o.serveScheduler !== false) {
    subs.push(o.bus.respond(subjects.invoke, 'invoker', async (data) => route(fromBinary(InvokeRequestSchema, data))));
  }
  // Invokes other replicas route to the sockets this one holds.
  subs.push(
    o.bus.respond(replicaSubject(o.replica), `invoker-${o.replica}`, async (data) => {
      const msg = fromBinary(ReplicaInvokeSchema, data);
      const req = msg.request;
      if (!req) return result(InvokeResult_Outcome.TRANSPORT_ERROR, { error: 'ReplicaInvoke without a request' });
      const key = await o.directory.signingKey(req.workspaceId);
      if (!key) return result(InvokeResult_Outcome.TRANSPORT_ERROR, { error: 'The workspace signing key is not known to the invoker yet.' });
      return fromSocket(await local(req, msg.runnerId, key), msg.runnerId).result;
    }),
  );
  return {
    subs,
    async close() {
      await Promise.all([...pools.values()].map((p) => p.close()));
    },
  };
}
