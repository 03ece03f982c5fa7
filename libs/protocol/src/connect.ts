import type { Parsed } from './parse.js';
import type { RegisterBody } from './wire.js';

/**
 * The Connect transport (SPEC "Transports"): the runner dials `GET /connect`
 * as a WebSocket with this subprotocol and receives invokes on the socket.
 * SPEC fixes the envelope and the frame types; the payloads below are ours.
 *
 * One connection, in order:
 * 1. runner -> `hello` {@link RunnerHello}; service -> `hello` {@link ServiceHello}
 *    (a present, different protocolVersion closes the socket with 4400);
 * 2. runner -> `runner.register` {@link ConnectRegister}; service answers with
 *    the same frame id: `runner.register` {@link ConnectRegistered}, or
 *    `error` {@link ConnectErrorPayload} and a close;
 * 3. service -> `invoke` {@link ConnectInvoke}; runner -> `invoke.result`
 *    {@link ConnectInvokeResult} with the invoke's frame id. Invokes overlap.
 *
 * Heartbeat: the service sends a WebSocket ping every `heartbeatMs`; a socket
 * that has not answered the previous ping is closed and its runner leaves
 * routing at once. The runner treats silence for 2.5 heartbeats as a dead
 * connection and reconnects with backoff and jitter.
 */
export const CONNECT_SUBPROTOCOL = 'service.connect.v0';

export const CONNECT_FRAME_TYPES = ['hello', 'runner.register', 'invoke', 'invoke.result', 'checkpoint', 'checkpoint.result', 'error'] as const;
export type ConnectFrameType = (typeof CONNECT_FRAME_TYPES)[number];

/** SPEC: the generic envelope `{ type, id, payload }`. */
export interface ConnectFrame<T = unknown> {
  type: string;
  /** Correlates a reply with its request; unique per sender and connection. */
  id: string;
  payload: T;
}

/** Close codes the service uses (4000-4999 are application codes in RFC 6455). */
export const CONNECT_CLOSE = {
  /** A protocol version that is present and differs (SPEC Versioning 3). */
  versionMismatch: 4400,
  /** The hello or register was malformed or refused. */
  invalid: 4422,
  /** The runner missed a heartbeat. */
  heartbeat: 4408,
  /** A newer connection registered the same runner id. */
  replaced: 4409,
  /** The service is shutting down; reconnect. */
  shutdown: 1001,
} as const;

/**
 * Close codes after which reconnecting cannot help. `replaced` is among them:
 * a runner only ever has one socket, so a newer one with its id belongs to
 * another process using the same runner id, and the last one wins.
 */
export const FATAL_CLOSE_CODES: readonly number[] = [CONNECT_CLOSE.versionMismatch, CONNECT_CLOSE.invalid, CONNECT_CLOSE.replaced];

export interface RunnerHello {
  /** Omitted means assumed compatible. */
  protocolVersion?: number;
  sdk?: string;
  runtime?: string;
}

export interface ServiceHello {
  protocolVersion: number;
  /** This connection, as the service names it (shown nowhere else; handy in logs). */
  connectionId: string;
  /** Ping period; the runner's watchdog is 2.5 times this. */
  heartbeatMs: number;
}

/** The POST /register body, minus the url a connect runner does not have; `runner` is required. */
export type ConnectRegister = Omit<RegisterBody, 'url'> & { runner: string; url?: string };

export interface ConnectRegistered {
  runner: string;
  app: string;
  workflows: string[];
}

export interface ConnectInvoke {
  /** The exact invoke body: the signature covers these bytes (UTF-8). */
  body: string;
  /** `X-Service-Signature` value over `body`. */
  signature: string;
  protocolVersion: number;
  /** W3C trace context of this invoke (the `traceparent` header over HTTP). */
  traceparent?: string;
}

export interface ConnectInvokeResult {
  /** The status an HTTP runner would answer with. */
  status: number;
  /** The wrapped reply as JSON text (capped at 1 MiB like an HTTP reply). */
  body: string;
}

/**
 * Runner -> service, while a pass runs: steps it finished, to be stored
 * before its handler goes past them (an extension of SPEC's protocol; the
 * same body as POST /v1/runs/{id}/checkpoint). Sent only when the invoke
 * carried `ctx.checkpoint`.
 */
export interface ConnectCheckpoint {
  runId: string;
  /** ctx.checkpoint of the invoke. */
  token: string;
  opcodes: unknown[];
  logs?: unknown[];
}

/** Service -> runner: `stored` once durable; otherwise the pass is over (end it and reply). */
export interface ConnectCheckpointResult {
  stored: boolean;
  /** Why not stored (pass_not_current, invalid_checkpoint, ...). */
  code?: string;
  message?: string;
}

export interface ConnectErrorPayload {
  code: string;
  message: string;
}

/** One frame as text. */
export function encodeConnectFrame(type: ConnectFrameType, id: string, payload: unknown): string {
  return JSON.stringify({ type, id, payload });
}

/** Parses a frame's text; checks the envelope only (payloads are checked by whoever reads them). */
export function parseConnectFrame(text: string): Parsed<ConnectFrame> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { ok: false, message: 'frame is not JSON' };
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return { ok: false, message: 'frame is not an object' };
  const f = v as Record<string, unknown>;
  if (typeof f.type !== 'string' || f.type === '') return { ok: false, message: 'frame.type must be a non-empty string' };
  if (f.id !== undefined && typeof f.id !== 'string') return { ok: false, message: 'frame.id must be a string' };
  return { ok: true, value: { type: f.type, id: typeof f.id === 'string' ? f.id : '', payload: f.payload ?? null } };
}

/** The WebSocket URL of `GET /connect` for a service base URL such as `http://host:8288/v1`. */
export function connectUrl(serviceUrl: string): string {
  const u = new URL(serviceUrl.endsWith('/') ? serviceUrl : `${serviceUrl}/`);
  u.protocol = u.protocol === 'https:' ? 'wss:' : u.protocol === 'http:' ? 'ws:' : u.protocol;
  return new URL('connect', u).href;
}
