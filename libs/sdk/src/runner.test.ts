import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import { WebSocketServer } from 'ws';
import { request } from 'undici';
import { hashStepId, keyFingerprint, signInvoke, type InvokeRequestBody } from '@dws/protocol';
import { createRunner } from './runner.js';

const SIGNING_KEY = 'signkey_runner_test';

describe('createRunner options', () => {
  it('requires an API key at construction', () => {
    expect(() => createRunner({ env: {} })).toThrow(/SERVICE_API_KEY/);
  });

  it('reads defaults from the environment', () => {
    const runner = createRunner({
      env: { SERVICE_API_KEY: 'sk_env', SERVICE_URL: 'http://svc/v1', SERVICE_APP: 'shop', SERVICE_SIGNING_KEY: 'k' },
    });
    expect(runner.app).toBe('shop');
    expect(runner.url).toBe('http://svc/v1');
    expect(() => runner.serve()).not.toThrow();
    expect(createRunner({ env: { SERVICE_API_KEY: 'k' } }).app).toBe('default');
  });

  it('refuses to serve without a signing key', () => {
    expect(() => createRunner({ apiKey: 'k', env: {} }).serve()).toThrow(/SERVICE_SIGNING_KEY/);
  });

  it('builds the register body', () => {
    const runner = createRunner({
      apiKey: 'k',
      env: {},
      app: 'shop',
      runnerId: 'r-1',
      publicUrl: 'http://runner/invoke',
      signingKey: SIGNING_KEY,
    });
    runner.workflow(
      'order',
      {
        triggers: [{ event: 'shop/order.*', if: 'event.data.total > 0' }, { cron: '0 * * * *' }],
        retry: { maxAttempts: 3 },
        concurrency: { limit: 2, key: 'event.data.user' },
        onFailure: () => null,
      },
      () => null,
    );
    runner.workflow('plain', () => null);
    expect(runner.registerBody()).toEqual({
      app: 'shop',
      runner: 'r-1',
      url: 'http://runner/invoke',
      runtime: `node ${process.versions.node}`,
      language: 'typescript',
      version: '0.1.0',
      protocolVersion: 1,
      keyFingerprint: keyFingerprint(SIGNING_KEY),
      workflows: [
        {
          name: 'order',
          triggers: [{ event: 'shop/order.*', if: 'event.data.total > 0' }, { cron: '0 * * * *' }],
          retry: { maxAttempts: 3 },
          concurrency: { limit: 2, key: 'event.data.user' },
          onFailure: true,
        },
        { name: 'plain' },
      ],
    });
    expect(() => runner.workflow('plain', () => null)).toThrow(/already defined/);
  });
});

