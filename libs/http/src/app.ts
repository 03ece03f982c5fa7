import { randomUUID } from 'node:crypto';
import express, { type ErrorRequestHandler, type Express, type RequestHandler } from 'express';
import { errorBody, isServiceError, ServiceError } from '@dws/protocol';
import type { Logger } from '@dws/log';

/** SPEC Limits: every JSON request body is capped at 1 MiB. */
export const BODY_LIMIT_BYTES = 1024 * 1024;

declare global {
   
  namespace Express {
    interface Request {
      /** Exact request bytes, kept for signature checks and zero-copy forwarding. */
      rawBody?: Buffer;
      requestId?: string;
    }
  }
}

/** An express app with a request id on every request and no framework banner. */
export function createHttpApp(): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use((req, res, next) => {
    const incoming = req.headers['x-request-id'];
    req.requestId = typeof incoming === 'string' && incoming.length <= 128 ? incoming : randomUUID();
    res.setHeader('x-request-id', req.requestId);
    next();
  });
  return app;
}

/**
 * Reads the body as bytes (any content type), keeps them in `req.rawBody`,
 * and parses JSON into `req.body`. Over 1 MiB is 413, unparseable is 400;
 * an empty body leaves `req.body` undefined.
 */
export function jsonBody(limit = BODY_LIMIT_BYTES): RequestHandler[] {
  const raw = express.raw({ type: () => true, limit });
  const parse: RequestHandler = (req, _res, next) => {
    const buf = Buffer.isBuffer(req.body) ? req.body : undefined;
    req.rawBody = buf;
    req.body = undefined;
    if (!buf || buf.length === 0) return next();
    try {
      req.body = JSON.parse(buf.toString('utf8'));
    } catch {
      return next(new ServiceError(400, 'invalid_json', 'Request body is not valid JSON.'));
    }
    next();
  };
  return [raw, parse];
}

/** Unknown routes: 404 with the error body. */
export const notFoundHandler: RequestHandler = (req, _res, next) => {
  next(new ServiceError(404, 'route_not_found', `No route for ${req.method} ${req.path}.`));
};

/**
 * Maps every error once to the CONTRACT.md error body. ServiceErrors carry
 * their status; body-parser errors become 400/413; anything else is a 500
 * whose cause is logged and never sent.
 */
export function errorMiddleware(log: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    let status = 500;
    let code = 'internal';
    let message = 'Internal error.';
    const e = err as { type?: string; status?: number; message?: string };
    if (isServiceError(err) && err.status >= 400 && err.status < 600) {
      ({ status, code, message } = err);
    } else if (e?.type === 'entity.too.large') {
      status = 413;
      code = 'payload_too_large';
      message = 'Request body exceeds 1 MiB.';
    } else if (e?.type === 'entity.parse.failed' || e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported') {
      status = 400;
      code = 'invalid_body';
      message = 'Request body could not be read.';
    } else if (e?.type === 'request.aborted') {
      status = 400;
      code = 'request_aborted';
      message = 'Request was aborted.';
    } else if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500) {
      status = e.status;
      code = 'bad_request';
      message = 'Bad request.';
    }
    if (status >= 500) log.error({ err, requestId: req.requestId, path: req.path }, 'request failed');
    if (res.headersSent) {
      res.end();
      return;
    }
    res.status(status).json(errorBody(code, message));
  };
}

export interface HealthCheck {
  /** Storage and bus reachable, every service of this process started. */
  ready(): Promise<boolean>;
}

/** `GET /healthz` (process alive) and `GET /readyz` (dependencies usable). */
export function healthRoutes(app: Express, check: HealthCheck): void {
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    const ok = await check.ready().catch(() => false);
    if (ok) res.json({ status: 'ready' });
    else res.status(503).json(errorBody('not_ready', 'Storage, bus or a service is not ready yet.'));
  });
}
