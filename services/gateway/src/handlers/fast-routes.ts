import type { ServerResponse } from 'node:http';
import type { Bus } from '@dws/bus';
import type { ApiBatcher } from '@dws/runtime';
import { BODY_LIMIT_BYTES, errorReply, parseJsonBody, requestIdOf, type FirstHandler, type IdentifiedRequest } from '@dws/http';
import type { Logger } from '@dws/log';
import { errorBody } from '@dws/protocol';
import { logWhenDone } from './access-log.js';
import type { AuthedCaller, Authenticator } from './auth.js';
import { forwardRoute, idempotencyKeyOf, validateInput } from './forward.js';
import type { RouteSpec } from './route-table.js';
import { authenticate } from './routes.js';
import { closeSignal } from './run-wait.js';
import type { Streams } from './streams.js';

interface Deps {
  bus: Bus;
  batcher: ApiBatcher;
  auth: Authenticator;
  log: Logger;
  streams: Streams;
}

/** A run stream's exact path, with at most `from` in its query: what the fast path takes of GET /v1/runs/{id}/stream. */
const RUN_STREAM = /^\/v1\/runs\/([A-Za-z0-9_-]{1,200})\/stream(?:\?from=([^&=%+]*))?$/;
/** A run wait's exact path, with at most `timeoutMs` in its query (GET /v1/runs/{id}/wait: one per run a client awaits). */
const RUN_WAIT = /^\/v1\/runs\/([A-Za-z0-9_-]{1,200})\/wait(?:\?timeoutMs=([^&=%+]*))?$/;

/**
 * The POST routes with a fixed path that a service answers (POST /v1/events,
 * /v1/register, ...), and a run's stream (GET /v1/runs/{id}/stream: one per
 * run W1 and W2 follow, 1,000 at once in W7) and its wait (GET
 * /v1/runs/{id}/wait: one per run a client awaits), served on node's own request
 * and response: express's per-request objects and router cost the gateway
 * more than the rest of such a request (W5 one event at a time: 0.33-0.37
 * -> 0.19 ms of its CPU per event). Only the plain form is taken here: the
 * exact path, no query string but a run stream's `from` or a wait's `timeoutMs`, a Content-Length
 * within the limit and no Content-Encoding; anything else goes to express,
 * which answers as it always did. Both sides share the body checks
 * (parseJsonBody), authentication, validation and forwarding
 * (authenticate, validateInput, forwardRoute, Streams.runStream and runWait) and the
 * error body (errorReply), in the same order.
 */
export function fastRoutes(routes: RouteSpec[], d: Deps): FirstHandler {
  const byPath = new Map<string, RouteSpec>();
  for (const r of routes) if (r.method === 'post' && r.target.kind === 'forward' && !r.path.includes(':')) byPath.set(`/v1${r.path}`, r);
  const localGet = (name: string) => routes.find((r) => r.method === 'get' && r.target.kind === 'local' && r.target.name === name);
  const runStream = localGet('runStream');
  const runWait = localGet('runWait');
  return (req, res) => {
    if (req.method === 'GET') {
      const url = req.url ?? '';
      let m = runStream && RUN_STREAM.exec(url);
      if (m) {
        void serveRunGet(runStream!, req, res, d, m[1]!, oneQuery('from', m[2]), (caller, id, q) =>
          d.streams.runStream(req, res, caller, id, (q.from as number | undefined) ?? 0),
        );
        return true;
      }
      m = runWait && RUN_WAIT.exec(url);
      if (m) {
        void serveRunGet(runWait!, req, res, d, m[1]!, oneQuery('timeoutMs', m[2]), async (caller, id, q) => {
          const reply = await d.streams.runWait(caller, id, q.timeoutMs as number | undefined, closeSignal(res));
          if (reply) send(res, reply.status, reply.bodyJson);
        });
        return true;
      }
      return false;
    }
    if (req.method !== 'POST' || req.headers['content-encoding'] !== undefined || req.headers['transfer-encoding'] !== undefined) return false;
    const r = byPath.get(req.url ?? '');
    const length = Number(req.headers['content-length']);
    if (!r || !Number.isSafeInteger(length) || length > BODY_LIMIT_BYTES) return false;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    // A client gone mid-body has no one to answer.
    req.on('error', () => res.destroy());
    req.on('end', () => void serve(r, req, res, Buffer.concat(chunks), d));
    return true;
  };
}

async function serve(r: RouteSpec, req: IdentifiedRequest, res: ServerResponse, buf: Buffer, d: Deps): Promise<void> {
  req.requestId = requestIdOf(req);
  res.setHeader('x-request-id', req.requestId);
  logWhenDone(d.log, req, res, req.url ?? '');
  try {
    // As express does it: the body first (400), then the key (401/403), then the route's schemas.
    const body = buf.length > 0 ? parseJsonBody(buf) : undefined;
    const caller = await authenticate(d.auth, r, req);
    const v = validateInput(r, { params: {}, query: {}, body: body && { parsed: body.parsed, raw: body.text }, idempotencyKey: idempotencyKeyOf(req) }, caller);
    const reply = await forwardRoute(d, r, caller!, v);
    if (r.announcesRuns && reply.status === 202) d.streams.announced(caller!.workspaceId, reply.bodyJson);
    for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
    send(res, reply.status, reply.bodyJson);
  } catch (err) {
    const e = errorReply(err, req, d.log, req.url ?? '');
    send(res, e.status, JSON.stringify(errorBody(e.code, e.message)));
  }
}

/**
 * A run's GET served here, as the router serves it: the key (401/403), then
 * the route's schemas (a bad `from` or `timeoutMs` is 400), then `serve`. An
 * error before the answer began is the error body; after (a stream under
 * way), the connection is cut.
 */
async function serveRunGet(
  r: RouteSpec,
  req: IdentifiedRequest,
  res: ServerResponse,
  d: Deps,
  id: string,
  query: Record<string, string>,
  serve: (caller: AuthedCaller, id: string, query: Record<string, unknown>) => Promise<void>,
): Promise<void> {
  req.requestId = requestIdOf(req);
  res.setHeader('x-request-id', req.requestId);
  logWhenDone(d.log, req, res, req.url ?? '');
  try {
    const caller = await authenticate(d.auth, r, req);
    const v = validateInput(r, { params: { id }, query }, caller);
    await serve(caller!, v.params.id!, v.query);
  } catch (err) {
    if (res.headersSent || res.destroyed) return void res.destroy();
    const e = errorReply(err, req, d.log, req.url ?? '');
    send(res, e.status, JSON.stringify(errorBody(e.code, e.message)));
  }
}

/** One query value of the fast path's form (`?name=value`), empty as absent, as express gives it. */
const oneQuery = (name: string, value: string | undefined): Record<string, string> => (value === undefined || value === '' ? {} : { [name]: value });

/** As express's res.type('application/json').send(text). */
function send(res: ServerResponse, status: number, json: string | undefined): void {
  res.statusCode = status;
  if (json === undefined) {
    res.end();
    return;
  }
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(json));
  res.end(json);
}