describe('HTTP: register and invoke over a real express app', () => {
  let server: Server;
  let base: string;
  const registrations: Array<{ auth: string | undefined; body: unknown }> = [];
  const flakyAt: number[] = [];
  let flakyDown = 0;
  const runner = createRunner({ apiKey: 'sk_test', env: {}, signingKey: SIGNING_KEY, app: 'shop', stepBudgetMs: 0 });
  runner.workflow<{ n: number }>('two-steps', async ({ event, step, logger }) => {
    const a = await step.run('a', () => event.data.n + 1);
    logger.info('between', { a, token: 'sekret' });
    const b = await step.run('b', () => a * 10);
    return { a, b };
  });

  beforeAll(async () => {
    const app = express();
    app.post('/invoke', runner.serve());
    // A fake service endpoint so register() has something to talk to.
    app.post('/v1/register', express.json(), (req, res) => {
      registrations.push({ auth: req.headers.authorization, body: req.body });
      res.json({ ok: true });
    });
    // The service restarting: 503 while `flakyDown` > 0 (one fewer each time), then ok.
    app.post('/flaky/v1/register', express.json(), (_req, res) => {
      flakyAt.push(Date.now());
      if (flakyDown-- > 0) res.status(503).json({ error: { code: 'service_unavailable', message: 'restarting' } });
      else res.json({ ok: true });
    });
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    runner.stop();
    await new Promise((resolve) => server.close(resolve));
  });

  const invokeBody = (steps: InvokeRequestBody['steps']): string =>
    JSON.stringify({
      event: { name: 'shop/go', data: { n: 4 } },
      steps,
      ctx: { runId: 'run_http', workflow: 'two-steps', attempt: 0, app: 'shop', runner: '' },
    } satisfies InvokeRequestBody);

  async function invoke(body: string, headers: Record<string, string>) {
    const res = await request(`${base}/invoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
    });
    return { status: res.statusCode, headers: res.headers, json: (await res.body.json()) as Record<string, unknown> };
  }
  const signed = (body: string, extra: Record<string, string> = {}) => ({
    'x-service-signature': signInvoke(SIGNING_KEY, body),
    'x-service-protocol': '1',
    ...extra,
  });

  it('answers 401 to a bad signature', async () => {
    const body = invokeBody({});
    const wrong = await invoke(body, { 'x-service-signature': signInvoke('other-key', body) });
    expect(wrong.status).toBe(401);
    expect(wrong.json).toEqual({ error: { code: 'invalid_signature', message: expect.any(String) }, logs: [] });
    expect(wrong.headers['x-service-protocol']).toBe('1');

    const missing = await invoke(body, {});
    expect(missing.status).toBe(401);
    const tampered = await invoke(body.replace('"n":4', '"n":5'), signed(body));
    expect(tampered.status).toBe(401);
  });

  it('answers 400 to a protocol version mismatch', async () => {
    const body = invokeBody({});
    const res = await invoke(body, signed(body, { 'x-service-protocol': '2' }));
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ error: { code: 'protocol_version_mismatch' }, logs: [] });
  });

  it('answers 400 to an unknown workflow', async () => {
    const body = invokeBody({}).replace('"workflow":"two-steps"', '"workflow":"nope"');
    const res = await invoke(body, signed(body));
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ error: { code: 'workflow_not_found' }, logs: [] });
  });

  it('drives a signed run: 206, then 200 carrying the last step, and a replay to 200', async () => {
    const b1 = invokeBody({});
    const r1 = await invoke(b1, signed(b1));
    expect(r1.status).toBe(206);
    expect(r1.headers['x-service-protocol']).toBe('1');
    // The handler ran on to the log line, then stopped before starting b.
    expect(r1.json).toMatchObject({
      opcodes: [{ op: 'StepRun', id: hashStepId('a'), name: 'a', data: 5 }],
      logs: [{ level: 'info', message: 'between', scope: '@root', index: 0, fields: { a: 5, token: '[REDACTED]' } }],
    });
    expect(r1.json.opcodes).toHaveLength(1);

    const memo1 = { [hashStepId('a')]: { data: 5 } };
    const b2 = invokeBody(memo1);
    const r2 = await invoke(b2, signed(b2));
    expect(r2.status).toBe(200);
    expect(r2.json).toMatchObject({
      data: { a: 5, b: 50 },
      opcodes: [{ op: 'StepRun', id: hashStepId('b'), name: 'b', data: 50 }],
      logs: [{ level: 'info', message: 'between', scope: '@root', index: 0, fields: { a: 5, token: '[REDACTED]' } }],
    });

    const b3 = invokeBody({ ...memo1, [hashStepId('b')]: { data: 50 } });
    // No protocol header at all: lenient on absence.
    const r3 = await invoke(b3, { 'x-service-signature': signInvoke(SIGNING_KEY, b3) });
    expect(r3.status).toBe(200);
    expect(r3.json).toMatchObject({ data: { a: 5, b: 50 } });
    expect(r3.json).not.toHaveProperty('opcodes');
  });

  it('works behind express.raw and reports a consumed body clearly', async () => {
    const app = express();
    app.post('/raw', express.raw({ type: '*/*' }), runner.serve());
    app.post('/parsed', express.json(), runner.serve());
    const s = await new Promise<Server>((resolve) => {
      const srv = app.listen(0, '127.0.0.1', () => resolve(srv));
    });
    try {
      const url = `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
      const body = invokeBody({});
      const raw = await request(`${url}/raw`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...signed(body) },
        body,
      });
      expect(raw.statusCode).toBe(206);
      await raw.body.dump();
      const parsed = await request(`${url}/parsed`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...signed(body) },
        body,
      });
      expect(parsed.statusCode).toBe(500);
      expect(await parsed.body.json()).toMatchObject({ error: { code: 'raw_body_unavailable' } });
    } finally {
      await new Promise((resolve) => s.close(resolve));
    }
  });

  it('registers with the API key', async () => {
    const r = createRunner({
      apiKey: 'sk_test',
      env: {},
      url: `${base}/v1`,
      publicUrl: `${base}/invoke`,
      signingKey: SIGNING_KEY,
      runnerId: 'r1',
    });
    r.workflow('w', () => 1);
    await expect(r.register()).resolves.toEqual({ ok: true });
    expect(registrations.at(-1)).toEqual({ auth: 'Bearer sk_test', body: r.registerBody() });
  });

  it('re-registers on the heartbeat', async () => {
    const r = createRunner({
      apiKey: 'sk_test',
      env: {},
      url: `${base}/v1/`,
      publicUrl: `${base}/invoke`,
      heartbeatIntervalMs: 20,
    });
    const before = registrations.length;
    r.startHeartbeat();
    r.startHeartbeat();
    // Poll rather than sleep a fixed time: a loaded CI machine can delay timers.
    const deadline = Date.now() + 5_000;
    while (registrations.length - before < 3 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    r.stop();
    const count = registrations.length - before;
    expect(count).toBeGreaterThanOrEqual(3);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(registrations.length - before).toBeLessThanOrEqual(count + 1);
  });

  it('tries a failed heartbeat again after a second, not a whole interval later', async () => {
    const errors: unknown[] = [];
    const r = createRunner({
      apiKey: 'sk_test',
      env: {},
      url: `${base}/flaky/v1`,
      publicUrl: `${base}/invoke`,
      heartbeatIntervalMs: 3_000,
      onHeartbeatError: (err) => errors.push(err),
    });
    flakyDown = 1;
    r.startHeartbeat();
    const deadline = Date.now() + 10_000;
    while (flakyAt.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    r.stop();
    expect(String(errors[0])).toMatch(/answered 503/);
    // The beat at 3 s failed; the next came ~1 s later (it used to wait for the next interval, 3 s).
    expect(flakyAt).toHaveLength(2);
    expect(flakyAt[1]! - flakyAt[0]!).toBeLessThan(2_500);
    expect(errors).toHaveLength(1);
  });

  it('surfaces a failing registration', async () => {
    const r = createRunner({ apiKey: 'sk_test', env: {}, url: `${base}/v1/missing`, publicUrl: `${base}/invoke` });
    await expect(r.register()).rejects.toThrow(/answered 404/);
    await expect(createRunner({ apiKey: 'k', env: {} }).register()).rejects.toThrow(/SERVICE_URL/);
  });
});

