import net from 'node:net';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { consumeOnce } from './consume.js';
import type { ApiCall } from '@dws/runtime';
import { notFound } from '@dws/protocol';
import { ids, streams, subjects } from '@dws/runtime';
import { fromBinary, WorkspaceUpsertedSchema } from '@dws/proto';
import { http, infraAvailable, startTestGateway, type TestGateway } from './harness.js';

if (!infraAvailable) console.warn('\n!!! Postgres/NATS missing: gateway API tests SKIPPED !!!\n');
const d = infraAvailable ? describe : describe.skip;

/**
 * The gateway on real Postgres and NATS, with stand-ins for the services
 * behind it answering on the real bus: authentication and tenancy, the
 * admin API, validation, forwarding with the caller, limits and errors.
 */
d('gateway API', () => {
  let g: TestGateway;
  const calls: { op: string; call: ApiCall }[] = [];
  // Runs whose StartRun is still on its way to the scheduler: the ops that name one answer 404 this many times more.
  const unstored = new Map<string, number>();
  const record = (op: string) => async (call: ApiCall) => {
    calls.push({ op, call });
    const misses = unstored.get(call.params.id ?? '') ?? 0;
    if (misses > 0) {
      unstored.set(call.params.id!, misses - 1);
      throw notFound('run');
    }
    return { body: { op, workspaceId: call.caller.workspaceId }, headers: op === 'runs.list' ? { 'x-next-cursor': 'abc' } : undefined };
  };
  const last = () => calls[calls.length - 1]!;

  beforeAll(async () => {
    g = await startTestGateway();
    const ops = ['runs.list', 'runs.get', 'runs.steps', 'runs.logs', 'runs.stats', 'runs.cancel', 'runs.pause', 'runs.resume', 'runs.replay', 'runs.retryFromStep', 'runs.bulkReplay', 'runs.bulkCancel', 'control.list'];
    g.stub('scheduler', {
      ...Object.fromEntries(ops.map((op) => [op, record(op)])),
      'runs.get': async (call) => {
        calls.push({ op: 'runs.get', call });
        if (call.params.id === 'boom') throw new Error('secret detail: password=hunter2 at /srv/app.ts:42');
        return { body: { id: call.params.id, workspaceId: call.caller.workspaceId } };
      },
    });
    g.stub('ingest', {
      'events.ingest': async (call) => {
        if ((call.body as { name?: string }).name === 'boom') throw new Error('secret detail: password=hunter2');
        return { status: 202, body: { got: call.body, ...(Object.keys(call.headers).length > 0 && { headers: call.headers }) } };
      },
      'events.list': record('events.list'),
      'events.get': record('events.get'),
    });
    g.stub('invoker', { register: record('register'), 'runners.list': record('runners.list'), 'workflows.list': record('workflows.list') });
  }, 60_000);
  afterAll(() => g?.stop(), 30_000);

  describe('authentication', () => {
    it('answers 401 without a key or with an unknown one, with the error body', async () => {
      for (const key of [undefined, 'sk_nope', 'x'.repeat(600)]) {
        const r = await http(g.base, 'GET', '/v1/runs', { key });
        expect(r.status).toBe(401);
        expect(r.body).toEqual({ error: { code: 'unauthorized', message: expect.any(String) } });
      }
      for (const authorization of ['Basic abc', 'Bearer', 'Bearer a b', `bearer  ${'x'}`]) {
        expect((await http(g.base, 'GET', '/v1/runs', { headers: { authorization } })).status).toBe(401);
      }
    });

    it('lets a public key read and refuses it every write with 403', async () => {
      expect((await http(g.base, 'GET', '/v1/runs', { key: g.publicKey })).status).toBe(200);
      for (const [path, body] of [['/v1/events', { name: 'x' }], ['/v1/runs/r1/cancel', undefined], ['/v1/runs/bulk-replay', { app: 'a' }], ['/v1/register', { app: 'a', url: 'http://x', workflows: [] }]] as const) {
        const r = await http(g.base, 'POST', path, { key: g.publicKey, body });
        expect({ path, status: r.status, code: r.body.error.code }).toEqual({ path, status: 403, code: 'key_read_only' });
      }
    });

    it("binds the key's workspace and name to every call; X-Service-Actor only counts on a console key", async () => {
      await http(g.base, 'POST', '/v1/runs/run_1/cancel', { key: g.secretKey, headers: { 'x-service-actor': 'mallory@example.com', 'x-request-id': 'req-42' } });
      expect(last().call.caller).toEqual({ workspaceId: 'ws_default', actor: 'dev-secret', keyKind: 'secret', requestId: 'req-42', suspended: false, via: 'api' });
      const ws = (await http(g.base, 'POST', '/v1/admin/workspaces', { key: g.adminToken, body: { name: 'acme' } })).body;
      await http(g.base, 'POST', '/v1/runs/run_1/pause', { key: ws.consoleKey, headers: { 'x-service-actor': 'ada@acme.test' } });
      expect(last()).toMatchObject({ op: 'runs.pause', call: { caller: { workspaceId: ws.id, actor: 'ada@acme.test', keyKind: 'console', via: 'console' }, params: { id: 'run_1' } } });
      // A console key that names nobody is an ordinary API call, acting as the key.
      await http(g.base, 'POST', '/v1/runs/run_1/resume', { key: ws.consoleKey });
      expect(last().call.caller).toMatchObject({ actor: 'console', via: 'api' });
    });
  });

  describe('admin API', () => {
    it('is closed to API keys and to a wrong token', async () => {
      expect((await http(g.base, 'POST', '/v1/admin/workspaces', { body: { name: 'x' } })).status).toBe(401);
      expect((await http(g.base, 'POST', '/v1/admin/workspaces', { key: g.secretKey, body: { name: 'x' } })).status).toBe(401);
      expect((await http(g.base, 'POST', '/v1/admin/workspaces', { key: `${g.adminToken}x`, body: { name: 'x' } })).status).toBe(401);
    });

    it('creates a workspace with working keys, announces it to the invoker, issues and revokes keys', async () => {
      const facts: { workspaceId: string; name: string; signingKey: string; suspended: boolean }[] = [];
      await g.bus.ensureStream(streams.gatewayFacts);
      const stopFacts = await consumeOnce(g.bus, subjects.workspaceUpserted, (data) => facts.push(fromBinary(WorkspaceUpsertedSchema, data)));
      const created = await http(g.base, 'POST', '/v1/admin/workspaces', { key: g.adminToken, body: { name: 'beta' } });
      expect(created.status).toBe(201);
      expect(created.body).toEqual({
        id: expect.stringMatching(/^ws_/),
        name: 'beta',
        secretKey: expect.stringMatching(/^sk_/),
        publicKey: expect.stringMatching(/^pk_/),
        consoleKey: expect.stringMatching(/^ck_/),
        signingKey: expect.any(String),
      });
      const ws = created.body;
      await http(g.base, 'GET', '/v1/runs', { key: ws.publicKey });
      expect(last().call.caller).toMatchObject({ workspaceId: ws.id, actor: 'public', keyKind: 'public' });
      await expectEventually(() => facts.some((f) => f.workspaceId === ws.id && f.signingKey === ws.signingKey && !f.suspended && f.name === 'beta'));

      const key = await http(g.base, 'POST', `/v1/admin/workspaces/${ws.id}/keys`, { key: g.adminToken, body: { kind: 'secret', name: 'ci-bot' } });
      expect(key.status).toBe(201);
      expect(key.body).toEqual({ id: expect.stringMatching(/^key_/), kind: 'secret', name: 'ci-bot', key: expect.stringMatching(/^sk_/) });
      await http(g.base, 'POST', '/v1/runs/r/cancel', { key: key.body.key });
      expect(last().call.caller).toMatchObject({ workspaceId: ws.id, actor: 'ci-bot' });
      expect((await http(g.base, 'DELETE', `/v1/admin/workspaces/${ws.id}/keys/${key.body.id}`, { key: g.adminToken })).status).toBe(204);
      expect((await http(g.base, 'GET', '/v1/runs', { key: key.body.key })).status).toBe(401);
      expect((await http(g.base, 'DELETE', `/v1/admin/workspaces/${ws.id}/keys/key_nope`, { key: g.adminToken })).status).toBe(404);
      // Another workspace's key id reads as 404 too.
      expect((await http(g.base, 'DELETE', `/v1/admin/workspaces/ws_default/keys/${String(key.body.id)}`, { key: g.adminToken })).status).toBe(404);

      for (const [path, body] of [
        ['/v1/admin/workspaces', {}],
        ['/v1/admin/workspaces', { name: '' }],
        ['/v1/admin/workspaces', { name: 'x'.repeat(257) }],
        [`/v1/admin/workspaces/${ws.id}/keys`, { kind: 'root', name: 'x' }],
        [`/v1/admin/workspaces/${ws.id}/keys`, { kind: 'secret' }],
      ] as const) {
        expect({ path, body, status: (await http(g.base, 'POST', path, { key: g.adminToken, body })).status }).toEqual({ path, body, status: 400 });
      }
      expect((await http(g.base, 'POST', '/v1/admin/workspaces/ws_nope/keys', { key: g.adminToken, body: { kind: 'public', name: 'x' } })).status).toBe(404);
      await stopFacts();
    });

    it('a key revoked or a workspace suspended on one replica bites on the others at once', async () => {
      const other = await g.replica();
      const ws = (await http(g.base, 'POST', '/v1/admin/workspaces', { key: g.adminToken, body: { name: 'delta' } })).body;
      const key = (await http(g.base, 'POST', `/v1/admin/workspaces/${ws.id}/keys`, { key: g.adminToken, body: { kind: 'secret', name: 'bot' } })).body;
      // Cached on the other replica (its key cache lives 10 s).
      expect((await http(other.base, 'GET', '/v1/runs', { key: key.key })).status).toBe(200);
      expect((await http(other.base, 'POST', '/v1/runs/r/cancel', { key: ws.secretKey })).status).toBe(200);
      expect((await http(g.base, 'DELETE', `/v1/admin/workspaces/${ws.id}/keys/${key.id}`, { key: g.adminToken })).status).toBe(204);
      await expectEventually(async () => (await http(other.base, 'GET', '/v1/runs', { key: key.key })).status === 401, 1000);
      expect((await http(g.base, 'PATCH', `/v1/admin/workspaces/${ws.id}`, { key: g.adminToken, body: { suspended: true } })).status).toBe(200);
      await expectEventually(async () => (await http(other.base, 'POST', '/v1/runs/r/replay', { key: ws.secretKey })).status === 403, 1000);
      await other.stop();
    });

    it('suspends a workspace: run-creating calls get 403, reads and other writes go on; limits merge', async () => {
      const ws = (await http(g.base, 'POST', '/v1/admin/workspaces', { key: g.adminToken, body: { name: 'gamma' } })).body;
      const patched = await http(g.base, 'PATCH', `/v1/admin/workspaces/${ws.id}`, { key: g.adminToken, body: { suspended: true, limits: { runsPerMonth: 1000 } } });
      expect(patched.status).toBe(200);
      expect(patched.body).toEqual({
        id: ws.id,
        name: 'gamma',
        suspended: true,
        suspendedReason: 'operator',
        limits: { runsPerMonth: 1000 },
        providers: {},
        retentionDays: 30,
        usage: { month: new Date().toISOString().slice(0, 7), runs: 0 },
        createdAt: expect.any(String),
      });
      for (const [path, body] of [['/v1/runs/r/replay', undefined], ['/v1/runs/r/retry-from-step', { step: 's' }], ['/v1/runs/bulk-replay', { status: 'failed' }]] as const) {
        const r = await http(g.base, 'POST', path, { key: ws.secretKey, body });
        expect({ path, status: r.status, code: r.body.error.code }).toEqual({ path, status: 403, code: 'workspace_suspended' });
      }
      expect((await http(g.base, 'GET', '/v1/runs', { key: ws.secretKey })).status).toBe(200);
      expect((await http(g.base, 'POST', '/v1/runs/r/cancel', { key: ws.secretKey })).status).toBe(200);
      const back = await http(g.base, 'PATCH', `/v1/admin/workspaces/${ws.id}`, { key: g.adminToken, body: { suspended: false, limits: { runsPerMonth: null } } });
      expect(back.body).toMatchObject({ suspended: false, suspendedReason: null, limits: {} });
      expect((await http(g.base, 'POST', '/v1/runs/r/replay', { key: ws.secretKey })).status).toBe(200);
      expect((await http(g.base, 'GET', `/v1/admin/workspaces/${ws.id}`, { key: g.adminToken })).body).toEqual(back.body);
      expect((await http(g.base, 'PATCH', '/v1/admin/workspaces/ws_nope', { key: g.adminToken, body: { suspended: true } })).status).toBe(404);
      expect((await http(g.base, 'PATCH', `/v1/admin/workspaces/${ws.id}`, { key: g.adminToken, body: { suspended: 'yes' } })).status).toBe(400);
    });

    it('sets a retention window (1..3650 days, null: the default 30), shows it and announces it whole on every change', async () => {
      const facts: { workspaceId: string; suspended: boolean; retentionDays: number }[] = [];
      await g.bus.ensureStream(streams.gatewayFacts);
      const stopFacts = await consumeOnce(g.bus, subjects.workspaceUpserted, (data) => facts.push(fromBinary(WorkspaceUpsertedSchema, data)));
      const ws = (await http(g.base, 'POST', '/v1/admin/workspaces', { key: g.adminToken, body: { name: 'kept' } })).body;
      const path = `/v1/admin/workspaces/${ws.id}`;
      expect((await http(g.base, 'GET', path, { key: g.adminToken })).body.retentionDays).toBe(30);
      await expectEventually(() => facts.some((f) => f.workspaceId === ws.id && f.retentionDays === 0));

      const set = await http(g.base, 'PATCH', path, { key: g.adminToken, body: { retentionDays: 7 } });
      expect(set).toMatchObject({ status: 200, body: { id: ws.id, retentionDays: 7, suspended: false } });
      expect((await http(g.base, 'GET', path, { key: g.adminToken })).body).toEqual(set.body);
      await expectEventually(() => facts.some((f) => f.workspaceId === ws.id && f.retentionDays === 7));
      // Another change announces the window with it (the fact is whole), and keeps it.
      expect((await http(g.base, 'PATCH', path, { key: g.adminToken, body: { suspended: true } })).body).toMatchObject({ suspended: true, retentionDays: 7 });
      await expectEventually(() => facts.some((f) => f.workspaceId === ws.id && f.suspended && f.retentionDays === 7));
      for (const days of [1, 3650]) expect((await http(g.base, 'PATCH', path, { key: g.adminToken, body: { retentionDays: days } })).body.retentionDays).toBe(days);

      for (const retentionDays of [0, -1, 3651, 1.5, 'x', '30', true, {}]) {
        const r = await http(g.base, 'PATCH', path, { key: g.adminToken, body: { retentionDays } });
        expect({ retentionDays, status: r.status, code: r.body.error?.code }).toEqual({ retentionDays, status: 400, code: expect.any(String) });
      }
      expect((await http(g.base, 'GET', path, { key: g.adminToken })).body.retentionDays).toBe(3650);

      const back = await http(g.base, 'PATCH', path, { key: g.adminToken, body: { retentionDays: null, suspended: false } });
      expect(back.body).toMatchObject({ retentionDays: 30, suspended: false });
      // The latest fact of the workspace (stream order) is back at 0: the services use the default again.
      await expectEventually(() => {
        const latest = facts.filter((f) => f.workspaceId === ws.id).at(-1);
        return latest?.retentionDays === 0 && latest.suspended === false;
      });
      expect((await http(g.base, 'GET', path, { key: g.adminToken })).body.retentionDays).toBe(30);
      expect((await http(g.base, 'PATCH', '/v1/admin/workspaces/ws_nope', { key: g.adminToken, body: { retentionDays: 5 } })).status).toBe(404);
      await stopFacts();
    });
  });

  describe('routing and validation', () => {
    it('forwards every route to its owner op with params, the validated query and the raw body', async () => {
      const cases: [string, string, unknown, string, Partial<ApiCall>][] = [
        ['GET', '/v1/runs?app=billing&status=running&limit=500&sort=duration&dir=asc&deep=1&q=x&junk=1', undefined, 'runs.list', { query: { app: 'billing', status: 'running', limit: 200, sort: 'duration', dir: 'asc', deep: '1', q: 'x' } }],
        ['GET', '/v1/runs?workflow=w&until=2024-01-01T00:00:00Z', undefined, 'runs.list', { query: { workflow: 'w', until: '2024-01-01T00:00:00Z' } }],
        ['GET', '/v1/runs/stats?app=a&since=2024-01-01T00:00:00Z', undefined, 'runs.stats', { query: { app: 'a', since: '2024-01-01T00:00:00Z' } }],
        ['GET', '/v1/runs/run_9', undefined, 'runs.get', { params: { id: 'run_9' } }],
        ['GET', '/v1/runs/run_9/steps', undefined, 'runs.steps', { params: { id: 'run_9' } }],
        ['GET', '/v1/runs/run_9/logs?from=4&limit=5000', undefined, 'runs.logs', { params: { id: 'run_9' }, query: { from: 4, limit: 1000 } }],
        ['POST', '/v1/runs/run_9/cancel', undefined, 'runs.cancel', { params: { id: 'run_9' } }],
        ['POST', '/v1/runs/run_9/replay', { input: { a: 1 } }, 'runs.replay', { params: { id: 'run_9' }, body: { input: { a: 1 } } }],
        ['POST', '/v1/runs/run_9/retry-from-step', { step: 'two' }, 'runs.retryFromStep', { body: { step: 'two' } }],
        ['POST', '/v1/runs/bulk-replay', { app: 'a', status: 'failed' }, 'runs.bulkReplay', { body: { app: 'a', status: 'failed' } }],
        ['POST', '/v1/runs/bulk-cancel', { workflow: 'w', if: 'event.data.n > 1' }, 'runs.bulkCancel', { body: { workflow: 'w', if: 'event.data.n > 1' } }],
        ['GET', '/v1/control-actions?action=cancel&runId=run_9&limit=2', undefined, 'control.list', { query: { action: 'cancel', runId: 'run_9', limit: 2 } }],
        ['GET', '/v1/events?app=a&name=n', undefined, 'events.list', { query: { app: 'a', name: 'n' } }],
        ['GET', '/v1/events/evt_1', undefined, 'events.get', { params: { id: 'evt_1' } }],
        ['GET', '/v1/runners?app=a', undefined, 'runners.list', { query: { app: 'a' } }],
        ['GET', '/v1/workflows', undefined, 'workflows.list', { query: {} }],
        ['POST', '/v1/register', { app: 'a', url: 'http://r/invoke', workflows: [{ name: 'w', extra: true }] }, 'register', { body: { app: 'a', url: 'http://r/invoke', workflows: [{ name: 'w', extra: true }] } }],
      ];
      for (const [method, path, body, op, expected] of cases) {
        const r = await http(g.base, method, path, { key: g.secretKey, body });
        expect({ path, status: r.status }).toEqual({ path, status: 200 });
        expect({ path, op: last().op }).toEqual({ path, op });
        expect(last().call).toMatchObject(expected);
      }
      const list = await http(g.base, 'GET', '/v1/runs', { key: g.secretKey });
      expect(list.headers['x-next-cursor']).toBe('abc');
      const ingest = await http(g.base, 'POST', '/v1/events', { key: g.secretKey, raw: '{"name":"a.b","data":{"n":1.50}}' });
      expect(ingest).toMatchObject({ status: 202, body: { got: { name: 'a.b', data: { n: 1.5 } } } });
    });

    it('passes an Idempotency-Key on to replay, retry-from-step, bulk replay and POST /events; a bad key is 400', async () => {
      const key = 'retry-7f3a:1';
      for (const [path, body, op] of [
        ['/v1/runs/run_9/replay', undefined, 'runs.replay'],
        ['/v1/runs/run_9/retry-from-step', { step: 'two' }, 'runs.retryFromStep'],
        ['/v1/runs/bulk-replay', { app: 'a' }, 'runs.bulkReplay'],
      ] as const) {
        const r = await http(g.base, 'POST', path, { key: g.secretKey, body, headers: { 'idempotency-key': key } });
        expect({ path, status: r.status }).toEqual({ path, status: 200 });
        expect(last()).toMatchObject({ op, call: { headers: { 'idempotency-key': key } } });
        await http(g.base, 'POST', path, { key: g.secretKey, body });
        expect(last()).toMatchObject({ op, call: { headers: {} } });
      }
      // Other routes pass no header on; cancel, pause and resume may be retried as they are.
      await http(g.base, 'POST', '/v1/runs/run_9/cancel', { key: g.secretKey, headers: { 'idempotency-key': key } });
      expect(last()).toMatchObject({ op: 'runs.cancel', call: { headers: {} } });
      // POST /events passes it on too (ingest takes it as the events' dedupeId), fast path or not.
      const forms: Record<string, string>[] = [{ 'idempotency-key': key }, { 'idempotency-key': key, 'content-encoding': 'identity' }];
      for (const headers of forms) {
        expect((await http(g.base, 'POST', '/v1/events', { key: g.secretKey, body: { name: 'a.b' }, headers })).body).toMatchObject({ headers: { 'idempotency-key': key } });
      }
      const before = calls.length;
      for (const bad of ['', 'has space', 'x'.repeat(201), 'é']) {
        const r = await http(g.base, 'POST', '/v1/runs/run_9/replay', { key: g.secretKey, headers: { 'idempotency-key': bad } });
        expect({ bad, status: r.status, code: r.body.error.code }).toEqual({ bad, status: 400, code: 'invalid_idempotency_key' });
      }
      expect(calls.length).toBe(before);
      const doc = (await http(g.base, 'GET', '/v1/openapi.json')).body;
      expect(doc.paths['/runs/{id}/replay'].post.parameters).toContainEqual(expect.objectContaining({ name: 'Idempotency-Key', in: 'header' }));
      expect(doc.paths['/runs/{id}/replay'].post.responses['422']).toBeDefined();
      expect(Object.keys(doc.paths['/runs/{id}/retry-from-step'].post.responses['201'].headers)).toEqual(['Idempotent-Replayed']);
      expect(doc.paths['/runs/{id}/cancel'].post.parameters).not.toContainEqual(expect.objectContaining({ name: 'Idempotency-Key' }));
    });

    it('a run named moments after its 202 (its StartRun still on the way) is waited for, not 404: reads and control alike', async () => {
      for (const [method, path, op] of [
        ['GET', 'steps', 'runs.steps'],
        ['POST', 'cancel', 'runs.cancel'],
        ['POST', 'pause', 'runs.pause'],
        ['POST', 'resume', 'runs.resume'],
        ['POST', 'replay', 'runs.replay'],
      ] as const) {
        const id = ids.run();
        unstored.set(id, 3);
        const before = calls.length;
        const r = await http(g.base, method, `/v1/runs/${id}/${path}`, { key: g.secretKey });
        expect({ path, status: r.status, op: last().op, tries: calls.length - before }).toEqual({ path, status: 200, op, tries: 4 });
      }
      // A run id not born moments ago is answered 404 at once.
      unstored.set('run_missing', 100);
      const before = calls.length;
      const r = await http(g.base, 'POST', '/v1/runs/run_missing/cancel', { key: g.secretKey });
      expect({ status: r.status, code: r.body.error.code, tries: calls.length - before }).toEqual({ status: 404, code: 'run_not_found', tries: 1 });
    });

    it('refuses bad parameters and bodies with 400 before any service sees them', async () => {
      const before = calls.length;
      const cases: [string, string, { body?: unknown; raw?: string }][] = [
        ['GET', '/v1/runs?limit=0', {}],
        ['GET', '/v1/runs?limit=abc', {}],
        ['GET', '/v1/runs?sort=size', {}],
        ['GET', '/v1/runs?dir=sideways', {}],
        ['GET', '/v1/runs?status=done', {}],
        ['GET', '/v1/runs?runType=child', {}],
        ['GET', '/v1/runs?since=yesterday', {}],
        ['GET', '/v1/runs?until=tomorrow', {}],
        ['GET', '/v1/runs?app=a&app=b', {}],
        ['GET', `/v1/runs?q=${'x'.repeat(300)}`, {}],
        ['GET', '/v1/runs/r/logs?from=-1', {}],
        ['GET', '/v1/control-actions?action=explode', {}],
        ['POST', '/v1/runs/r/retry-from-step', {}],
        ['POST', '/v1/runs/r/retry-from-step', { body: { step: '' } }],
        ['POST', '/v1/runs/r/replay', { body: [1] }],
        ['POST', '/v1/runs/bulk-replay', { body: {} }],
        ['POST', '/v1/runs/bulk-replay', { raw: '{"app":' }],
        ['POST', '/v1/runs/bulk-replay', { body: { status: 'running' } }],
        ['POST', '/v1/runs/bulk-replay', { body: { workflowName: 'w' } }],
        ['POST', '/v1/runs/bulk-replay', { body: { app: 'a', until: 'tomorrow' } }],
        ['POST', '/v1/runs/bulk-cancel', { body: {} }],
        ['POST', '/v1/runs/bulk-cancel', { body: { status: 'failed' } }],
        ['POST', '/v1/runs/bulk-cancel', { body: { app: 'a', wokflow: 'w' } }],
        ['POST', '/v1/runs/bulk-cancel', { body: { if: 42 } }],
        ['POST', '/v1/events', {}],
        ['POST', '/v1/events', { body: { name: '   ' } }],
        ['POST', '/v1/events', { body: [] }],
        ['POST', '/v1/events', { body: 'just a string' }],
        ['POST', '/v1/events', { body: { name: 'a', id: 'evt-1' } }],
        ['POST', '/v1/register', { body: { app: 'a' } }],
      ];
      for (const [method, path, opts] of cases) {
        const r = await http(g.base, method, path, { key: g.secretKey, ...opts });
        expect({ path, opts, status: r.status }).toEqual({ path, opts, status: 400 });
        expect(r.body).toEqual({ error: { code: expect.stringMatching(/^[a-z_]+$/), message: expect.any(String) } });
      }
      expect(calls.length).toBe(before);
      expect((await http(g.base, 'GET', '/v1/runs?limit=abc', { key: g.secretKey })).body.error.code).toBe('invalid_limit');
      const inngestId = await http(g.base, 'POST', '/v1/events', { key: g.secretKey, body: { name: 'a', id: 'evt-1', ts: 1 } });
      expect(inngestId.body.error.message).toMatch(/^body: Unknown event fields "id", "ts"; id: for an idempotent send \(Inngest's event id\) use dedupeId/);
    });

    it('answers unknown routes and methods with 404, and ids too long to exist as 404', async () => {
      for (const [method, path] of [['GET', '/v1/nope'], ['PUT', '/v1/runs'], ['DELETE', '/v1/runs/r1'], ['GET', '/v2/runs'], ['GET', '/v1/runs/r/nope'], ['POST', '/v1/runs/r/explode']] as [string, string][]) {
        const r = await http(g.base, method, path, { key: g.secretKey });
        expect({ path, method, status: r.status, code: r.body?.error?.code }).toEqual({ path, method, status: 404, code: 'route_not_found' });
      }
      expect((await http(g.base, 'GET', `/v1/runs/${'r'.repeat(300)}`, { key: g.secretKey })).status).toBe(404);
      expect((await http(g.base, 'GET', '/v1/connect', { key: g.secretKey })).body.error.code).toBe('upgrade_required');
    });
  });

  describe('the POST routes served without express (fast-routes.ts)', () => {
    it('answer exactly as express does, input by input', async () => {
      // Each request twice: as sent (the fast path takes it) and with `content-encoding: identity` (only express does).
      const cases: [string, { key?: string; raw?: string | Buffer }][] = [
        ['/v1/events', { key: g.secretKey, raw: '{"name":"a.b","data":{"n":1.50}}' }],
        ['/v1/events', { key: g.secretKey, raw: '[{"name":"a.b"},{"name":"c.d","data":null}]' }],
        ['/v1/events', { key: g.secretKey, raw: '{"name": "x",' }],
        ['/v1/events', { key: g.secretKey, raw: `${'['.repeat(100)}${']'.repeat(100)}` }],
        ['/v1/events', { key: g.secretKey, raw: Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x7d]) }],
        ['/v1/events', { key: g.secretKey, raw: '{"name":"a\\ud800"}' }],
        ['/v1/events', { key: g.secretKey, raw: '{"name":"   "}' }],
        ['/v1/events', { key: g.secretKey, raw: '' }],
        ['/v1/events', { raw: '{"name":"a.b"}' }],
        ['/v1/events', { key: 'sk_nope', raw: '{"name":"a.b"}' }],
        ['/v1/events', { key: g.publicKey, raw: '{"name":"a.b"}' }],
        ['/v1/events', { raw: '{"name":' }],
        ['/v1/events', { key: g.secretKey, raw: '{"name":"boom"}' }],
        ['/v1/register', { key: g.secretKey, raw: '{"app":"a","url":"http://r/invoke","workflows":[{"name":"w"}]}' }],
        ['/v1/register', { key: g.secretKey, raw: '{"app":"a"}' }],
      ];
      for (const [path, opts] of cases) {
        const fast = await http(g.base, 'POST', path, opts);
        const viaExpress = await http(g.base, 'POST', path, { ...opts, headers: { 'content-encoding': 'identity' } });
        const seen = (r: typeof fast) => ({ status: r.status, body: r.body, type: r.headers['content-type'], id: typeof r.headers['x-request-id'] });
        expect({ path, opts: String(opts.raw), ...seen(fast) }).toEqual({ path, opts: String(opts.raw), ...seen(viaExpress) });
      }
    });

    it('leave every other form of a request to express', async () => {
      // Another spelling of the path, a query string, a compressed body, no Content-Length: all answered as before.
      const echo = { status: 202, body: { got: { name: 'a.b' } } };
      expect(await http(g.base, 'POST', '/v1/events/', { key: g.secretKey, raw: '{"name":"a.b"}' })).toMatchObject(echo);
      expect(await http(g.base, 'POST', '/v1/EVENTS', { key: g.secretKey, raw: '{"name":"a.b"}' })).toMatchObject(echo);
      const gz = await http(g.base, 'POST', '/v1/events', { key: g.secretKey, raw: gzipSync('{"name":"a.b"}'), headers: { 'content-encoding': 'gzip' } });
      expect(gz).toMatchObject(echo);
      const chunked = await request(`${g.base}/v1/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${g.secretKey}`, 'content-type': 'application/json' },
        body: Readable.from([Buffer.from('{"name":'), Buffer.from('"a.b"}')]),
      });
      expect({ status: chunked.statusCode, body: await chunked.body.json() }).toEqual(echo);
    });
  });

  describe('limits and errors', () => {
    it('caps bodies at 1 MiB (413) and answers bad JSON with 400, both with the error body', async () => {
      const big = await http(g.base, 'POST', '/v1/events', { key: g.secretKey, raw: JSON.stringify({ name: 'big', data: 'x'.repeat(1024 * 1024) }) });
      expect(big).toMatchObject({ status: 413, body: { error: { code: 'payload_too_large' } } });
      // Just under the cap: with its envelope it is over NATS's max_payload (1 MiB here), so the
      // bus carries it (and the stub's echo of it) by claim check; it must still arrive whole.
      const nearCap = await http(g.base, 'POST', '/v1/events', { key: g.secretKey, raw: JSON.stringify({ name: 'ok', data: 'x'.repeat(1024 * 1024 - 100) }) });
      expect(nearCap.status).toBe(202);
      expect(nearCap.body.got.data).toBe('x'.repeat(1024 * 1024 - 100));
      const bad = await http(g.base, 'POST', '/v1/events', { key: g.secretKey, raw: '{"name": "x",' });
      expect(bad).toMatchObject({ status: 400, body: { error: { code: 'invalid_json' } } });
    });

    it('never sends a stack trace or an internal message; every answer carries a request id', async () => {
      const r = await http(g.base, 'GET', '/v1/runs/boom', { key: g.secretKey });
      expect(r.status).toBe(500);
      expect(r.body).toEqual({ error: { code: 'internal', message: 'Internal error.' } });
      expect(r.text).not.toMatch(/hunter2|app\.ts|at /);
      expect(r.headers['x-request-id']).toEqual(expect.any(String));
      const own = await http(g.base, 'GET', '/v1/runs', { key: g.secretKey, headers: { 'x-request-id': 'trace-me' } });
      expect(own.headers['x-request-id']).toBe('trace-me');
    });

    it('answers a service that is not there with 503 and the error body', async () => {
      const lone = await startTestGateway();
      try {
        const r = await http(lone.base, 'GET', '/v1/runs', { key: lone.secretKey });
        expect(r).toMatchObject({ status: 503, body: { error: { code: 'service_unavailable' } } });
      } finally {
        await lone.stop();
      }
    }, 30_000);

    it('answers malformed HTTP and oversized headers with a JSON error, and keeps serving', async () => {
      const raw = (text: string) =>
        new Promise<string>((resolve) => {
          const s = net.connect(Number(new URL(g.base).port), '127.0.0.1', () => s.write(text));
          let out = '';
          s.on('data', (b) => (out += b.toString()));
          s.on('close', () => resolve(out));
          s.on('error', () => resolve(out));
        });
      const garbage = await raw('GARBAGE / HTTP/1.1\r\n\r\n');
      expect(garbage).toMatch(/^HTTP\/1\.1 400/);
      expect(garbage).toContain('"error":{"code":"bad_request"');
      const huge = await raw(`GET /v1/runs HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(70_000)}\r\n\r\n`);
      expect(huge).toMatch(/^HTTP\/1\.1 431/);
      expect((await http(g.base, 'GET', '/v1/runs', { key: g.secretKey })).status).toBe(200);
    });
  });
});

