import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';
import { sse } from '@dws/testing';

const ADMIN = `admin-${randomBytes(8).toString('hex')}`;
const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];

/**
 * Tenancy through the public API: workspace A (default, with a runner and
 * finished runs) and workspace B (made with the admin API). Every read and
 * write endpoint that names an id is tried with B's keys on A's ids, and
 * the other way round: all 404, and B's lists show none of A's data.
 */
describe.each(modes)('tenancy on %s', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;
  let b: { id: string; secretKey: string; publicKey: string; consoleKey: string };
  const a: { runId?: string; eventId?: string; replayId?: string } = {};

  beforeAll(async () => {
    dep = await startDeployment(mode, { env: { SERVICE_ADMIN_TOKEN: ADMIN } });
    runner = await startRunner(dep, (r) => {
      r.workflow('tenant-flow', { triggers: [{ event: 'tenant.go' }] }, async ({ step, logger }) => {
        logger.info('starting');
        const one = await step.run('one', () => 1);
        return { one };
      });
    });
    const made = await api(dep.base, 'POST', '/v1/admin/workspaces', { key: ADMIN, body: { name: 'tenant-b' } });
    expect(made.status).toBe(201);
    b = made.body;
    const ev = await eventually('a run of A', async () => {
      const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'tenant.go', data: { n: 1 } } });
      return r.body.runId ? r.body : undefined;
    });
    a.runId = ev.runId;
    a.eventId = ev.id;
    await eventually('the run to succeed', async () => {
      const r = await api(dep.base, 'GET', `/v1/runs/${a.runId}`, { key: dep.secretKey });
      return runReached(r.body) ? true : undefined;
    });
    const replay = await api(dep.base, 'POST', `/v1/runs/${a.runId}/replay`, { key: dep.secretKey });
    expect(replay.status).toBe(201);
    a.replayId = replay.body.id;
  }, 180_000);

  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
  }, 60_000);

  it("reads and writes another workspace's run, event and step ids as 404", async () => {
    const idRoutes: [string, string, unknown?][] = [
      ['GET', `/v1/runs/${a.runId}`],
      ['GET', `/v1/runs/${a.runId}/steps`],
      ['GET', `/v1/runs/${a.runId}/logs`],
      ['GET', `/v1/runs/${a.replayId}`],
      ['POST', `/v1/runs/${a.runId}/cancel`],
      ['POST', `/v1/runs/${a.runId}/pause`],
      ['POST', `/v1/runs/${a.runId}/resume`],
      ['POST', `/v1/runs/${a.runId}/replay`, { input: { evil: true } }],
      ['POST', `/v1/runs/${a.runId}/retry-from-step`, { step: 'one' }],
      ['GET', `/v1/events/${a.eventId}`],
    ];
    // All at once: A's ids are fresh, so each 404 comes only after the gateway's read-your-writes wait (~1 s).
    const probes = [b.secretKey, b.publicKey, b.consoleKey].flatMap((key) =>
      idRoutes.map(async ([method, path, body]) => {
        const r = await api(dep.base, method as 'GET', path, { key, body });
        const expected = method === 'POST' && key === b.publicKey ? 403 : 404;
        return { got: { path, key: key.slice(0, 3), status: r.status, code: typeof r.body.error?.code }, want: { path, key: key.slice(0, 3), status: expected, code: 'string' } };
      }),
    );
    // The stream waits a few seconds for a run this fresh (it may just not be stored yet), then 404 all the same.
    const stream = sse(dep.base, `/v1/runs/${a.runId}/stream`, { key: b.publicKey });
    for (const { got, want } of await Promise.all(probes)) expect(got).toEqual(want);
    expect((await stream).status).toBe(404);
    // A's own keys still see them.
    expect((await api(dep.base, 'GET', `/v1/runs/${a.runId}/steps`, { key: dep.publicKey })).status).toBe(200);
  }, 60_000);

  it("lists none of another workspace's data", async () => {
    const lists: [string, (body: any) => unknown][] = [
      ['/v1/runs', (x) => x],
      [`/v1/runs?eventId=${a.eventId}`, (x) => x],
      [`/v1/runs?replayOf=${a.runId}`, (x) => x],
      [`/v1/runs?q=${a.runId}`, (x) => x],
      ['/v1/runs?q=tenant&deep=1', (x) => x],
      ['/v1/events', (x) => x],
      ['/v1/runners', (x) => x],
      ['/v1/workflows', (x) => x],
      ['/v1/control-actions', (x) => x],
      [`/v1/control-actions?runId=${a.runId}`, (x) => x],
    ];
    for (const [path, pick] of lists) {
      const r = await api(dep.base, 'GET', path, { key: b.publicKey });
      expect({ path, status: r.status, body: pick(r.body) }).toEqual({ path, status: 200, body: [] });
      const mine = await api(dep.base, 'GET', path, { key: dep.publicKey });
      expect({ path, status: mine.status }).toEqual({ path, status: 200 });
    }
    expect((await api(dep.base, 'GET', '/v1/runs/stats', { key: b.publicKey })).body).toEqual({ total: 0, active: 0, succeeded: 0, failed: 0, successRate: 100 });
    expect((await api(dep.base, 'GET', '/v1/runs/stats', { key: dep.publicKey })).body.total).toBeGreaterThanOrEqual(2);
    const bulk = await api(dep.base, 'POST', '/v1/runs/bulk-replay', { key: b.secretKey, body: { workflow: 'tenant-flow' } });
    expect(bulk.status).toBe(200);
    expect(bulk.body).toMatchObject({ matched: 0, replayed: 0 });
  }, 60_000);

  it("a replay (or an event) retried with its Idempotency-Key is the run the first made (dropped), in its own workspace only", async () => {
    const key = `replay-${randomBytes(6).toString('hex')}`;
    const replay = (k: string) => api(dep.base, 'POST', `/v1/runs/${a.runId}/replay`, { key: k, headers: { 'idempotency-key': key } });
    const first = await replay(dep.secretKey);
    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await Promise.all([replay(dep.secretKey), replay(dep.secretKey)]);
    for (const r of again) {
      expect({ status: r.status, id: r.body.id, replayed: r.headers['idempotent-replayed'] }).toEqual({ status: 201, id: first.body.id, replayed: 'true' });
    }
    expect((await replay(b.secretKey)).status).toBe(404);
    const forks = (await api(dep.base, 'GET', `/v1/runs?replayOf=${a.runId}`, { key: dep.secretKey })).body as { id: string }[];
    expect(forks.map((r) => r.id).sort()).toEqual([a.replayId, first.body.id].sort());
    const other = await api(dep.base, 'POST', `/v1/runs/${a.runId}/retry-from-step`, { key: dep.secretKey, body: { step: 'one' }, headers: { 'idempotency-key': key } });
    expect({ status: other.status, code: other.body.error?.code }).toEqual({ status: 422, code: 'idempotency_key_reused' });
    await eventually('the replay to succeed', async () => {
      const r = await api(dep.base, 'GET', `/v1/runs/${first.body.id}`, { key: dep.secretKey });
      return runReached(r.body) ? true : undefined;
    });

    // POST /events takes it as the event's dedupeId: sent again, dropped; another workspace's is its own.
    const send = (k: string) => api(dep.base, 'POST', '/v1/events', { key: k, body: { name: 'tenant.go', data: { n: 3 } }, headers: { 'idempotency-key': key } });
    const once = await send(dep.secretKey);
    expect(once.body).toMatchObject({ deduped: false, runId: expect.any(String) });
    const twice = await send(dep.secretKey);
    expect(twice.body).toMatchObject({ deduped: true, triggered: [] });
    expect((await send(b.secretKey)).body).toMatchObject({ deduped: false });
    await eventually('the event\'s run to succeed', async () => {
      const r = await api(dep.base, 'GET', `/v1/runs/${once.body.runId}`, { key: dep.secretKey });
      return runReached(r.body) ? true : undefined;
    });
  }, 60_000);

  it('keeps the other direction closed too', async () => {
    const ev = await api(dep.base, 'POST', '/v1/events', { key: b.secretKey, body: { name: 'tenant.go', data: { from: 'b' } } });
    expect(ev.status).toBe(202);
    expect(ev.body.triggered).toEqual([]); // B has no workflows: A's trigger must not fire
    expect((await api(dep.base, 'GET', `/v1/events/${ev.body.id}`, { key: dep.secretKey })).status).toBe(404);
    expect((await api(dep.base, 'GET', `/v1/events/${ev.body.id}`, { key: b.secretKey })).status).toBe(200);
    const aEvents = (await api(dep.base, 'GET', '/v1/events', { key: dep.secretKey })).body as { id: string }[];
    expect(aEvents.map((e) => e.id)).not.toContain(ev.body.id);
  });
});
