import { once } from 'node:events';
import { createServer, connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { writesPerTurn } from './turn-writes.js';

describe('writesPerTurn', () => {
  const server = createServer();
  const received: Buffer[] = [];
  let port = 0;

  beforeAll(async () => {
    server.on('connection', (s) => s.on('data', (d: Buffer) => received.push(d)));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  /** A connected socket whose calls down to the OS are counted. */
  async function counted(): Promise<{ socket: Socket; writes: () => number }> {
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    let n = 0;
    const s = socket as unknown as Record<'_write' | '_writev', (...a: unknown[]) => void>;
    for (const k of ['_write', '_writev'] as const) {
      const orig = s[k]!.bind(socket);
      s[k] = (...a: unknown[]) => {
        n++;
        orig(...a);
      };
    }
    return { socket, writes: () => n };
  }

  const turn = () => new Promise((r) => setImmediate(r));

  it('sends what the promise continuations of one callback write in one write, and holds nothing past them', async () => {
    const { socket, writes } = await counted();
    const before = writesPerTurn(socket);
    // As in the services: sends made by promise continuations (after a group commit, after an
    // answer), some of them setting off more continuations that send too.
    await Promise.resolve().then(() => {
      for (let i = 0; i < 10; i++) {
        before();
        socket.write(`frame ${i};`);
        if (i === 9) {
          for (let j = 10; j < 20; j++) {
            void Promise.resolve().then(() => {
              before();
              socket.write(`frame ${j};`);
            });
          }
        }
      }
    });
    expect(writes()).toBe(0);
    await turn();
    expect(writes()).toBe(1);
    expect(socket.writableCorked).toBe(0);
    // The next turn corks again.
    before();
    socket.write('late;');
    await turn();
    expect(writes()).toBe(2);
    for (let i = 0; i < 50 && Buffer.concat(received).toString().split(';').length < 22; i++) await new Promise((r) => setTimeout(r, 10));
    expect(Buffer.concat(received).toString()).toBe(`${Array.from({ length: 20 }, (_, i) => `frame ${i};`).join('')}late;`);
    socket.destroy();
  });

  it('without it, each write is its own', async () => {
    const { socket, writes } = await counted();
    for (let i = 0; i < 20; i++) socket.write(`frame ${i};`);
    await turn();
    expect(writes()).toBe(20);
    socket.destroy();
  });
});