d('gateway with SERVICE_AUTH=off', () => {
  let g: TestGateway;
  const seen: ApiCall[] = [];
  beforeAll(async () => {
    g = await startTestGateway({ env: { SERVICE_AUTH: 'off' } });
    g.stub('scheduler', {
      'runs.list': async (call) => (seen.push(call), { body: [] }),
      'runs.cancel': async (call) => (seen.push(call), { body: {} }),
    });
  }, 60_000);
  afterAll(() => g?.stop(), 30_000);

  it('needs no key, binds workspace default and records no key kind (decidedVia unrecorded)', async () => {
    expect((await http(g.base, 'GET', '/v1/runs')).status).toBe(200);
    expect((await http(g.base, 'POST', '/v1/runs/r/cancel', { key: 'pk_not_a_key' })).status).toBe(200);
    expect(seen.map((c) => c.caller)).toEqual([
      { workspaceId: 'ws_default', actor: 'anonymous', keyKind: 'none', requestId: expect.any(String), suspended: false, via: 'unrecorded' },
      { workspaceId: 'ws_default', actor: 'anonymous', keyKind: 'none', requestId: expect.any(String), suspended: false, via: 'unrecorded' },
    ]);
    // A real key still selects its workspace, so admin-made workspaces stay reachable.
    const ws = (await http(g.base, 'POST', '/v1/admin/workspaces', { key: g.adminToken, body: { name: 'w' } })).body;
    await http(g.base, 'GET', '/v1/runs', { key: ws.publicKey });
    expect(seen[2]!.caller).toMatchObject({ workspaceId: ws.id, keyKind: 'none' });
    // The admin API keeps its own token.
    expect((await http(g.base, 'POST', '/v1/admin/workspaces', { body: { name: 'x' } })).status).toBe(401);
  });
});

async function expectEventually(check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}
