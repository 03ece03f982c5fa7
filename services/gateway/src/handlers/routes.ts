import { Router, type Request, type RequestHandler, type Response } from 'express';
import type { Bus } from '@dws/bus';
import type { ApiBatcher } from '@dws/runtime';
import { jsonBody } from '@dws/http';
import { ServiceError } from '@dws/protocol';
import type { AdminApi } from './admin.js';
import { forwardRoute, idempotencyKeyOf, validateInput } from './forward.js';
import { inboundBody, isInboundPost, receiveInbound } from './inbound-webhook.js';
import type { AuthedCaller, Authenticator } from './auth.js';
import type { McpEndpoint } from './mcp.js';
import type { LocalHandler, RouteSpec } from './route-table.js';
import { closeSignal } from './run-wait.js';
import type { Streams } from './streams.js';

/** Query values as express gives them (string or string[]), with empty ones treated as absent. */
function queryOf(req: Request): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(req.query as Record<string, unknown>)) if (v !== '' && v !== undefined) out[k] = v;
  return out;
}

/** The route's caller (CONTRACT: 401 without a valid key, 403 for a public key on a write); none on open and admin routes. */
export async function authenticate(auth: Authenticator, r: RouteSpec, req: Parameters<Authenticator['caller']>[0]): Promise<AuthedCaller | undefined> {
  if (r.access === 'admin') auth.admin(req);
  else if (r.access !== 'open') return auth.caller(req, { write: r.access === 'write' });
  return undefined;
}

export interface RouterDeps {
  bus: Bus;
  batcher: ApiBatcher;
  auth: Authenticator;
  admin: AdminApi;
  streams: Streams;
  openapi: () => unknown;
  mcp: McpEndpoint;
}

interface Ctx {
  req: Request;
  res: Response;
  caller: AuthedCaller | undefined;
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: unknown;
}

/**
 * Mounts exactly the routes of the table: authenticate (401/403), validate
 * params, query and body with the route's schemas (400), refuse
 * run-creating calls of a suspended workspace (403), then forward to the
 * owning service with the caller's workspace and actor, or serve locally.
 */
export function apiRouter(routes: RouteSpec[], d: RouterDeps): Router {
  const local: Record<LocalHandler, (c: Ctx) => Promise<void> | void> = {
    openapi: ({ res }) => void res.json(d.openapi()),
    runStream: ({ req, res, caller, params, query }) => d.streams.runStream(req, res, caller!, params.id!, (query.from as number | undefined) ?? 0),
    runWait: async ({ res, caller, params, query }) => {
      const reply = await d.streams.runWait(caller!, params.id!, query.timeoutMs as number | undefined, closeSignal(res));
      if (reply) res.status(reply.status).type('application/json').send(reply.bodyJson);
    },
    runsStream: ({ res, caller }) => d.streams.runsStream(res, caller!),
    eventsStream: ({ res, caller }) => d.streams.eventsStream(res, caller!),
    // Upgrades never reach express (the server's upgrade listener takes them): this is a plain GET.
    connectInfo: () => {
      throw new ServiceError(426, 'upgrade_required', 'GET /v1/connect is a WebSocket endpoint: send Upgrade: websocket with subprotocol service.connect.v0.');
    },
    mcp: ({ req, res, caller, body }) => d.mcp.handle(req, res, caller!, body),
    mcpNoStream: () => {
      throw new ServiceError(405, 'method_not_allowed', 'The MCP server is stateless and opens no server-initiated stream: POST JSON-RPC messages to /v1/mcp.');
    },
    webhookReceive: ({ req, res, params }) => receiveInbound(d.bus, req, res, params.slug!),
    'admin.createWorkspace': async ({ res, body }) => void res.status(201).json(await d.admin.createWorkspace((body as { name: string }).name)),
    'admin.getWorkspace': async ({ res, params }) => void res.json(await d.admin.getWorkspace(params.id!)),
    'admin.patchWorkspace': async ({ res, params, body }) =>
      void res.json(await d.admin.patchWorkspace(params.id!, body as Parameters<AdminApi['patchWorkspace']>[1])),
    'admin.createKey': async ({ res, params, body }) => {
      const b = body as { kind: 'secret' | 'public' | 'console'; name: string };
      res.status(201).json(await d.admin.createKey(params.id!, b.kind, b.name));
    },
    'admin.revokeKey': async ({ res, params }) => {
      await d.admin.revokeKey(params.id!, params.keyId!);
      res.status(204).end();
    },
  };

  const router = Router();
  // Inbound webhook posts are signed over their exact bytes: read raw, never parsed here (see inbound-webhook.ts).
  const json = Router().use(jsonBody());
  const inbound = inboundBody();
  router.use((req, res, next) => (isInboundPost(req) ? inbound(req, res, next) : json(req, res, next)));
  for (const r of routes) {
    const handler: RequestHandler = async (req, res) => {
      const caller = await authenticate(d.auth, r, req);

      const hasBody = req.rawBody !== undefined && req.rawBody.length > 0;
      const raw = hasBody ? { parsed: req.body, raw: req.rawBody!.toString('utf8') } : undefined;
      const v = validateInput(r, { params: req.params as Record<string, string>, query: queryOf(req), body: raw, idempotencyKey: idempotencyKeyOf(req) }, caller);
      const { params, query, body } = v;
      if (r.target.kind === 'local') return local[r.target.name]({ req, res, caller, params, query, body });
      const reply = await forwardRoute(d, r, caller!, v);
      if (r.announcesRuns && reply.status === 202) d.streams.announced(caller!.workspaceId, reply.bodyJson);
      for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
      res.status(reply.status);
      if (reply.bodyJson === undefined) res.end();
      else res.type('application/json').send(reply.bodyJson);
    };
    router[r.method](r.path, handler);
  }
  return router;
}
