import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClient, isApiError, type Client } from './client.js';

/**
 * The client's transport against a plain HTTP server that answers as the
 * gateway would, or fails as a network does (a reset connection, a 503):
 * what it retries, with which Idempotency-Key, and how a dropped run stream
 * resumes. The real API is driven in test-e2e (client.e2e.test.ts).
 */
type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

describe('createClient', () => {
  let server: Server;
  let client: Client;
  let seen: { method: string; url: string; headers: IncomingMessage['headers']; body: string }[];
  let answers: Handler[];

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
        const answer = answers.shift();
        if (!answer) return json(res, 500, { error: { code: 'internal', message: 'no answer scripted' } });
        answer(req, res, body);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    client = createClient({ url: `http://127.0.0.1:${port}/v1`, apiKey: 'sk_test', env: {}, maxAttempts: 3 });
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));
  beforeEach(() => {
    seen = [];
    answers = [];
  });

  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };
  const reset: Handler = (req) => req.socket.destroy();
  const unavailable: Handler = (_req, res) => json(res, 503, { error: { code: 'service_unavailable', message: 'try again' } });
  const ok =
    (body: unknown, status = 200, headers?: Record<string, string>): Handler =>
    (_req, res) =>
      json(res, status, body, headers);

  it('needs a URL and a key, from options or the environment', () => {
    expect(() => createClient({ env: {} })).toThrow(/SERVICE_URL/);
    expect(() => createClient({ env: { SERVICE_URL: 'http://svc/v1' } })).toThrow(/SERVICE_API_KEY/);
    expect(() => createClient({ env: { SERVICE_URL: 'http://svc/v1', SERVICE_API_KEY: 'k' } })).not.toThrow();
  });

  it('sends the key, and reads a run, a page and its cursor', async () => {
    answers = [ok({ id: 'run_1', status: 'succeeded', result: 42 }), ok([{ id: 'run_1' }], 200, { 'x-next-cursor': 'c2' }), ok([{ id: 'run_0' }])];
    expect((await client.runs.get('run_1')).result).toBe(42);
    expect(await client.runs.list({ app: 'shop', status: 'failed', limit: 5 })).toEqual({ runs: [{ id: 'run_1' }], nextCursor: 'c2' });
    expect(await client.runs.list({ cursor: 'c2', since: new Date(Date.UTC(2026, 0, 2)) })).toEqual({ runs: [{ id: 'run_0' }] });
    expect(seen.map((s) => decodeURIComponent(s.url))).toEqual(['/v1/runs/run_1', '/v1/runs?app=shop&status=failed&limit=5', '/v1/runs?cursor=c2&since=2026-01-02T00:00:00.000Z']);
    expect(seen[0]!.headers.authorization).toBe('Bearer sk_test');
  });

  it('reads every page of runs with `all`, following the cursor', async () => {
    answers = [ok([{ id: 'run_3' }, { id: 'run_2' }], 200, { 'x-next-cursor': 'c1' }), ok([{ id: 'run_1' }])];
    const ids: string[] = [];
    for await (const r of client.runs.all({ workflow: 'w', limit: 2 })) ids.push(r.id);
    expect(ids).toEqual(['run_3', 'run_2', 'run_1']);
    expect(seen.map((s) => s.url)).toEqual(['/v1/runs?workflow=w&limit=2', '/v1/runs?workflow=w&limit=2&cursor=c1']);
  });

  it('throws the error body as ApiError, at once for a 4xx', async () => {
    answers = [(_req, res) => json(res, 404, { error: { code: 'run_not_found', message: 'No such run.' } })];
    const err = await client.runs.get('run_x').catch((e: unknown) => e);
    expect(isApiError(err) && { status: err.status, code: err.code, message: err.message }).toEqual({ status: 404, code: 'run_not_found', message: 'No such run.' });
    expect(seen).toHaveLength(1);
    answers = [(_req, res) => (res.writeHead(400), res.end('<html>bad</html>'))];
    await expect(client.runs.steps('run_x')).rejects.toMatchObject({ status: 400, code: 'http_400' });
  });

  it('retries a read through a reset connection and a 503, up to maxAttempts', async () => {
    answers = [reset, unavailable, ok({ id: 'run_1', status: 'queued' })];
    expect((await client.runs.get('run_1')).status).toBe('queued');
    expect(seen).toHaveLength(3);
    seen = [];
    answers = [unavailable, unavailable, unavailable, ok({})];
    await expect(client.runs.get('run_1')).rejects.toMatchObject({ status: 503, code: 'service_unavailable' });
    expect(seen).toHaveLength(3);
  });

  it('retries a replay under one Idempotency-Key (drawn per call, or yours), and never a cancel', async () => {
    answers = [reset, ok({ id: 'run_2', status: 'queued' }, 201)];
    expect((await client.runs.replay('run_1', { input: { v: 2 } })).id).toBe('run_2');
    const [first, second] = seen;
    expect(first!.headers['idempotency-key']).toMatch(/^[0-9a-f-]{36}$/);
    expect(second!.headers['idempotency-key']).toBe(first!.headers['idempotency-key']);
    expect(JSON.parse(second!.body)).toEqual({ input: { v: 2 } });

    seen = [];
    answers = [ok({ id: 'run_3' }, 201), unavailable, ok({ id: 'run_4' }, 201)];
    await client.runs.replay('run_1');
    await client.runs.retryFromStep('run_1', 'b', { idempotencyKey: 'mine-1' });
    expect(seen[0]!.body).toBe('');
    expect(seen[0]!.headers['idempotency-key']).not.toBe(first!.headers['idempotency-key']);
    expect(seen.slice(1).map((s) => [s.headers['idempotency-key'], s.body])).toEqual([
      ['mine-1', '{"step":"b"}'],
      ['mine-1', '{"step":"b"}'],
    ]);

    seen = [];
    answers = [unavailable, ok({})];
    await expect(client.runs.cancel('run_1')).rejects.toMatchObject({ status: 503 });
    expect(seen).toHaveLength(1);
  });

  it('retries a send only when every event has a dedupeId, or it has an Idempotency-Key', async () => {
    answers = [unavailable];
    await expect(client.send({ name: 'a' })).rejects.toMatchObject({ status: 503 });
    expect(seen).toHaveLength(1);
    answers = [reset, ok({ id: 'evt_1', runId: 'run_1' }, 202)];
    expect((await client.send({ name: 'a', dedupeId: 'd1' })).runId).toBe('run_1');
    answers = [unavailable, ok({ id: 'evt_3' }, 202)];
    expect((await client.send({ name: 'a' }, { idempotencyKey: 'order-1' })).id).toBe('evt_3');
    expect(seen.slice(-2).map((s) => s.headers['idempotency-key'])).toEqual(['order-1', 'order-1']);
    answers = [ok({ results: [{ id: 'evt_2' }, { error: { code: 'invalid_event', message: 'name' } }] }, 202)];
    expect(await client.sendMany([{ name: 'a' }, { name: '' }])).toEqual([{ id: 'evt_2' }, { error: { code: 'invalid_event', message: 'name' } }]);
    expect(JSON.parse(seen.at(-1)!.body)).toEqual([{ name: 'a' }, { name: '' }]);
  });

  it("follows a run's stream, resuming after the last frame when it drops, until the run ends", async () => {
    const sse = (frames: object[], end: 'close' | 'drop'): Handler => (req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': hello\n\n');
      for (const f of frames) res.write(`id: ${(f as { seq: number }).seq}\r\nevent: x\r\ndata: ${JSON.stringify(f)}\r\n\r\n`);
      if (end === 'close') res.end();
      else setTimeout(() => req.socket.destroy(), 20);
    };
    const frame = (seq: number, status: string) => ({ kind: 'run_status', seq, ts: 't', runId: 'run_1', status });
    answers = [
      sse([frame(1, 'queued'), frame(2, 'running')], 'drop'),
      unavailable,
      sse([frame(3, 'waiting')], 'close'),
      sse([frame(4, 'running'), frame(5, 'succeeded')], 'close'),
    ];
    const frames0: number[] = [];
    for await (const f of client.runs.stream('run_1')) frames0.push(f.seq);
    expect(frames0).toEqual([1, 2, 3, 4, 5]);
    expect(seen.map((s) => s.url)).toEqual([
      '/v1/runs/run_1/stream?from=0',
      '/v1/runs/run_1/stream?from=2',
      '/v1/runs/run_1/stream?from=2',
      '/v1/runs/run_1/stream?from=3',
    ]);

    seen = [];
    answers = [sse([frame(6, 'queued'), frame(7, 'cancelled'), frame(8, 'running')], 'close')];
    const frames: number[] = [];
    for await (const f of client.runs.stream('run_1', { from: 5 })) frames.push(f.seq);
    expect(frames).toEqual([6, 7]);
  });

  it('waits for a run to end: asks again while it has not, through a transient failure', async () => {
    answers = [ok({ id: 'run_1', status: 'running' }), unavailable, ok({ id: 'run_1', status: 'waiting' }), ok({ id: 'run_1', status: 'succeeded', result: 'done' })];
    const got = await client.runs.wait('run_1');
    expect(got.result).toBe('done');
    expect(seen.map((s) => s.url)).toEqual(Array(4).fill('/v1/runs/run_1/wait?timeoutMs=60000'));
  });

  it('wait gives up after its timeout, asking the service to hold each call no longer than what is left', async () => {
    const holding: Handler = (req, res, body) => void setTimeout(() => ok({ id: 'run_1', status: 'running' })(req, res, body), 150);
    answers = [holding, holding, holding];
    await expect(client.runs.wait('run_1', { timeoutMs: 200 })).rejects.toMatchObject({ name: 'TimeoutError' });
    const asked = seen.map((s) => Number(new URL(s.url, 'http://x').searchParams.get('timeoutMs')));
    expect(asked.length).toBeGreaterThanOrEqual(2);
    expect(asked[0]).toBeLessThanOrEqual(200);
    expect(asked.at(-1)!).toBeLessThan(asked[0]!);
  });
});
