import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import {
  checkProtocolVersion,
  parseInvokeRequestBody,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  SIGNATURE_HEADER,
  verifyInvokeSignature,
  type InvokeReply,
  type VerifyFailureReason,
} from '@dws/protocol';
import { executePass, type Checkpoint, type ExecuteOptions } from './execution.js';
import { loadOtel, startPassTrace } from './tracing.js';
import type { WorkflowHandler } from './types.js';

/** An invoke reply ready to be written: status, wrapped body, extra headers. */
export interface InvokeHttpReply {
  status: number;
  body: InvokeReply;
  headers?: Record<string, string>;
}

/** The request shape serve() needs: Node's, plus what body parsers may leave. */
export type InvokeRequest = IncomingMessage & { body?: unknown; rawBody?: unknown };

/** An express-compatible `(req, res)` handler; also works with `http.createServer`. */
export type InvokeHttpHandler = (req: InvokeRequest, res: ServerResponse) => Promise<void>;

export interface InvokeTarget {
  /**
   * The key invokes are signed with. Undefined only on the Connect transport
   * without a key: the runner dialed the service itself, so the socket is
   * authenticated both ways and the signature is checked when a key is known.
   */
  signingKey: string | undefined;
  /** Options of each pass of a workflow (its run-ahead budget). */
  passFor?(workflow: string): ExecuteOptions | undefined;
  /**
   * How this transport reaches the service with a pass's checkpoints
   * (undefined: it cannot, and each pass reports its steps in its reply).
   */
  checkpoint?(runId: string, token: string, direct?: { url?: string; socket?: string }): Checkpoint;
  /** The handler for a workflow name (the onFailure one when `onFailure`), or a reason it has none. */
  resolve(workflow: string, onFailure: boolean): WorkflowHandler | { error: { code: string; message: string } };
}

const SIGNATURE_MESSAGES: Record<VerifyFailureReason, string> = {
  missing: 'The invoke carries no X-Service-Signature header.',
  malformed: 'The X-Service-Signature header is malformed; expected t=<unix>&s=<hex>.',
  expired: 'The invoke signature timestamp is more than 5 minutes from now.',
  mismatch: 'The invoke signature does not match; check SERVICE_SIGNING_KEY on the runner and the service.',
};

const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** A wrapped error reply: every status carries logs (SPEC Runner protocol). */
export function errorReply(
  status: number,
  code: string,
  message: string,
  headers?: Record<string, string>,
): InvokeHttpReply {
  const reply: InvokeHttpReply = { status, body: { error: { code, message }, logs: [] } };
  if (headers) reply.headers = headers;
  return reply;
}

/**
 * Handles one invoke given its exact body bytes and headers: verify the
 * signature over the raw bytes, check the protocol version, parse, dispatch,
 * replay. Transport-agnostic, so a socket transport can reuse it.
 */
export async function handleInvoke(
  target: InvokeTarget,
  rawBody: string | Uint8Array,
  headers: IncomingHttpHeaders,
): Promise<InvokeHttpReply> {
  if (target.signingKey !== undefined) {
    const verified = verifyInvokeSignature(target.signingKey, headers[SIGNATURE_HEADER], rawBody);
    if (!verified.ok) return errorReply(401, 'invalid_signature', SIGNATURE_MESSAGES[verified.reason]);
  }

  const version = checkProtocolVersion(headers[PROTOCOL_HEADER]);
  if (!version.ok) return errorReply(400, 'protocol_version_mismatch', version.message);

  let json: unknown;
  try {
    json = JSON.parse(typeof rawBody === 'string' ? rawBody : Buffer.from(rawBody).toString('utf8'));
  } catch {
    return errorReply(400, 'invalid_json', 'The invoke body is not valid JSON.');
  }
  const parsed = parseInvokeRequestBody(json);
  if (!parsed.ok) return errorReply(400, 'invalid_invoke_body', `The invoke body is malformed: ${parsed.message}.`);

  const { ctx } = parsed.value;
  // The trace context rides the body when the service put it there, else the W3C header (or the Connect frame).
  const traceparent = headers.traceparent;
  if (ctx.traceparent === undefined && typeof traceparent === 'string' && TRACEPARENT.test(traceparent)) ctx.traceparent = traceparent;
  const handler = target.resolve(ctx.workflow, ctx.onFailure === true);
  if (typeof handler !== 'function') return errorReply(400, handler.error.code, handler.error.message);

  const options: ExecuteOptions = { ...target.passFor?.(ctx.workflow) };
  // A run-ahead budget is the workflow's explicit choice of fewer round trips over per-step storage: it wins.
  if (ctx.checkpoint !== undefined && target.checkpoint && !((options.stepBudgetMs ?? 0) > 0)) {
    options.checkpoint = target.checkpoint(ctx.runId, ctx.checkpoint, { url: ctx.checkpointUrl, socket: ctx.checkpointSocket });
  }
  // OpenTelemetry, when the runner has @opentelemetry/api and a tracer provider: the pass continues ctx.traceparent.
  const otel = loadOtel();
  if (otel) await otel;
  const trace = startPassTrace(ctx);
  if (trace) options.trace = trace;
  const result = await executePass(handler, parsed.value, options);
  trace?.end(result.status, 'error' in result ? result.error : undefined);
  return { status: result.status, body: result.body };
}

