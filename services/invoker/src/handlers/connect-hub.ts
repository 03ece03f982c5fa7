import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { checkWebSocketUpgrade, refuseUpgrade } from '@dws/http';
import type { Logger } from '@dws/log';
import {
  checkProtocolVersion,
  CONNECT_CLOSE,
  CONNECT_SUBPROTOCOL,
  encodeConnectFrame,
  errorBody,
  HOP_HEADER,
  isServiceError,
  parseConnectFrame,
  PROTOCOL_VERSION,
  verifyHop,
  type ConnectCheckpoint,
  type ConnectCheckpointResult,
  type ConnectFrameType,
  type ConnectInvoke,
  type ConnectInvokeResult,
  type ConnectRegistered,
  type ServiceHello,
} from '@dws/protocol';
import { MAX_REPLY_BYTES, tooLargeBody } from '@dws/runtime';
import { parseRegistration, type Registration } from '../domain/registration.js';
import type { SocketHold } from '../store/runners.js';

/** What sending an invoke on a held socket came to. */
export type SocketInvokeOutcome =
  | { kind: 'reply'; status: number; body: Buffer }
  /** This replica holds no socket for the runner (closed, or it moved): route again. */
  | { kind: 'not_held' }
  | { kind: 'failed'; error: string };

export interface HubOptions {
  log: Logger;
  /** This replica's id, written on the runners it holds. */
  replica: string;
  /** Verifies the gateway's hop header (see libs/protocol hop.ts). */
  hopKey: Buffer;
  /** Ping period; a socket that missed the previous ping is closed. @default 30_000 (SPEC Limits) */
  heartbeatMs: number;
  /** Upper bound on one invoke. */
  invokeTimeoutMs: number;
  /** Store the registration (and queue its fact); the socket is held by this replica. */
  register(workspaceId: string, reg: Registration, hold: SocketHold): Promise<void>;
  /** The socket is gone: take the runner out of routing (unless a newer socket registered it). */
  detach(workspaceId: string, runnerId: string, app: string, connectionId: string): Promise<void>;
  /** Keep the runners of these sockets live (one statement per heartbeat round). */
  touch(connectionIds: string[]): Promise<void>;
  /** Hand a runner's checkpoint to the scheduler driving its pass. */
  checkpoint(workspaceId: string, actor: string, cp: ConnectCheckpoint): Promise<ConnectCheckpointResult>;
}

interface Conn {
  id: string;
  ws: WebSocket;
  workspaceId: string;
  actor: string;
  greeted: boolean;
  runnerId?: string;
  app?: string;
  alive: boolean;
  pending: Map<string, { resolve(o: SocketInvokeOutcome): void; timer: NodeJS.Timeout }>;
}

const HELLO_TIMEOUT_MS = 10_000;
/** Frames the runner sends are small (register, results up to 1 MiB as an escaped string). */
const MAX_FRAME_BYTES = 4 * 1024 * 1024;

const key = (workspaceId: string, runnerId: string) => `${workspaceId}\u0000${runnerId}`;

/**
 * The service end of `GET /connect` (SPEC Transports) on one invoker
 * replica: accepts sockets the gateway authenticated, runs the handshake,
 * keeps the sockets alive with pings, and sends invokes on them.
 */
export class ConnectHub {
  private readonly wss: WebSocketServer;
  private readonly conns = new Set<Conn>();
  private readonly byRunner = new Map<string, Conn>();
  private readonly heartbeat: NodeJS.Timeout;
  private readonly detaching = new Set<Promise<void>>();
  private closing = false;

  constructor(private readonly o: HubOptions) {
    this.wss = new WebSocketServer({
      noServer: true,
      maxPayload: MAX_FRAME_BYTES,
      perMessageDeflate: false,
      handleProtocols: (protocols) => (protocols.has(CONNECT_SUBPROTOCOL) ? CONNECT_SUBPROTOCOL : false),
    });
    this.heartbeat = setInterval(() => this.beat(), o.heartbeatMs);
    this.heartbeat.unref();
  }

  /** Sockets open on this replica (registered or not). */
  get size(): number {
    return this.conns.size;
  }

