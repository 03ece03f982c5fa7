import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import {
  checkProtocolVersion,
  CONNECT_SUBPROTOCOL,
  connectUrl,
  encodeConnectFrame,
  FATAL_CLOSE_CODES,
  parseConnectFrame,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  SIGNATURE_HEADER,
  type ConnectErrorPayload,
  type ConnectCheckpoint,
  type ConnectCheckpointResult,
  type ConnectInvoke,
  type ConnectRegister,
  type ConnectRegistered,
  type RunnerHello,
  type ServiceHello,
} from '@dws/protocol';
import { MAX_REPLY_BYTES } from './json.js';
import { errorReply, handleInvoke, type InvokeHttpReply, type InvokeTarget } from './serve.js';
import type { Checkpoint } from './execution.js';

export type ConnectState = 'connecting' | 'open' | 'reconnecting' | 'closed';

export interface ConnectOptions {
  /** Called on every state change, with the reason when the socket dropped. */
  onStateChange?: (state: ConnectState, detail?: { code?: number; reason?: string; error?: Error; delayMs?: number }) => void;
  /** First reconnect delay; doubles per failed attempt, with full jitter. @default 250 */
  minBackoffMs?: number;
  /** Longest reconnect delay. @default 30_000 */
  maxBackoffMs?: number;
  /** Give up on a handshake (upgrade, hello, register) after this. @default 10_000 */
  handshakeTimeoutMs?: number;
  /** Largest frame accepted (the invoke body carries the memo). @default 64 MiB */
  maxPayloadBytes?: number;
}

/** A live Connect session: one socket at a time, replaced on every reconnect. */
export interface Connection {
  /**
   * Resolves once the runner is registered on a socket for the first time.
   * Rejects on a fatal refusal (bad API key, protocol version mismatch,
   * invalid registration); the connection is then closed for good.
   */
  readonly ready: Promise<void>;
  readonly state: ConnectState;
  /** The service's name for the current socket. */
  readonly connectionId: string | undefined;
  /** Stops reconnecting and closes the socket. Invokes in flight are retried by the service. */
  close(): Promise<void>;
}

export interface ConnectTarget {
  url: string;
  apiKey: string;
  invoke: InvokeTarget;
  /** The register payload (without url), built fresh per socket. */
  register(): ConnectRegister;
  hello: RunnerHello;
  /** Send checkpoints over the socket when an invoke offers them. @default true */
  checkpoints?: boolean;
}

/** How long a checkpoint may wait for its answer before the pass ends without it. */
const CHECKPOINT_TIMEOUT_MS = 10_000;

class FatalError extends Error {}

/**
 * Dials `GET /connect` and serves invokes over the socket (SPEC Transports):
 * no inbound address needed. Reconnects with exponential backoff and full
 * jitter after any drop, including a missed heartbeat.
 */