type RawBody = { ok: true; body: string | Buffer } | { ok: false; reply: InvokeHttpReply };

/**
 * The exact request bytes. A body parser may have run before us: a Buffer
 * or string body (express.raw / express.text) or a `rawBody` saved by a
 * `verify` hook is used as is; an untouched stream is read here. A body
 * already parsed into an object cannot be verified (the bytes are gone).
 */
export function readRawBody(req: InvokeRequest, maxBytes: number): Promise<RawBody> {
  const pre = req.body;
  if (typeof pre === 'string' || Buffer.isBuffer(pre)) return Promise.resolve({ ok: true, body: pre });
  if (pre instanceof Uint8Array) return Promise.resolve({ ok: true, body: Buffer.from(pre) });
  const saved = req.rawBody;
  if (typeof saved === 'string' || Buffer.isBuffer(saved)) return Promise.resolve({ ok: true, body: saved });
  if (req.readableEnded) {
    return Promise.resolve({
      ok: false,
      reply: errorReply(
        500,
        'raw_body_unavailable',
        'The invoke body was consumed before serve() ran (e.g. by express.json()), so its signature cannot be checked. ' +
          'Mount serve() before any JSON body parser, or use express.raw({ type: "*/*" }) on the invoke route.',
      ),
    });
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (result: RawBody): void => {
      if (done) return;
      done = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      resolve(result);
    };
    const onData = (chunk: Buffer | string): void => {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      size += buf.length;
      if (size > maxBytes) {
        // Stop buffering; drain the rest so the reply can still be written.
        req.resume();
        finish({
          ok: false,
          reply: errorReply(413, 'payload_too_large', `The invoke body exceeds ${maxBytes} bytes.`, {
            connection: 'close',
          }),
        });
        return;
      }
      chunks.push(buf);
    };
    const onEnd = (): void => finish({ ok: true, body: Buffer.concat(chunks, size) });
    const onError = (err: Error): void =>
      finish({ ok: false, reply: errorReply(400, 'invalid_body', `Reading the invoke body failed: ${err.message}`) });
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

/** Writes a reply with the protocol header (SPEC Versioning 2). */
export function sendReply(res: ServerResponse, reply: InvokeHttpReply): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const json = JSON.stringify(reply.body);
  res.statusCode = reply.status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader(PROTOCOL_HEADER, String(PROTOCOL_VERSION));
  for (const [k, v] of Object.entries(reply.headers ?? {})) res.setHeader(k, v);
  res.end(json);
}

/** Builds the `(req, res)` handler around `handleInvoke`. */
export function createInvokeHandler(target: InvokeTarget, maxBodyBytes: number): InvokeHttpHandler {
  return async (req, res) => {
    let reply: InvokeHttpReply;
    try {
      if (req.method !== undefined && req.method !== 'POST') {
        reply = errorReply(405, 'method_not_allowed', 'The invoke endpoint only accepts POST.', { allow: 'POST' });
      } else {
        const raw = await readRawBody(req, maxBodyBytes);
        reply = raw.ok ? await handleInvoke(target, raw.body, req.headers) : raw.reply;
      }
    } catch (err) {
      // A bug in the SDK or the transport, not in the workflow: retriable.
      reply = errorReply(
        500,
        'internal',
        `The runner failed to handle the invoke: ${(err as Error)?.message ?? String(err)}`,
      );
    }
    sendReply(res, reply);
  };
}
