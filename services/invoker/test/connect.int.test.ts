import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import WebSocket from 'ws';
import { CONNECT_SUBPROTOCOL, encodeConnectFrame, hashStepId, parseConnectFrame, type ConnectFrame } from '@dws/protocol';
import { createRunner, type Connection, type Runner } from '@dws/sdk';
import { modes, startHarness, until, type Harness, type Workspace } from './harness.js';

const define = (r: Runner, tag: string) =>
  r.workflow<{ n: number }>('count', async ({ event, step }) => {
    const a = await step.run('a', () => ({ n: event.data.n + 1, by: tag }));
    await step.sleep('nap', 1000);
    return a;
  });

const runnersOf = async (h: Harness, ws: Workspace, app: string) => (await h.call(ws, 'runners.list', { query: { app } })).body as Array<Record<string, unknown>>;

/** A raw Connect client: the frames on the wire, no SDK. */
async function rawClient(url: string, opts: { autoPong?: boolean } = {}) {
  const ws = new WebSocket(url.replace('http', 'ws') + '/connect', CONNECT_SUBPROTOCOL, { autoPong: opts.autoPong ?? true });
  const frames: ConnectFrame[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  ws.on('message', (d) => {
    const f = parseConnectFrame(d.toString());
    if (f.ok) frames.push(f.value);
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const ask = async (type: 'hello' | 'runner.register', id: string, payload: unknown) => {
    ws.send(encodeConnectFrame(type, id, payload));
    return until(`${type} answer`, () => frames.find((f) => f.id === id));
  };
  return { ws, frames, closed, ask };
}

describe.each(modes())('Connect on %s', (mode) => {
  let h: Harness;
  let ws: Workspace;
  let gw: { url: string };
  const conns: Connection[] = [];
  beforeAll(async () => {
    h = await startHarness(mode);
    ws = await h.workspace();
    gw = await h.gateway(ws);
  }, 60_000);
  afterAll(async () => {
    for (const c of conns) await c.close().catch(() => undefined);
    await h?.close();
  }, 30_000);

  const connect = async (app: string, runnerId: string, opts: { signingKey?: string; url?: string; stepBudgetMs?: number } = {}) => {
    const runner = createRunner({
      apiKey: 'sk_x',
      env: {},
      url: opts.url ?? gw.url,
      app,
      runnerId,
      signingKey: opts.signingKey ?? ws.signingKey,
      stepBudgetMs: opts.stepBudgetMs ?? 0,
    });
    define(runner, runnerId);
    const conn = runner.connect({ minBackoffMs: 20, maxBackoffMs: 100 });
    conns.push(conn);
    await conn.ready;
    return { runner, conn };
  };

  it('registers over the socket, lists the runner as connected and live, and runs invokes on it', async () => {
    // Running ahead, so one reply carries the step and the sleep it reaches.
    await connect('c1', 'sock-1', { stepBudgetMs: 250 });
    const [row] = await runnersOf(h, ws, 'c1');
    expect(row).toMatchObject({ id: 'sock-1', app: 'c1', transport: 'connect', live: true, connected: true, keyMatch: true, workflows: ['count'] });
    expect(row).not.toHaveProperty('url');
    const wfs = (await h.call(ws, 'workflows.list', { query: { app: 'c1' } })).body;
    expect(wfs).toEqual([expect.objectContaining({ name: 'count', app: 'c1' })]);

    const out = await h.invoke(ws, { app: 'c1', workflow: 'count', data: { n: 1 } });
    expect(out).toMatchObject({
      outcome: 'reply',
      status: 206,
      runnerId: 'sock-1',
      body: { opcodes: [{ op: 'StepRun', name: 'a', data: { n: 2, by: 'sock-1' } }, { op: 'Sleep', name: 'nap', sleepMs: 1000 }] },
    });
    const done = await h.invoke(ws, {
      app: 'c1',
      workflow: 'count',
      runner: 'sock-1',
      data: { n: 1 },
      steps: { [hashStepId('a')]: { data: { n: 2, by: 'sock-1' } }, [hashStepId('nap')]: { data: null } },
    });
    expect(done).toMatchObject({ outcome: 'reply', status: 200, body: { data: { n: 2, by: 'sock-1' } } });
  });

  it('evicts a closed socket from routing at once, and takes the runner back when it reconnects', async () => {
    const { conn } = await connect('c2', 'sock-2');
    await conn.close();
    await until('the runner to leave routing', async () => {
      const [row] = await runnersOf(h, ws, 'c2');
      return row?.live === false && row.connected === false ? row : undefined;
    });
    expect(await h.invoke(ws, { app: 'c2', workflow: 'count', runner: 'sock-2' })).toMatchObject({ outcome: 'no_runner' });
    await connect('c2', 'sock-2');
    expect(await h.invoke(ws, { app: 'c2', workflow: 'count', runner: 'sock-2', data: { n: 0 } })).toMatchObject({ outcome: 'reply', status: 206 });
  });

  it('closes a socket that misses heartbeats and takes its runner out of routing', async () => {
    const c = await rawClient(gw.url, { autoPong: false });
    const hello = await c.ask('hello', 'h1', { protocolVersion: 1 });
    expect(hello).toMatchObject({ type: 'hello', payload: { protocolVersion: 1, heartbeatMs: 200, connectionId: expect.stringMatching(/^conn_/) } });
    const reg = await c.ask('runner.register', 'r1', { app: 'c3', runner: 'mute', workflows: [{ name: 'count' }] });
    expect(reg).toMatchObject({ type: 'runner.register', payload: { runner: 'mute', app: 'c3', workflows: ['count'] } });
    expect((await runnersOf(h, ws, 'c3'))[0]).toMatchObject({ live: true, connected: true });
    // It never answers pings: within two heartbeat rounds the service drops it.
    const closed = await c.closed;
    expect(closed.code).toBe(1006);
    await until('eviction', async () => ((await runnersOf(h, ws, 'c3'))[0]?.live === false ? true : undefined));
  });

  it('refuses a handshake with another protocol version, a register before hello, and an invalid registration', async () => {
    const v2 = await rawClient(gw.url);
    expect(await v2.ask('hello', 'h', { protocolVersion: 2 })).toMatchObject({ type: 'error', payload: { code: 'protocol_version_mismatch' } });
    expect((await v2.closed).code).toBe(4400);

    const early = await rawClient(gw.url);
    expect(await early.ask('runner.register', 'r', { app: 'x', runner: 'y', workflows: [] })).toMatchObject({ type: 'error', payload: { code: 'hello_required' } });
    expect((await early.closed).code).toBe(4422);

    const bad = await rawClient(gw.url);
    await bad.ask('hello', 'h', {});
    expect(await bad.ask('runner.register', 'r', { app: 'x', workflows: [] })).toMatchObject({ type: 'error', payload: { code: 'invalid_registration', message: expect.stringMatching(/runner is required/) } });
    expect((await bad.closed).code).toBe(4422);

    // The SDK gives up on a refused registration instead of reconnecting forever.
    const runner = createRunner({ apiKey: 'k', env: {}, url: gw.url, app: 'x'.repeat(300) });
    runner.workflow('w', () => 1);
    await expect(runner.connect({ minBackoffMs: 10 }).ready).rejects.toThrow(/over 256 characters/);
  });

  it('refuses an upgrade that did not come through the gateway', async () => {
    const direct = await new Promise<number>((resolve) => {
      // The invoker's handler without the hop header, as if someone reached its port directly.
      const server = createServer();
      server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => h.invoker.upgrade(req, socket, head));
      server.listen(0, '127.0.0.1', () => {
        const port = (server.address() as AddressInfo).port;
        const c = new WebSocket(`ws://127.0.0.1:${port}/v1/connect`, CONNECT_SUBPROTOCOL);
        c.on('unexpected-response', (_req, res) => {
          resolve(res.statusCode ?? 0);
          server.close();
        });
        c.on('error', () => undefined);
      });
    });
    expect(direct).toBe(401);
  });

  it('a newer socket for the same runner id replaces the older one', async () => {
    const first = await connect('c4', 'twin');
    const states: string[] = [];
    const runner = createRunner({ apiKey: 'k', env: {}, url: gw.url, app: 'c4', runnerId: 'twin', signingKey: ws.signingKey, stepBudgetMs: 0 });
    define(runner, 'twin-2');
    const second = runner.connect({ onStateChange: (s) => states.push(s) });
    conns.push(second);
    await second.ready;
    await until('the first connection to be told', () => (first.conn.state === 'closed' ? true : undefined));
    expect(await h.invoke(ws, { app: 'c4', workflow: 'count', runner: 'twin', data: { n: 1 } })).toMatchObject({ body: { opcodes: [{ data: { by: 'twin-2' } }] } });
  });

  it('reaches a socket held by another invoker replica', async () => {
    // Replica B holds the socket and does not take the scheduler's invokes: every invoke lands on A and must hop to B.
    const b = await h.replica({ serveScheduler: false });
    const viaB = await h.gateway(ws, b);
    await connect('c5', 'far', { url: viaB.url });
    const [row] = await runnersOf(h, ws, 'c5');
    expect(row).toMatchObject({ live: true, connected: true });
    const held = await h.db.query<{ replica: string }>(`select replica from invoker.runners where workspace_id = $1 and id = 'far'`, [ws.id]);
    expect(held[0]!.replica).toBe(b.replica);
    expect(held[0]!.replica).not.toBe(h.invoker.replica);
    for (let i = 0; i < 5; i++) {
      expect(await h.invoke(ws, { app: 'c5', workflow: 'count', data: { n: i } })).toMatchObject({ outcome: 'reply', status: 206, runnerId: 'far', body: { opcodes: [{ data: { n: i + 1 } }] } });
    }
  });

  it('forgets the sockets of a replica that is gone, instead of waiting out the TTL', async () => {
    // As a crashed replica leaves it: the row still names a replica nobody answers for.
    await h.call(ws, 'register', { body: { app: 'c6', url: 'http://127.0.0.1:9/unused', runner: 'ghost', workflows: [{ name: 'count' }] } });
    await h.db.query(`update invoker.runners set transport = 'connect', url = '', replica = 'inv-gone', connection_id = 'conn_x' where workspace_id = $1 and id = 'ghost'`, [ws.id]);
    expect(await h.invoke(ws, { app: 'c6', workflow: 'count', runner: 'ghost' })).toMatchObject({ outcome: 'no_runner' });
    const [row] = await runnersOf(h, ws, 'c6');
    expect(row).toMatchObject({ live: false, connected: false });
  });
});
