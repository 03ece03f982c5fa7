import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseQuery } from 'node:querystring';
import type { Bus } from '@dws/bus';
import { BODY_LIMIT_BYTES, errorReply, parseJsonBody, requestIdOf, type FirstHandler } from '@dws/http';
import type { Logger } from '@dws/log';
import { errorBody } from '@dws/protocol';
import { logWhenDone } from './access-log.js';
import type { Authenticator } from './auth.js';
import { forwardRoute, validateInput } from './forward.js';
import type { RouteSpec } from './route-table.js';
import { authenticate, queryValues } from './routes.js';
import type { Streams } from './streams.js';

type Req = IncomingMessage & { requestId?: string };
interface Deps {
  bus: Bus;
  auth: Authenticator;
  log: Logger;
  streams: Streams;
}

/** GET /v1/runs/:id/stream as express matches it, less its case-insensitive and trailing-slash spellings. */
const RUN_STREAM = /^\/v1\/runs\/([^/]+)\/stream$/;

/**
 * The hot routes served on node's own request and response: the POST routes
 * with a fixed path that a service answers (POST /v1/events, /v1/register,
 * ...) and a run's stream (GET /v1/runs/:id/stream). Express's per-request
 * objects cost the gateway more than the rest of such a request (W5 one
 * event at a time: 0.33-0.37 -> 0.19 ms of its CPU per event). Only the
 * plain form is taken here: the exact path, a POST body with a
 * Content-Length within the limit and no Content-Encoding, a GET without a
 * body; anything else goes to express, which answers as it always did. Both
 * sides share the body checks (parseJsonBody), authentication, validation and
 * forwarding (authenticate, validateInput, forwardRoute), the stream
 * (Streams.runStream) and the error body (errorReply), in the same order.
 */
export function fastRoutes(routes: RouteSpec[], d: Deps): FirstHandler {
  const posts = new Map<string, RouteSpec>();
  for (const r of routes) if (r.method === 'post' && r.target.kind === 'forward' && !r.path.includes(':')) posts.set(`/v1${r.path}`, r);
  const runStream = routes.find((r) => r.method === 'get' && r.target.kind === 'local' && r.target.name === 'runStream')!;
  return (req, res) => {
    if (req.headers['content-encoding'] !== undefined || req.headers['transfer-encoding'] !== undefined) return false;
    const length = Number(req.headers['content-length'] ?? 0);
    if (!Number.isSafeInteger(length)) return false;
    if (req.method === 'GET') return length === 0 && takeRunStream(runStream, req, res, d);
    const r = req.method === 'POST' ? posts.get(req.url ?? '') : undefined;
    if (!r || length > BODY_LIMIT_BYTES) return false;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    // A client gone mid-body has no one to answer.
    req.on('error', () => res.destroy());
    req.on('end', () => void forwarded(r, req, res, Buffer.concat(chunks), d));
    return true;
  };
}

function takeRunStream(r: RouteSpec, req: Req, res: ServerResponse, d: Deps): boolean {
  const url = req.url ?? '';
  const q = url.indexOf('?');
  const m = RUN_STREAM.exec(q < 0 ? url : url.slice(0, q));
  if (!m) return false;
  let id: string;
  try {
    id = decodeURIComponent(m[1]!);
  } catch {
    return false; // express answers 400 invalid_path
  }
  begin(req, res, d.log);
  void (async () => {
    try {
      const caller = await authenticate(d.auth, r, req);
      const v = validateInput(r, { params: { id }, query: queryValues(q < 0 ? {} : parseQuery(url.slice(q + 1))) }, caller);
      await d.streams.runStream(req, res, caller!, v.params.id!, (v.query.from as number | undefined) ?? 0);
    } catch (err) {
      fail(req, res, err, d.log);
    }
  })();
  return true;
}

async function forwarded(r: RouteSpec, req: Req, res: ServerResponse, buf: Buffer, d: Deps): Promise<void> {
  begin(req, res, d.log);
  try {
    // As express does it: the body first (400), then the key (401/403), then the route's schemas.
    const body = buf.length > 0 ? parseJsonBody(buf) : undefined;
    const caller = await authenticate(d.auth, r, req);
    const v = validateInput(r, { params: {}, query: {}, body: body && { parsed: body.parsed, raw: body.text } }, caller);
    const reply = await forwardRoute(d.bus, r, caller!, v);
    for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
    send(res, reply.status, reply.bodyJson);
  } catch (err) {
    fail(req, res, err, d.log);
  }
}

/** What express's first middleware does: the request id, and the access line. */
function begin(req: Req, res: ServerResponse, log: Logger): void {
  req.requestId = requestIdOf(req);
  res.setHeader('x-request-id', req.requestId);
  logWhenDone(log, req, res, (req.url ?? '').split('?')[0]!);
}

/** As errorMiddleware: the error body, or only the end of a response already under way. */
function fail(req: Req, res: ServerResponse, err: unknown, log: Logger): void {
  const e = errorReply(err, req, log, (req.url ?? '').split('?')[0]!);
  if (res.headersSent) res.end();
  else send(res, e.status, JSON.stringify(errorBody(e.code, e.message)));
}

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