describe('HTTP checkpoints: straight to ctx.checkpointUrl, through the gateway when that replica cannot be reached', () => {
  let server: Server;
  let base: string;
  const hits: Array<{ where: 'direct' | 'gateway'; auth: string | undefined; body: any }> = [];
  const frames: any[] = [];
  let sockets = 0;
  let socketAnswer: number | 'close' = 200;
  let wss: WebSocketServer;
  let runner: ReturnType<typeof createRunner>;

  beforeAll(async () => {
    const app = express();
    const record = (where: 'direct' | 'gateway') => (req: express.Request, res: express.Response) => {
      hits.push({ where, auth: req.headers.authorization, body: req.body });
      res.json({ stored: true });
    };
    app.post('/replica/checkpoints/:id', express.json(), record('direct'));
    app.post('/v1/runs/:id/checkpoint', express.json(), record('gateway'));
    app.post('/invoke', (req, res) => void runner.serve()(req, res));
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // The replica's checkpoint socket: answers each frame as `socketAnswer` says.
    wss = new WebSocketServer({ server, path: '/replica/socket' });
    wss.on('connection', (ws) => {
      sockets++;
      ws.on('message', (data) => {
        const frame = JSON.parse(data.toString());
        frames.push(frame);
        if (socketAnswer === 'close') return ws.terminate();
        ws.send(JSON.stringify({ id: frame.id, status: socketAnswer }));
      });
    });
    runner = createRunner({ apiKey: 'sk_cp', env: {}, url: `${base}/v1`, signingKey: SIGNING_KEY, app: 'shop' });
    runner.workflow('three', async ({ step }) => {
      for (const s of ['a', 'b']) await step.run(s, () => s);
      return step.run('c', () => 'c');
    });
  });
  afterAll(async () => {
    runner.stop();
    for (const ws of wss.clients) ws.terminate();
    wss.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  async function pass(checkpointUrl: string, checkpointSocket?: string) {
    const body = JSON.stringify({
      event: { name: 'go', data: {} },
      steps: {},
      ctx: { runId: 'run_cp', workflow: 'three', attempt: 0, app: 'shop', runner: '', checkpoint: 'tok.0.mac', checkpointUrl, checkpointSocket },
    });
    const res = await request(`${base}/invoke`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-service-signature': signInvoke(SIGNING_KEY, body) }, body });
    return { status: res.statusCode, json: (await res.body.json()) as any };
  }

  it('posts each checkpoint to the replica without the API key; the reply carries only the last step', async () => {
    hits.length = 0;
    const r = await pass(`${base}/replica/checkpoints/run_cp`);
    expect(r.status).toBe(200);
    expect(r.json.opcodes.map((o: any) => o.name)).toEqual(['c']);
    expect(hits.map((h) => [h.where, h.auth, h.body.token, h.body.opcodes.map((o: any) => o.name)])).toEqual([
      ['direct', undefined, 'tok.0.mac', ['a']],
      ['direct', undefined, 'tok.0.mac', ['b']],
    ]);
  });

  it('falls back to the gateway, with the API key, when the replica refuses connections', async () => {
    hits.length = 0;
    const closed = await new Promise<Server>((resolve) => {
      const s = express().listen(0, '127.0.0.1', () => resolve(s));
    });
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const r = await pass(`http://127.0.0.1:${port}/checkpoints/run_cp`);
    expect(r.status).toBe(200);
    expect(hits.map((h) => [h.where, h.auth, h.body.opcodes.map((o: any) => o.name)])).toEqual([
      ['gateway', 'Bearer sk_cp', ['a']],
      ['gateway', 'Bearer sk_cp', ['b']],
    ]);
  });

  it('sends each checkpoint as a frame on ctx.checkpointSocket, one socket for every pass, with no HTTP exchange', async () => {
    hits.length = 0;
    frames.length = 0;
    sockets = 0;
    socketAnswer = 200;
    for (let i = 0; i < 2; i++) {
      const r = await pass(`${base}/replica/checkpoints/run_cp`, `${base.replace('http', 'ws')}/replica/socket`);
      expect(r.status).toBe(200);
      expect(r.json.opcodes.map((o: any) => o.name)).toEqual(['c']);
    }
    expect(hits).toEqual([]);
    expect(sockets).toBe(1);
    expect(frames.map((f) => [f.runId, f.token, f.opcodes.map((o: any) => o.name)])).toEqual([
      ['run_cp', 'tok.0.mac', ['a']],
      ['run_cp', 'tok.0.mac', ['b']],
      ['run_cp', 'tok.0.mac', ['a']],
      ['run_cp', 'tok.0.mac', ['b']],
    ]);
    expect(new Set(frames.map((f) => f.id)).size).toBe(4);
  });

  it('ends the pass when the socket refuses a checkpoint: the reply carries the unstored step', async () => {
    hits.length = 0;
    frames.length = 0;
    socketAnswer = 409;
    const r = await pass(`${base}/replica/checkpoints/run_cp`, `${base.replace('http', 'ws')}/replica/socket`);
    expect(r.status).toBe(206);
    expect(r.json.opcodes.map((o: any) => o.name)).toEqual(['a']);
    expect(frames).toHaveLength(1);
    expect(hits).toEqual([]);
  });

  it('sends a checkpoint the socket dropped to ctx.checkpointUrl, and the next ones too', async () => {
    hits.length = 0;
    frames.length = 0;
    socketAnswer = 'close';
    const r = await pass(`${base}/replica/checkpoints/run_cp`, `${base.replace('http', 'ws')}/replica/socket`);
    expect(r.status).toBe(200);
    expect(frames).toHaveLength(1);
    expect(hits.map((h) => [h.where, h.auth, h.body.opcodes.map((o: any) => o.name)])).toEqual([
      ['direct', undefined, ['a']],
      ['direct', undefined, ['b']],
    ]);
  });
});