  /**
   * The HTTP upgrade of `GET /v1/connect`, as handed over by the gateway
   * (in process, or proxied to this replica's port). Only a request carrying
   * a valid hop header is accepted: the gateway has authenticated it.
   */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const hop = verifyHop(this.o.hopKey, req.headers[HOP_HEADER]);
    if (!hop.ok) return refuse(socket, 401, 'unauthorized', 'Connect upgrades must come through the gateway.');
    if (this.closing) return refuse(socket, 503, 'shutting_down', 'This invoker is shutting down; reconnect.');
    // What `ws` would refuse in text/plain (bad key, version, method, subprotocol) is refused here with the error body.
    const bad = checkWebSocketUpgrade(req, { subprotocol: CONNECT_SUBPROTOCOL });
    if (bad) return refuseUpgrade(socket, bad);
    const { workspaceId, actor } = hop.claims;
    this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws, workspaceId, actor));
  }

  /** Sends one invoke on the socket of `runnerId`, if this replica holds it. */
  invoke(workspaceId: string, runnerId: string, body: Uint8Array, signature: string, traceparent?: string): Promise<SocketInvokeOutcome> {
    const conn = this.byRunner.get(key(workspaceId, runnerId));
    if (!conn || conn.ws.readyState !== conn.ws.OPEN) return Promise.resolve({ kind: 'not_held' });
    const id = randomUUID();
    return new Promise<SocketInvokeOutcome>((resolve) => {
      const timer = setTimeout(() => {
        conn.pending.delete(id);
        resolve({ kind: 'failed', error: `no invoke.result within ${this.o.invokeTimeoutMs} ms` });
      }, this.o.invokeTimeoutMs);
      conn.pending.set(id, { resolve, timer });
      const frame: ConnectInvoke = { body: Buffer.from(body).toString('utf8'), signature, protocolVersion: PROTOCOL_VERSION };
      if (traceparent) frame.traceparent = traceparent;
      this.send(conn, 'invoke', id, frame);
    });
  }

  /** Closes every socket (runners reconnect, through the gateway, to another replica). */
  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.heartbeat);
    const closed = [...this.conns].map(
      (c) =>
        new Promise<void>((resolve) => {
          c.ws.once('close', () => resolve());
          c.ws.close(CONNECT_CLOSE.shutdown, 'invoker shutting down');
          setTimeout(() => {
            c.ws.terminate();
            resolve();
          }, 2000).unref();
        }),
    );
    await Promise.all(closed);
    // Out of routing before the process goes, not 90 s later.
    await Promise.all([...this.detaching]);
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }

  private accept(ws: WebSocket, workspaceId: string, actor: string): void {
    const conn: Conn = { id: `conn_${randomUUID()}`, ws, workspaceId, actor, greeted: false, alive: true, pending: new Map() };
    this.conns.add(conn);
    // Not a fatal code: a runner slow to say hello may simply reconnect.
    const helloTimer = setTimeout(() => ws.close(CONNECT_CLOSE.heartbeat, 'no hello'), HELLO_TIMEOUT_MS);
    ws.on('pong', () => {
      conn.alive = true;
    });
    ws.on('message', (data, isBinary) => {
      conn.alive = true;
      if (isBinary) return;
      const frame = parseConnectFrame(data.toString());
      if (!frame.ok) return this.fail(conn, '', 'invalid_frame', frame.message, CONNECT_CLOSE.invalid);
      const { type, id, payload } = frame.value;
      switch (type) {
        case 'hello': {
          clearTimeout(helloTimer);
          const version = checkProtocolVersion((payload as { protocolVersion?: unknown } | null)?.protocolVersion);
          // SPEC Versioning 3: strict on mismatch, the socket closes.
          if (!version.ok) return this.fail(conn, id, 'protocol_version_mismatch', version.message, CONNECT_CLOSE.versionMismatch);
          conn.greeted = true;
          const hello: ServiceHello = { protocolVersion: PROTOCOL_VERSION, connectionId: conn.id, heartbeatMs: this.o.heartbeatMs };
          return this.send(conn, 'hello', id, hello);
        }
        case 'runner.register':
          if (!conn.greeted) return this.fail(conn, id, 'hello_required', 'Send hello before runner.register.', CONNECT_CLOSE.invalid);
          return void this.register(conn, id, payload);
        case 'invoke.result': {
          const waiter = conn.pending.get(id);
          if (!waiter) return;
          conn.pending.delete(id);
          clearTimeout(waiter.timer);
          waiter.resolve(resultOf(payload));
          return;
        }
        case 'checkpoint':
          if (conn.runnerId === undefined) return this.fail(conn, id, 'register_required', 'Register before sending checkpoints.', CONNECT_CLOSE.invalid);
          return void this.checkpoint(conn, id, payload);
        default:
          // Unknown frame types are ignored: a newer runner may send more.
          return;
      }
    });
    ws.on('error', (err) => this.o.log.debug({ err, connectionId: conn.id }, 'connect socket error'));
    ws.on('close', () => {
      clearTimeout(helloTimer);
      this.conns.delete(conn);
      for (const [, w] of conn.pending) {
        clearTimeout(w.timer);
        w.resolve({ kind: 'failed', error: 'the runner socket closed during the invoke' });
      }
      conn.pending.clear();
      if (conn.runnerId === undefined) return;
      const k = key(conn.workspaceId, conn.runnerId);
      if (this.byRunner.get(k) === conn) this.byRunner.delete(k);
      const p = this.o
        .detach(conn.workspaceId, conn.runnerId, conn.app ?? '', conn.id)
        .catch((err: unknown) =>
          // The heartbeat stops for this socket, so the runner still leaves routing within the TTL.
          this.o.log.warn({ err, runner: conn.runnerId }, 'detaching a closed connect socket failed'),
        )
        .finally(() => this.detaching.delete(p));
      this.detaching.add(p);
    });
  }

  private async register(conn: Conn, frameId: string, payload: unknown): Promise<void> {
    let reg: Registration;
    try {
      const body = typeof payload === 'object' && payload !== null ? { ...payload, url: '' } : payload;
      reg = parseRegistration(body, { transport: 'connect' });
    } catch (err) {
      const code = isServiceError(err) ? err.code : 'invalid_registration';
      const closeCode = code === 'protocol_version_mismatch' ? CONNECT_CLOSE.versionMismatch : CONNECT_CLOSE.invalid;
      return this.fail(conn, frameId, code, (err as Error).message, closeCode);
    }
    if (conn.runnerId !== undefined && conn.runnerId !== reg.runnerId) {
      return this.fail(conn, frameId, 'runner_changed', 'A socket registers one runner id; reconnect to change it.', CONNECT_CLOSE.invalid);
    }
    try {
      await this.o.register(conn.workspaceId, reg, { replica: this.o.replica, connectionId: conn.id });
    } catch (err) {
      // Ours (database or bus), not the runner's: close so it reconnects and tries again.
      this.o.log.error({ err, runner: reg.runnerId }, 'storing a connect registration failed');
      return this.fail(conn, frameId, 'internal', 'Registration could not be stored; reconnect.', 1011);
    }
    if (conn.ws.readyState !== conn.ws.OPEN) {
      // It closed while the registration was stored: its close found no runner to detach, so detach here.
      await this.o.detach(conn.workspaceId, reg.runnerId, reg.app, conn.id).catch(() => undefined);
      return;
    }
    const k = key(conn.workspaceId, reg.runnerId);
    const previous = this.byRunner.get(k);
    conn.runnerId = reg.runnerId;
    conn.app = reg.app;
    this.byRunner.set(k, conn);
    // The same runner id on a newer socket wins; the older one is told why it goes.
    if (previous && previous !== conn) previous.ws.close(CONNECT_CLOSE.replaced, 'replaced by a newer connection');
    const ok: ConnectRegistered = { runner: reg.runnerId, app: reg.app, workflows: reg.workflows.map((w) => w.name) };
    this.send(conn, 'runner.register', frameId, ok);
    this.o.log.info({ runner: reg.runnerId, app: reg.app, connectionId: conn.id, actor: conn.actor }, 'connect runner registered');
  }

  /** One heartbeat round: close sockets that missed the last ping, ping the rest, refresh liveness. */
  private beat(): void {
    const held: string[] = [];
    for (const conn of this.conns) {
      if (!conn.alive) {
        this.o.log.info({ runner: conn.runnerId, connectionId: conn.id }, 'connect socket missed a heartbeat; closing it');
        conn.ws.terminate();
        continue;
      }
      conn.alive = false;
      conn.ws.ping();
      if (conn.runnerId !== undefined) held.push(conn.id);
    }
    this.o.touch(held).catch((err: unknown) => this.o.log.warn({ err }, 'refreshing connect runners failed'));
  }

  private async checkpoint(conn: Conn, frameId: string, payload: unknown): Promise<void> {
    const cp = payload as Partial<ConnectCheckpoint> | null;
    let result: ConnectCheckpointResult;
    if (!cp || typeof cp.runId !== 'string' || typeof cp.token !== 'string' || !Array.isArray(cp.opcodes)) {
      result = { stored: false, code: 'invalid_checkpoint', message: 'A checkpoint needs runId, token and opcodes.' };
    } else {
      try {
        result = await this.o.checkpoint(conn.workspaceId, conn.actor, cp as ConnectCheckpoint);
      } catch (err) {
        this.o.log.warn({ err, runId: cp.runId }, 'checkpoint not delivered');
        result = { stored: false, code: 'unavailable', message: 'The checkpoint could not reach the scheduler; end the pass.' };
      }
    }
    this.send(conn, 'checkpoint.result', frameId, result);
  }

  private send(conn: Conn, type: ConnectFrameType, id: string, payload: unknown): void {
    if (conn.ws.readyState === conn.ws.OPEN) conn.ws.send(encodeConnectFrame(type, id, payload));
  }

  private fail(conn: Conn, id: string, code: string, message: string, closeCode: number): void {
    this.send(conn, 'error', id, { code, message });
    conn.ws.close(closeCode, message.slice(0, 120));
  }
}

function resultOf(payload: unknown): SocketInvokeOutcome {
  const p = payload as Partial<ConnectInvokeResult> | null;
  if (!p || typeof p.status !== 'number' || typeof p.body !== 'string') {
    return { kind: 'failed', error: 'malformed invoke.result frame' };
  }
  const body = Buffer.from(p.body, 'utf8');
  if (body.length > MAX_REPLY_BYTES) return { kind: 'reply', status: 413, body: Buffer.from(tooLargeBody(body.length)) };
  return { kind: 'reply', status: p.status, body };
}

/** Answers an upgrade with an HTTP error and the CONTRACT error body. */
export function refuse(socket: Duplex, status: number, code: string, message: string): void {
  const body = JSON.stringify(errorBody(code, message));
  const reason = status === 401 ? 'Unauthorized' : status === 400 ? 'Bad Request' : status === 403 ? 'Forbidden' : 'Service Unavailable';
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
