import { STATUS_CODES, type IncomingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import { errorBody } from '@dws/protocol';

/** Why a WebSocket upgrade is refused, as the CONTRACT error body and status. */
export interface UpgradeRefusal {
  status: number;
  code: string;
  message: string;
  /** Extra response headers (RFC 6455 4.2.2: the versions the server speaks). */
  headers?: Record<string, string>;
}

// RFC 6455 4.1: the key is 16 random bytes, base64 (22 characters and the == padding).
const WS_KEY = /^[+/0-9A-Za-z]{22}==$/;
// RFC 7230 token: what a subprotocol name may be.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * Checks an HTTP upgrade request against what RFC 6455 (and the `ws`
 * library behind it) accepts, so a bad handshake is refused with the
 * CONTRACT error body here rather than by `ws`, which answers text/plain.
 * `subprotocol`, when given, must be among those offered. Pure: reads only
 * the method and headers. `undefined` when the handshake is acceptable.
 */
export function checkWebSocketUpgrade(
  req: { method?: string; headers: IncomingHttpHeaders },
  opts: { subprotocol?: string } = {},
): UpgradeRefusal | undefined {
  if (req.method !== 'GET') {
    return { status: 405, code: 'method_not_allowed', message: 'A WebSocket upgrade must be a GET.', headers: { allow: 'GET' } };
  }
  if (String(req.headers.upgrade ?? '').toLowerCase() !== 'websocket') {
    return { status: 400, code: 'invalid_upgrade', message: 'The Upgrade header must be "websocket".' };
  }
  const key = req.headers['sec-websocket-key'];
  if (typeof key !== 'string' || !WS_KEY.test(key)) {
    return { status: 400, code: 'invalid_websocket_key', message: 'Sec-WebSocket-Key must be 16 bytes in base64 (RFC 6455).' };
  }
  const version = req.headers['sec-websocket-version'];
  if (version !== '13' && version !== '8') {
    return {
      status: 426,
      code: 'unsupported_websocket_version',
      message: 'Sec-WebSocket-Version must be 13.',
      headers: { 'sec-websocket-version': '13' },
    };
  }
  const offered = req.headers['sec-websocket-protocol'];
  const names = offered === undefined ? [] : offered.split(',').map((p) => p.trim());
  if (names.some((n) => !TOKEN.test(n)) || new Set(names).size !== names.length) {
    return { status: 400, code: 'invalid_subprotocol', message: 'Sec-WebSocket-Protocol must be a comma-separated list of distinct tokens.' };
  }
  if (opts.subprotocol !== undefined && !names.includes(opts.subprotocol)) {
    return { status: 400, code: 'subprotocol_required', message: `This endpoint needs the WebSocket subprotocol ${opts.subprotocol}.` };
  }
  return undefined;
}

/**
 * Answers an upgrade request (a raw socket, no express response) with an
 * HTTP error carrying the CONTRACT error body, then closes the connection.
 */
export function refuseUpgrade(socket: Duplex, r: UpgradeRefusal): void {
  if (socket.destroyed) return;
  const body = JSON.stringify(errorBody(r.code, r.message));
  const extra = Object.entries(r.headers ?? {})
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${r.status} ${STATUS_CODES[r.status] ?? 'Error'}\r\ncontent-type: application/json; charset=utf-8\r\n${extra}` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
