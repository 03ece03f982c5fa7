import { Router, type Request, type RequestHandler, type Response } from 'express';
import type { z } from 'zod';
import type { Bus } from '@dws/bus';
import { jsonBody } from '@dws/http';
import { forbidden, invalid, isServiceError, notFound, ServiceError } from '@dws/protocol';
import { callApi } from '@dws/runtime';
import type { LimitsPatch } from '../domain/usage.js';
import type { AdminApi } from './admin.js';
import { awaitNewRun } from './new-run.js';
import type { AuthedCaller, Authenticator } from './auth.js';
import type { LocalHandler, RouteSpec } from './route-table.js';
import type { Streams } from './streams.js';

/** Bus trouble is ours, not the caller's: 503 with the error body; the cause is logged by the error middleware. */
function unavailable(service: string, err: unknown): ServiceError {
  return new ServiceError(503, 'service_unavailable', `The ${service} service did not answer in time; retry shortly.`, { cause: err });
}

/** Query values as express gives them (string or string[]), with empty ones treated as absent. */
function queryOf(req: Request): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(req.query as Record<string, unknown>)) if (v !== '' && v !== undefined) out[k] = v;
  return out;
}

/** A zod failure as the error body: the code names the parameter (invalid_limit), the message says what is wrong. */
function validate<T extends z.ZodType>(schema: T, value: unknown, where: 'params' | 'query' | 'body', bodyCode: string): z.output<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = issue.path.map(String).join('.');
  // A path parameter that cannot be valid names nothing this workspace has.
  if (where === 'params') throw notFound(issue.path[0] === 'keyId' ? 'key' : 'resource');
  const code = where === 'query' ? `invalid_${String(issue.path[0] ?? 'query').toLowerCase()}` : bodyCode;
  throw invalid(code, `${where === 'query' ? `query parameter ${field}` : field ? `body.${field}` : 'body'}: ${issue.message}.`);
}

export interface RouterDeps {
  bus: Bus;
  auth: Authenticator;
  admin: AdminApi;
  streams: Streams;
  openapi: () => unknown;
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
    runsStream: ({ res, caller }) => d.streams.runsStream(res, caller!),
    eventsStream: ({ res, caller }) => d.streams.eventsStream(res, caller!),
    // Upgrades never reach express (the server's upgrade listener takes them): this is a plain GET.
    connectInfo: () => {
      throw new ServiceError(426, 'upgrade_required', 'GET /v1/connect is a WebSocket endpoint: send Upgrade: websocket with subprotocol service.connect.v0.');
    },
    'admin.createWorkspace': async ({ res, body }) => void res.status(201).json(await d.admin.createWorkspace((body as { name: string }).name)),
    'admin.getWorkspace': async ({ res, params }) => void res.json(await d.admin.getWorkspace(params.id!)),
    'admin.patchWorkspace': async ({ res, params, body }) =>
      void res.json(await d.admin.patchWorkspace(params.id!, body as { suspended?: boolean; limits?: LimitsPatch })),
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
  router.use(jsonBody());
  for (const r of routes) {
    const bodyCode = r.body?.errorCode ?? 'invalid_body';
    const handler: RequestHandler = async (req, res) => {
      let caller: AuthedCaller | undefined;
      if (r.access === 'admin') d.auth.admin(req);
      else if (r.access !== 'open') caller = await d.auth.caller(req, { write: r.access === 'write' });

      const params = r.params ? (validate(r.params, req.params, 'params', bodyCode) as Record<string, string>) : {};
      const query = r.query ? (validate(r.query, queryOf(req), 'query', bodyCode) as Record<string, unknown>) : {};
      const hasBody = req.rawBody !== undefined && req.rawBody.length > 0;
      let body: unknown;
      if (r.body) {
        if (hasBody) body = validate(r.body.schema, req.body, 'body', bodyCode);
        else if (r.body.required) throw invalid(bodyCode, 'A JSON body is required.');
      }
      // SPEC Errors: a suspended workspace is refused every run-creating call (replay paths included).
      if (r.startsRuns && caller?.suspended) throw forbidden('workspace_suspended', 'This workspace is suspended: no new runs start.');

      if (r.target.kind === 'local') return local[r.target.name]({ req, res, caller, params, query, body });
      const { service, op } = r.target;
      let reply;
      try {
        const call = () =>
          callApi(d.bus, service, op, caller!, {
            params,
            query,
            // The validated request bytes go on as they came (no re-serialising).
            rawBody: r.body && hasBody ? req.rawBody!.toString('utf8') : undefined,
          });
        // A run announced moments ago is waited for briefly, not 404.
        reply = r.readsRun ? await awaitNewRun(params.id ?? '', call, { waitMs: 1_000 }) : await call();
      } catch (err) {
        if (isServiceError(err)) throw err;
        throw unavailable(service, err);
      }
      for (const [k, v] of Object.entries(reply.headers)) res.setHeader(k, v);
      res.status(reply.status);
      if (reply.bodyJson === undefined) res.end();
      else res.type('application/json').send(reply.bodyJson);
    };
    router[r.method](r.path, handler);
  }
  return router;
}
