import { afterEach, describe, expect, it } from '@jest/globals';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  CONNECT_CLOSE,
  CONNECT_SUBPROTOCOL,
  encodeConnectFrame,
  hashStepId,
  parseConnectFrame,
  signInvoke,
  type ConnectFrame,
  type InvokeRequestBody,
} from '@dws/protocol';
import { createRunner } from './runner.js';

// A stand-in for the service end of GET /connect, speaking the frames of
// libs/protocol/src/connect.ts. The real one is tested in services/invoker.
interface FakeService {
  url: string;
  frames: ConnectFrame[];
  sockets: WebSocket[];
  upgrades: IncomingMessage[];
  onRegister?: (ws: WebSocket, f: ConnectFrame) => void;
  helloVersion?: number;
  refuse?: number;
  close(): Promise<void>;
}

async function fakeService(): Promise<FakeService> {
  const wss = new WebSocketServer({ noServer: true, handleProtocols: (p) => (p.has(CONNECT_SUBPROTOCOL) ? CONNECT_SUBPROTOCOL : false) });
  const server: Server = createServer();
  const fake: FakeService = {
    url: '',
    frames: [],
    sockets: [],
    upgrades: [],
    async close() {
      for (const s of fake.sockets) s.terminate();
      await new Promise((r) => server.close(r));
    },
  };
  server.on('upgrade', (req, socket, head) => {
    fake.upgrades.push(req);
    if (fake.refuse) {
      socket.end(`HTTP/1.1 ${fake.refuse} Nope\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{"error":{"code":"unauthorized","message":"no"}}`);
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      fake.sockets.push(ws);
      ws.on('message', (data) => {
        const f = parseConnectFrame(data.toString());
        if (!f.ok) return;
        fake.frames.push(f.value);
        if (f.value.type === 'hello') {
          ws.send(encodeConnectFrame('hello', f.value.id, { protocolVersion: fake.helloVersion ?? 1, connectionId: `c${fake.sockets.length}`, heartbeatMs: 40 }));
        } else if (f.value.type === 'runner.register') {
          if (fake.onRegister) fake.onRegister(ws, f.value);
          else ws.send(encodeConnectFrame('runner.register', f.value.id, { runner: 'x', app: 'shop', workflows: ['w'] }));
        }
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return fake;
}

const until = async (what: string, check: () => boolean, ms = 3000) => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe('runner.connect()', () => {
  let fake: FakeService | undefined;
  afterEach(async () => {
    await fake?.close();
    fake = undefined;
  });

  it('says hello, registers with its id and workflows, and answers invokes on the socket', async () => {
    fake = await fakeService();
    const runner = createRunner({ apiKey: 'sk_c', env: {}, url: fake.url, app: 'shop', runnerId: 'r-1', signingKey: 'key' });
    runner.workflow('w', async ({ step }) => step.run('a', () => 7));
    const conn = runner.connect();
    await conn.ready;
    expect(conn.state).toBe('open');
    expect(conn.connectionId).toBe('c1');
    expect(fake.upgrades[0]!.headers.authorization).toBe('Bearer sk_c');
    expect(fake.upgrades[0]!.url).toBe('/v1/connect');
    expect(fake.frames.map((f) => f.type)).toEqual(['hello', 'runner.register']);
    expect(fake.frames[0]!.payload).toMatchObject({ protocolVersion: 1 });
    expect(fake.frames[1]!.payload).toMatchObject({ app: 'shop', runner: 'r-1', protocolVersion: 1, workflows: [{ name: 'w' }] });
    expect(fake.frames[1]!.payload).not.toHaveProperty('url');

    const body = JSON.stringify({
      event: { name: 'w', data: {} },
      steps: {},
      ctx: { runId: 'r', workflow: 'w', attempt: 0, app: 'shop', runner: '' },
    } satisfies InvokeRequestBody);
    const ws = fake.sockets[0]!;
    ws.send(encodeConnectFrame('invoke', 'i-1', { body, signature: signInvoke('key', body), protocolVersion: 1 }));
    ws.send(encodeConnectFrame('invoke', 'i-2', { body, signature: signInvoke('wrong', body), protocolVersion: 1 }));
    await until('two results', () => fake!.frames.filter((f) => f.type === 'invoke.result').length === 2);
    const results = Object.fromEntries(fake.frames.filter((f) => f.type === 'invoke.result').map((f) => [f.id, f.payload as { status: number; body: string }]));
    expect(results['i-1']!.status).toBe(200);
    expect(JSON.parse(results['i-1']!.body)).toEqual({ data: 7, opcodes: [{ op: 'StepRun', id: hashStepId('a'), name: 'a', data: 7, startedAtMs: expect.any(Number) }], logs: [] });
    expect(results['i-2']!.status).toBe(401);
    await conn.close();
    expect(conn.state).toBe('closed');
  });

  it('reconnects after a drop and after a missed heartbeat, with a stable runner id', async () => {
    fake = await fakeService();
    const states: string[] = [];
    const runner = createRunner({ apiKey: 'sk_c', env: {}, url: fake.url });
    runner.workflow('w', () => 1);
    const conn = runner.connect({ minBackoffMs: 10, maxBackoffMs: 20, onStateChange: (s) => states.push(s) });
    await conn.ready;
    fake.sockets[0]!.terminate();
    await until('second registration', () => fake!.frames.filter((f) => f.type === 'runner.register').length === 2);
    // The fake never pings; with heartbeatMs 40 the watchdog drops the socket after 100 ms of silence.
    await until('third registration', () => fake!.frames.filter((f) => f.type === 'runner.register').length === 3);
    const ids = fake.frames.filter((f) => f.type === 'runner.register').map((f) => (f.payload as { runner: string }).runner);
    expect(new Set(ids).size).toBe(1);
    expect(ids[0]).toMatch(/^default-[0-9a-f]{8}$/);
    expect(states).toEqual(expect.arrayContaining(['connecting', 'open', 'reconnecting']));
    await conn.close();
  });

  it('gives up on a refused key, a protocol mismatch and a refused registration', async () => {
    fake = await fakeService();
    const runner = createRunner({ apiKey: 'sk_c', env: {}, url: fake.url });
    runner.workflow('w', () => 1);

    fake.refuse = 401;
    await expect(runner.connect({ minBackoffMs: 10 }).ready).rejects.toThrow(/refused with 401/);

    fake.refuse = undefined;
    fake.helloVersion = 2;
    const mismatch = runner.connect({ minBackoffMs: 10 });
    await expect(mismatch.ready).rejects.toThrow(/protocol version/i);
    expect(mismatch.state).toBe('closed');

    fake.helloVersion = undefined;
    fake.onRegister = (ws, f) => {
      ws.send(encodeConnectFrame('error', f.id, { code: 'invalid_registration', message: 'app is required.' }));
      ws.close(CONNECT_CLOSE.invalid, 'invalid registration');
    };
    await expect(runner.connect({ minBackoffMs: 10 }).ready).rejects.toThrow(/invalid_registration: app is required/);
  });
});
