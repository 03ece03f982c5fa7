import { request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Request } from 'express';
import type { Logger } from '@dws/log';
import { checkWebSocketUpgrade, refuseUpgrade } from '@dws/http';
import { CONNECT_SUBPROTOCOL, HOP_HEADER, hopKey, isServiceError, signHop } from '@dws/protocol';

/** Takes over an HTTP upgrade (the invoker's Connect endpoint). */
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

export interface ConnectProxyOptions {
  /** Authenticates the upgrade like any write: a secret key (CONTRACT Keys). */
  auth: { caller(req: Request, opts: { write: boolean }): Promise<{ workspaceId: string; actor: string }> };
  log: Logger;
  /** The fleet's seal key: the hop header telling the invoker the socket's workspace is signed with a key derived from it. */
  sealKey: Buffer;
  /** In one process (`pnpm dev`): the invoker's own upgrade handler. */
  local?: UpgradeHandler;
  /** In one process: upgrades on other paths (the scheduler's checkpoint sockets; it refuses paths it does not serve). */
  others?: UpgradeHandler;
  /** Otherwise the upgrade is proxied to the invoker's port: one URL, or several comma-separated (random order, next on refusal). */
  invokerUrl: string;
}

const PATH = '/v1/connect';

/**
 * `GET /v1/connect` (SPEC Transports): the gateway authenticates the
 * WebSocket upgrade and hands it to the invoker, which owns Connect sockets
 * (DESIGN: the invoker holds them, routes invokes to them). In one process
 * the upgrade is passed in memory; in the fleet the raw connection is piped
 * to the invoker's port, so frames flow end to end and the gateway keeps no
 * per-socket state beyond two pipes.
 */
export function attachConnect(server: Server, o: ConnectProxyOptions): void {
  const key = hopKey(o.sealKey);
  const invokers = o.invokerUrl
    .split(',')
    .map((u) => u.trim())
    .filter((u) => u !== '');
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    void accept(req, socket, head).catch((err: unknown) => {
      o.log.error({ err }, 'connect upgrade failed');
      refuse(socket, 500, 'internal', 'Internal error.');
    });
  });

  async function accept(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const path = (req.url ?? '').split('?')[0];
    if (path !== PATH && o.others) return o.others(req, socket, head);
    if (path !== PATH) return refuse(socket, 404, 'route_not_found', `No WebSocket endpoint at ${path}; Connect is GET ${PATH}.`);
    // A handshake the invoker's WebSocket library would refuse (in text/plain) is refused here, with the error body, before auth.
    const bad = checkWebSocketUpgrade(req, { subprotocol: CONNECT_SUBPROTOCOL });
    if (bad) return refuseUpgrade(socket, bad);
    let caller: { workspaceId: string; actor: string };
    try {
      caller = await o.auth.caller(req as Request, { write: true });
    } catch (err) {
      if (isServiceError(err) && err.status < 500) return refuse(socket, err.status, err.code, err.message);
      throw err;
    }
    // Only this hop may say which workspace the socket is for: a client-sent header is replaced.
    req.headers[HOP_HEADER] = signHop(key, { workspaceId: caller.workspaceId, actor: caller.actor });
    if (o.local) return o.local(req, socket, head);
    // Spread sockets over the replicas; a replica that is down is skipped.
    const order = [...invokers].sort(() => Math.random() - 0.5);
    proxy(req, socket, head, order);
  }

  function proxy(req: IncomingMessage, socket: Duplex, head: Buffer, targets: string[]): void {
    const [first, ...rest] = targets;
    if (first === undefined || socket.destroyed) return refuse(socket, 502, 'invoker_unavailable', 'No invoker took the connection; retry shortly.');
    const target = new URL(first);
    const upstream = httpRequest({
      host: target.hostname,
      port: target.port || 80,
      path: req.url,
      method: 'GET',
      headers: { ...req.headers, host: target.host },
    });
    let answered = false;
    upstream.on('upgrade', (res, up: Duplex, upHead: Buffer) => {
      answered = true;
      const lines = ['HTTP/1.1 101 Switching Protocols'];
      for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (upHead.length > 0) socket.write(upHead);
      if (head.length > 0) up.write(head);
      for (const s of [socket, up]) (s as { setNoDelay?: (v: boolean) => void }).setNoDelay?.(true);
      up.on('error', () => socket.destroy());
      up.on('close', () => socket.destroy());
      socket.on('close', () => up.destroy());
      up.pipe(socket).pipe(up);
    });
    // The invoker refused the upgrade: pass its answer through.
    upstream.on('response', (res) => {
      answered = true;
      if (res.statusCode === 503 && rest.length > 0) {
        // That replica is draining: the next one may take it.
        res.resume();
        return proxy(req, socket, head, rest);
      }
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => passOn(socket, res.statusCode ?? 502, body));
    });
    upstream.on('error', (err) => {
      if (answered) return socket.destroy();
      o.log.warn({ err, invoker: first }, 'connect: the invoker did not take the upgrade');
      proxy(req, socket, head, rest);
    });
    upstream.end();
  }
}

/** Answers an upgrade with an HTTP error and the CONTRACT error body. */
function refuse(socket: Duplex, status: number, code: string, message: string): void {
  refuseUpgrade(socket, { status, code, message });
}

/**
 * Passes the invoker's refusal on. It answers with the error body; should
 * anything else come back (another library's text/plain), it is wrapped so
 * the client still gets the CONTRACT shape, and a 5xx stays ours to name.
 */
function passOn(socket: Duplex, status: number, body: string): void {
  let parsed: { error?: { code?: unknown; message?: unknown } } | undefined;
  try {
    parsed = JSON.parse(body) as typeof parsed;
  } catch {
    parsed = undefined;
  }
  const code = parsed?.error?.code;
  const message = parsed?.error?.message;
  if (typeof code === 'string' && /^[a-z][a-z0-9_]*$/.test(code) && typeof message === 'string') return refuse(socket, status, code, message);
  if (status >= 500) return refuse(socket, 502, 'invoker_unavailable', 'The invoker did not take the connection; retry shortly.');
  refuse(socket, status >= 400 ? status : 502, 'upgrade_refused', 'The WebSocket upgrade was refused.');
}
