import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { BODY_LIMIT_BYTES, checkWebSocketUpgrade, refuseUpgrade } from '@dws/http';
import type { Logger } from '@dws/log';
import { isServiceError, writesPerTurn } from '@dws/protocol';
import type { CheckpointBody } from './checkpoint-api.js';

/** Where a replica takes checkpoint sockets (`ctx.checkpointSocket`). */
export const CHECKPOINT_SOCKET_PATH = '/checkpoints';

/** A socket that answered no ping for this long is dropped (its runner is gone). */
const PING_EVERY_MS = 30_000;

type Frame = CheckpointBody & { id?: unknown; runId?: unknown };

/**
 * Checkpoints over one WebSocket per runner process and replica: the same
 * checkpoint as POST /checkpoints/{id} (the token's MAC is the credential),
 * without an HTTP exchange per step. A runner sends
 * `{"id":n,"runId":…,"token":…,"opcodes":[…],"logs":[…]}` and gets
 * `{"id":n,"status":200}` once the steps are durable, or
 * `{"id":n,"status":4xx|5xx,"error":{code,message}}` (the HTTP route's
 * answer: the pass ends). Answers may come out of order (different runs);
 * one run's checkpoints are sent one at a time by the SDK.
 */
export function checkpointSocket(o: { direct: (runId: string, body: CheckpointBody, path: 'socket') => Promise<void>; log: Logger }) {
  const wss = new WebSocketServer({ noServer: true, maxPayload: BODY_LIMIT_BYTES });
  const alive = new WeakSet<WebSocket>();
  /** Per socket: the answers one group commit releases leave in one write. */
  const beforeSend = new WeakMap<WebSocket, () => void>();

  wss.on('connection', (ws, req: IncomingMessage) => {
    alive.add(ws);
    beforeSend.set(ws, writesPerTurn(req.socket));
    ws.on('pong', () => alive.add(ws));
    ws.on('error', () => ws.terminate());
    ws.on('message', (data, isBinary) => void answer(ws, data, isBinary));
  });

  const pinger = setInterval(() => {
    for (const ws of wss.clients) {
      if (!alive.has(ws)) ws.terminate();
      else {
        alive.delete(ws);
        ws.ping();
      }
    }
  }, PING_EVERY_MS);
  pinger.unref();

  async function answer(ws: WebSocket, data: RawData, isBinary: boolean): Promise<void> {
    let frame: Frame | undefined;
    try {
      if (!isBinary) frame = JSON.parse(data.toString()) as Frame;
    } catch {
      /* answered below */
    }
    const id = typeof frame === 'object' && frame !== null && Number.isSafeInteger(frame.id) ? (frame.id as number) : null;
    if (id === null || typeof frame!.runId !== 'string') {
      // Without an id the runner cannot match the answer: its checkpoint times out and goes over HTTP.
      return reply(ws, id, 400, 'invalid_checkpoint', 'A checkpoint frame is a JSON text {"id":<integer>,"runId":…,"token":…,"opcodes":[…]}.');
    }
    const f = frame!;
    try {
      await o.direct(f.runId as string, f, 'socket');
      reply(ws, id, 200);
    } catch (err) {
      if (isServiceError(err)) return reply(ws, id, err.status, err.code, err.message);
      o.log.error({ err, runId: f.runId }, 'storing a checkpoint failed');
      reply(ws, id, 500, 'internal', 'Internal error.');
    }
  }

  function reply(ws: WebSocket, id: number | null, status: number, code?: string, message?: string): void {
    if (ws.readyState !== ws.OPEN) return;
    beforeSend.get(ws)?.();
    ws.send(code === undefined ? `{"id":${id},"status":${status}}` : JSON.stringify({ id, status, error: { code, message } }));
  }

  return {
    /** Takes the upgrade of GET /checkpoints; anything else on this port is not a WebSocket endpoint. */
    upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
      socket.on('error', () => socket.destroy());
      const path = (req.url ?? '').split('?')[0];
      if (path !== CHECKPOINT_SOCKET_PATH) {
        return refuseUpgrade(socket, { status: 404, code: 'route_not_found', message: `No WebSocket endpoint at ${path}; checkpoints are GET ${CHECKPOINT_SOCKET_PATH}.` });
      }
      const bad = checkWebSocketUpgrade(req);
      if (bad) return refuseUpgrade(socket, bad);
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
    },
    /** Drop every socket (after the engine stopped: checkpoints in flight were answered or refused). */
    close(): Promise<void> {
      clearInterval(pinger);
      for (const ws of wss.clients) ws.terminate();
      return new Promise((resolve) => wss.close(() => resolve()));
    },
  };
}
