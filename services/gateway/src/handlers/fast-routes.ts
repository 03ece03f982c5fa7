import type { ServerResponse } from 'node:http';
import type { Bus } from '@dws/bus';
import { BODY_LIMIT_BYTES, errorReply, parseJsonBody, requestIdOf, type FirstHandler, type IdentifiedRequest } from '@dws/http';
import type { Logger } from '@dws/log';
import { errorBody } from '@dws/protocol';
import { logWhenDone } from './access-log.js';
import type { Authenticator } from './auth.js';
import { forwardRoute, validateInput } from './forward.js';
import type { RouteSpec } from './route-table.js';
import { authenticate } from './routes.js';
import type { Streams } from './streams.js';

interface Deps {
  bus: Bus;
  auth: Authenticator;
  log: Logger;
  streams: Streams;
}

/**
 * The POST routes with a fixed path that a service answers (POST /v1/events,
 * /v1/register, ...), served on node's own request and response: express's
 * per-request objects cost the gateway more than the rest of such a request
 * (W5 one event at a time: 0.33-0.37 -> 0.19 ms of its CPU per event). Only
 * the plain form is taken here: the exact path with no query string, a
 * Content-Length within the limit and no Content-Encoding; anything else
 * goes to express, which answers as it always did. Both sides share the
 * body checks (parseJsonBody), authentication, validation and forwarding
 * (authenticate, validateInput, forwardRoute) and the error body
 * (errorReply), in the same order.
 */
export function fastRoutes(routes: RouteSpec[], d: Deps): FirstHandler {
  const byPath = new Map<string, RouteSpec>();
  for (const r of routes) if (r.method === 'post' && r.target.kind === 'forward' && !r.path.includes(':')) byPath.set(`/v1${r.path}`, r);
  return (req, res) => {
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
    const v = validateInput(r, { params: {}, query: {}, body: body && { parsed: body.parsed, raw: body.text } }, caller);
    const reply = await forwardRoute(d.bus, r, caller!, v);
    if (r.announcesRuns && reply.status === 202) d.streams.announced(caller!.workspaceId, reply.bodyJson);
    for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
    send(res, reply.status, reply.bodyJson);
  } catch (err) {
    const e = errorReply(err, req, d.log, req.url ?? '');
    send(res, e.status, JSON.stringify(errorBody(e.code, e.message)));
  }
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