export function openConnection(target: ConnectTarget, options: ConnectOptions = {}): Connection {
  const minBackoff = options.minBackoffMs ?? 250;
  const maxBackoff = options.maxBackoffMs ?? 30_000;
  const handshakeTimeoutMs = options.handshakeTimeoutMs ?? 10_000;
  const maxPayload = options.maxPayloadBytes ?? 64 * 1024 * 1024;
  const wsUrl = connectUrl(target.url);

  let state: ConnectState = 'connecting';
  let connectionId: string | undefined;
  let socket: WebSocket | undefined;
  let closed = false;
  let failures = 0;
  let retryTimer: NodeJS.Timeout | undefined;
  let settleReady: { resolve(): void; reject(err: Error): void } | undefined;
  const ready = new Promise<void>((resolve, reject) => (settleReady = { resolve, reject }));
  // A caller that never awaits ready must not crash the process on a fatal refusal.
  ready.catch(() => {});

  const setState = (s: ConnectState, detail?: Parameters<NonNullable<ConnectOptions['onStateChange']>>[1]): void => {
    state = s;
    options.onStateChange?.(s, detail);
  };

  const fatal = (err: Error): void => {
    closed = true;
    settleReady?.reject(err);
    settleReady = undefined;
    setState('closed', { error: err });
  };

  function scheduleReconnect(detail: { code?: number; reason?: string; error?: Error }): void {
    if (closed) return;
    failures++;
    const cap = Math.min(maxBackoff, minBackoff * 2 ** Math.min(failures - 1, 20));
    const delayMs = Math.round(Math.random() * cap);
    setState('reconnecting', { ...detail, delayMs });
    retryTimer = setTimeout(dial, delayMs);
  }

  function dial(): void {
    if (closed) return;
    const ws = new WebSocket(wsUrl, CONNECT_SUBPROTOCOL, {
      headers: { authorization: `Bearer ${target.apiKey}` },
      handshakeTimeout: handshakeTimeoutMs,
      maxPayload,
      perMessageDeflate: false,
    });
    socket = ws;
    let registered = false;
    let watchdog: NodeJS.Timeout | undefined;
    let heartbeatMs = 30_000;
    const pending = new Map<string, (payload: unknown, type: string) => void>();
    // Checkpoints waiting for their answer; a closed socket answers them all "not stored".
    const checkpointsOut = new Map<string, (stored: boolean) => void>();
    const handshake = setTimeout(() => ws.terminate(), handshakeTimeoutMs);

    // Silence for 2.5 heartbeats means the path to the service is dead even
    // if TCP has not noticed: drop the socket and reconnect.
    const feed = (): void => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => ws.terminate(), Math.round(heartbeatMs * 2.5));
    };

    const send = (type: Parameters<typeof encodeConnectFrame>[0], id: string, payload: unknown): void => {
      if (ws.readyState === WebSocket.OPEN) ws.send(encodeConnectFrame(type, id, payload));
    };
    const ask = (type: 'hello' | 'runner.register', payload: unknown): Promise<{ type: string; payload: unknown }> =>
      new Promise((resolve) => {
        const id = randomUUID();
        pending.set(id, (p, t) => resolve({ type: t, payload: p }));
        send(type, id, payload);
      });

    ws.on('unexpected-response', (_req, res) => {
      // The gateway refused the upgrade: 401/403 will not fix themselves.
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString('utf8')));
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        const err = new Error(`connect refused with ${status}: ${text.slice(0, 300)}`);
        if (status === 400 || status === 401 || status === 403 || status === 404) fatal(err);
        ws.terminate();
      });
    });

    ws.on('open', () => {
      feed();
      void (async () => {
        const hello = await ask('hello', { ...target.hello, protocolVersion: PROTOCOL_VERSION } satisfies RunnerHello);
        if (hello.type !== 'hello') throw new FatalError(`connect: the service answered hello with ${hello.type}: ${describe(hello.payload)}`);
        const sh = hello.payload as Partial<ServiceHello>;
        const version = checkProtocolVersion(sh.protocolVersion);
        if (!version.ok) throw new FatalError(`connect: ${version.message}`);
        if (typeof sh.heartbeatMs === 'number' && sh.heartbeatMs > 0) heartbeatMs = sh.heartbeatMs;
        feed();
        const reg = await ask('runner.register', target.register());
        if (reg.type !== 'runner.register') throw new FatalError(`connect: registration refused: ${describe(reg.payload)}`);
        const ok = reg.payload as ConnectRegistered;
        clearTimeout(handshake);
        registered = true;
        failures = 0;
        connectionId = sh.connectionId;
        setState('open');
        settleReady?.resolve();
        settleReady = undefined;
        return ok;
      })().catch((err: unknown) => {
        if (err instanceof FatalError) fatal(err);
        ws.terminate();
      });
    });

    ws.on('ping', feed);
    ws.on('message', (data, isBinary) => {
      feed();
      if (isBinary) return;
      const frame = parseConnectFrame(data.toString());
      if (!frame.ok) return;
      const { type, id, payload } = frame.value;
      if (type === 'checkpoint.result') {
        checkpointsOut.get(id)?.((payload as Partial<ConnectCheckpointResult> | null)?.stored === true);
        return;
      }
      const waiter = pending.get(id);
      if (waiter) {
        pending.delete(id);
        waiter(payload, type);
        return;
      }
      if (type === 'invoke') void serveInvoke(id, payload as ConnectInvoke);
    });

    /** A pass's checkpoints over this socket: stored once the service answers `stored`. */
    function socketCheckpoint(runId: string, token: string): Checkpoint {
      return (opcodes, logs) =>
        new Promise<boolean>((resolve) => {
          if (ws.readyState !== WebSocket.OPEN) return resolve(false);
          const id = randomUUID();
          const timer = setTimeout(() => done(false), CHECKPOINT_TIMEOUT_MS);
          const done = (stored: boolean): void => {
            clearTimeout(timer);
            checkpointsOut.delete(id);
            resolve(stored);
          };
          checkpointsOut.set(id, done);
          send('checkpoint', id, { runId, token, opcodes, logs } satisfies ConnectCheckpoint);
        });
    }
    const invokeTarget: InvokeTarget = target.checkpoints === false ? target.invoke : { ...target.invoke, checkpoint: socketCheckpoint };

    async function serveInvoke(id: string, p: ConnectInvoke): Promise<void> {
      let reply: InvokeHttpReply;
      try {
        if (typeof p?.body !== 'string') {
          reply = errorReply(400, 'invalid_invoke_frame', 'The invoke frame carries no body.');
        } else {
          reply = await handleInvoke(invokeTarget, p.body, {
            [SIGNATURE_HEADER]: typeof p.signature === 'string' ? p.signature : undefined,
            [PROTOCOL_HEADER]: p.protocolVersion === undefined ? undefined : String(p.protocolVersion),
            traceparent: typeof p.traceparent === 'string' ? p.traceparent : undefined,
          });
        }
      } catch (err) {
        reply = errorReply(500, 'internal', `The runner failed to handle the invoke: ${(err as Error)?.message ?? String(err)}`);
      }
      let body = JSON.stringify(reply.body);
      if (Buffer.byteLength(body, 'utf8') > MAX_REPLY_BYTES) {
        body = JSON.stringify(errorReply(500, 'reply_too_large', 'The invoke reply exceeds 1 MiB.').body);
        reply = { ...reply, status: 500 };
      }
      send('invoke.result', id, { status: reply.status, body });
    }

    ws.on('error', () => {
      // 'close' follows and decides what to do; the error itself is in the close detail.
    });
    ws.on('close', (code, reasonBuf) => {
      clearTimeout(handshake);
      clearTimeout(watchdog);
      pending.clear();
      for (const done of [...checkpointsOut.values()]) done(false);
      if (socket === ws) socket = undefined;
      const reason = reasonBuf.toString();
      if (closed) {
        setState('closed', { code, reason });
        return;
      }
      if (FATAL_CLOSE_CODES.includes(code)) {
        fatal(new Error(`connect: the service closed the socket (${code}): ${reason}`));
        return;
      }
      if (registered) failures = 0;
      scheduleReconnect({ code, reason });
    });
  }

  setState('connecting');
  dial();

  return {
    ready,
    get state() {
      return state;
    },
    get connectionId() {
      return connectionId;
    },
    async close() {
      if (closed && !socket) return;
      closed = true;
      clearTimeout(retryTimer);
      settleReady?.reject(new Error('connect: closed before the runner registered'));
      settleReady = undefined;
      const ws = socket;
      if (!ws || ws.readyState === WebSocket.CLOSED) {
        setState('closed');
        return;
      }
      await new Promise<void>((resolve) => {
        ws.once('close', () => resolve());
        ws.close(1000, 'runner closing');
        setTimeout(() => ws.terminate(), 2000).unref();
      });
    },
  };
}

function describe(payload: unknown): string {
  const e = payload as Partial<ConnectErrorPayload> | null;
  return e && typeof e.message === 'string' ? `${e.code ?? 'error'}: ${e.message}` : JSON.stringify(payload);
}
