import express, { type Request, type RequestHandler, type Response } from 'express';
import type { Bus } from '@dws/bus';
import { BODY_LIMIT_BYTES } from '@dws/http';
import { INBOUND_HEADERS, isServiceError, ServiceError } from '@dws/protocol';
import { callApi } from '@dws/runtime';

/**
 * POST /v1/webhooks/{slug}: a partner's post, with no API key (the signature
 * is the credential, SPEC Authentication 8). The HMAC is over the exact
 * bytes, so this route skips the JSON body parser: the body is read raw (up
 * to 1 MiB) and reaches ingest as a JSON string field, unchanged, with the
 * headers ingest verifies and records. Ingest resolves the slug to its
 * workspace, verifies, records and answers.
 */

/** Headers ingest reads: the signature schemes it accepts and the ones it records. Never authorization or cookies. */
const FORWARDED_HEADERS = ['x-service-signature', 'stripe-signature', 'x-hub-signature-256', ...INBOUND_HEADERS];

const INBOUND_PATH = /^\/webhooks\/[^/]+\/?$/;

/** Whether a request is an inbound webhook post (its body must not go through the JSON parser). */
export const isInboundPost = (req: Request): boolean => req.method === 'POST' && INBOUND_PATH.test(req.path);

interface InboundLocals {
  inboundTooLarge?: number;
}

/**
 * Reads the raw body up to 1 MiB into req.rawBody. A larger body is not an
 * error here: the size is noted so ingest records the refusal (413) against
 * the receiver; every other read failure is the usual error answer.
 */
export function inboundBody(): RequestHandler {
  const raw = express.raw({ type: () => true, limit: BODY_LIMIT_BYTES });
  return (req, res, next) => {
    raw(req, res, (err?: unknown) => {
      if (err === undefined || err === null) {
        req.rawBody = Buffer.isBuffer(req.body) ? req.body : undefined;
        req.body = undefined;
        return next();
      }
      if ((err as { type?: unknown }).type === 'entity.too.large') {
        const declared = Number(req.headers['content-length']);
        (res.locals as InboundLocals).inboundTooLarge =
          Number.isFinite(declared) && declared > BODY_LIMIT_BYTES ? declared : BODY_LIMIT_BYTES + 1;
        req.rawBody = undefined;
        req.body = undefined;
        return next();
      }
      // body-parser's own errors carry a type the error middleware maps; anything else is the decompressor refusing the body.
      if (typeof (err as { type?: unknown }).type === 'string') return next(err);
      const encoding = req.headers['content-encoding'];
      if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
        return next(
          new ServiceError(400, 'invalid_body_encoding', `Request body is not valid ${encoding.slice(0, 40)} data.`, { cause: err }),
        );
      }
      next(new ServiceError(400, 'invalid_body', 'Request body could not be read.', { cause: err }));
    });
  };
}

/** Forward the post to ingest's `webhooks.receive` and relay its answer. */
export async function receiveInbound(bus: Bus, req: Request, res: Response, slug: string): Promise<void> {
  const headers: Record<string, string> = {};
  for (const h of FORWARDED_HEADERS) {
    const v = req.headers[h];
    if (typeof v === 'string') headers[h] = v;
  }
  const tooLarge = (res.locals as InboundLocals).inboundTooLarge;
  const body =
    tooLarge !== undefined ? { headers, sizeBytes: tooLarge, tooLarge: true } : { rawBody: req.rawBody?.toString('utf8') ?? '', headers };
  // No workspace: the slug names it, and only ingest knows which.
  const caller = { workspaceId: '', actor: 'webhook', keyKind: 'none', requestId: req.requestId ?? '' };
  let reply;
  try {
    reply = await callApi(bus, 'ingest', 'webhooks.receive', caller, { params: { slug }, rawBody: JSON.stringify(body) });
  } catch (err) {
    if (isServiceError(err)) throw err;
    throw new ServiceError(503, 'service_unavailable', 'The ingest service did not answer in time; retry shortly.', { cause: err });
  }
  res.status(reply.status);
  if (reply.bodyJson === undefined) res.end();
  else res.type('application/json').send(reply.bodyJson);
}
