import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import express, { type ErrorRequestHandler, type Express, type RequestHandler } from 'express';
import { errorBody, invalid, isServiceError, ServiceError } from '@dws/protocol';
import type { Logger } from '@dws/log';
import { decodeUtf8, describeStringProblem, findBadString, jsonDepthExceeds, MAX_JSON_DEPTH } from './body-checks.js';

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
    req.requestId = requestIdOf(req);
    res.setHeader('x-request-id', req.requestId);
    next();
  });
  return app;
}

/** A request as the services handle it, express's or node's own: with the request id it was given. */
export type IdentifiedRequest = IncomingMessage & { requestId?: string };

/** The caller's X-Request-Id when it is usable, else a new one. */
export function requestIdOf(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id'];
  return typeof incoming === 'string' && incoming.length <= 128 ? incoming : randomUUID();
}

export interface JsonBodyOptions {
  /** Largest body, after any Content-Encoding is undone. @default BODY_LIMIT_BYTES (1 MiB) */
  limit?: number;
  /** Deepest nesting of objects and arrays. @default MAX_JSON_DEPTH (64) */
  maxDepth?: number;
}

/**
 * Reads the body as bytes (any content type; gzip, deflate or br undone),
 * keeps them in `req.rawBody`, and parses JSON into `req.body`. Every way a
 * body can be bad is a 4xx with the error body, decided here once so no
 * service sees it: over the limit 413 `payload_too_large`; an unknown
 * Content-Encoding 415 `unsupported_encoding`, one that does not decode 400
 * `invalid_body_encoding`; not UTF-8 or a string with a lone surrogate or
 * NUL 400 `invalid_unicode`; nested deeper than `maxDepth` 400
 * `json_too_deep`; not JSON 400 `invalid_json`. An empty body leaves
 * `req.body` undefined.
 */
export function jsonBody(opts: JsonBodyOptions = {}): RequestHandler[] {
  const limit = opts.limit ?? BODY_LIMIT_BYTES;
  const maxDepth = opts.maxDepth ?? MAX_JSON_DEPTH;
  const raw = express.raw({ type: () => true, limit });
  const read: RequestHandler = (req, res, next) => {
    raw(req, res, (err?: unknown) => (err === undefined || err === null ? next() : next(readError(err, req.headers['content-encoding']))));
  };
  const parse: RequestHandler = (req, _res, next) => {
    const buf = Buffer.isBuffer(req.body) ? req.body : undefined;
    req.rawBody = buf;
    req.body = undefined;
    if (!buf || buf.length === 0) return next();
    try {
      req.body = parseJsonBody(buf, maxDepth).parsed;
    } catch (err) {
      return next(err);
    }
    next();
  };
  return [read, parse];
}

/**
 * A non-empty request body as JSON, with its text, or the 400 jsonBody
 * answers: not UTF-8 or a string Postgres cannot hold `invalid_unicode`,
 * too deep `json_too_deep`, not JSON `invalid_json`.
 */
export function parseJsonBody(buf: Buffer, maxDepth = MAX_JSON_DEPTH): { parsed: unknown; text: string } {
  const text = decodeUtf8(buf);
  if (text === undefined) throw invalid('invalid_unicode', 'Request body is not valid UTF-8.');
  // Before parsing: a 100,000-deep body is refused without being built.
  if (jsonDepthExceeds(text, maxDepth)) throw invalid('json_too_deep', `Request body nests objects and arrays deeper than ${maxDepth} levels.`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalid('invalid_json', 'Request body is not valid JSON.');
  }
  const bad = findBadString(parsed);
  if (bad) throw invalid('invalid_unicode', `${bad.path ? `body.${bad.path}` : 'body'}: ${describeStringProblem(bad.problem)}.`.slice(0, 400));
  return { parsed, text };
}

/** A body-parser failure as the error body; `encoding` is the request's Content-Encoding. */
function readError(err: unknown, encoding: string | undefined): ServiceError {
  const type = (err as { type?: unknown } | undefined)?.type;
  if (type === 'entity.too.large') return new ServiceError(413, 'payload_too_large', 'Request body exceeds 1 MiB.');
  if (type === 'encoding.unsupported') {
    return new ServiceError(415, 'unsupported_encoding', 'Content-Encoding must be gzip, deflate, br or identity.', { cause: err });
  }
  if (type === 'charset.unsupported') return new ServiceError(415, 'unsupported_charset', 'Request body charset is not supported; send UTF-8.', { cause: err });
  if (type === 'request.aborted') return new ServiceError(400, 'request_aborted', 'Request was aborted.', { cause: err });
  if (type === 'request.size.invalid') return invalid('invalid_body', 'Request body length does not match Content-Length.');
  // Anything else while reading a compressed body is the decompressor refusing it (zlib's Z_DATA_ERROR and kin).
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
    return new ServiceError(400, 'invalid_body_encoding', `Request body is not valid ${encoding.slice(0, 40)} data.`, { cause: err });
  }
  return new ServiceError(400, 'invalid_body', 'Request body could not be read.', { cause: err });
}

/** Unknown routes: 404 with the error body. */
export const notFoundHandler: RequestHandler = (req, _res, next) => {
  next(new ServiceError(404, 'route_not_found', `No route for ${req.method} ${req.path}.`));
};

/** CONTRACT Error body: codes are snake_case. */
const SNAKE = /^[a-z][a-z0-9_]*$/;

/**
 * Maps every error once to the CONTRACT.md error body. ServiceErrors carry
 * their status; errors from express's own layers (body reading, a path that
 * does not percent-decode) become 4xx with our codes; anything else is a
 * 500 whose cause is logged and never sent.
 */
export function errorMiddleware(log: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    const { status, code, message } = errorReply(err, req, log, req.path);
    if (res.headersSent) {
      res.end();
      return;
    }
    res.status(status).json(errorBody(code, message));
  };
}

/** The status and error body of `err` (see errorMiddleware); a 5xx is logged with its cause. */
export function errorReply(err: unknown, req: IdentifiedRequest, log: Logger, path: string): { status: number; code: string; message: string } {
  let status = 500;
  let code = 'internal';
  let message = 'Internal error.';
  const e = err as { type?: unknown; status?: number; code?: unknown; message?: string; name?: string } | undefined;
  // body-parser, http-errors and zlib errors also carry `code` and `status`: tell them apart from ours by `type` and the code's shape.
  if (typeof e?.type === 'string' && typeof e.status === 'number' && e.status >= 400 && e.status < 500) {
    ({ status, code, message } = readError(err, req.headers['content-encoding']));
  } else if (isServiceError(err) && err.status >= 400 && err.status < 600 && SNAKE.test(err.code)) {
    ({ status, code, message } = err);
  } else if (e?.name === 'URIError' && e.status === 400) {
    // The router could not percent-decode a path parameter.
    status = 400;
    code = 'invalid_path';
    message = 'A path segment is not valid percent-encoded UTF-8.';
  } else if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500) {
    status = e.status;
    code = 'bad_request';
    message = 'Bad request.';
  }
  if (status >= 500) log.error({ err, requestId: req.requestId, path }, 'request failed');
  return { status, code, message };
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
