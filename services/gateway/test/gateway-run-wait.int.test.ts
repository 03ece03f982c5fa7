import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { notFound } from '@dws/protocol';
import { ids, subjects } from '@dws/runtime';
import { expectFastPathAsExpress, http, infraAvailable, startTestGateway, type TestGateway } from './harness.js';

const d = infraAvailable ? describe : describe.skip;
const enc = new TextEncoder();
const WS = 'ws_default';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface StoredRun {
  status: string;
  seq: number;
  result?: unknown;
}

/**
 * GET /v1/runs/{id}/wait on real NATS, with a stand-in scheduler whose
 * storage is a map: a status is "committed" to it, then emitted on the run's
 * live subject as the engine does (or not, to play a lost message).
 */
d('gateway GET /runs/{id}/wait', () => {
  let g: TestGateway;
  const runs = new Map<string, StoredRun>();
  const reads = new Map<string, number>();

  const commit = (runId: string, status: string, opts: { result?: unknown; emit?: boolean } = {}) => {
    const run = runs.get(runId) ?? { status, seq: 0 };
    run.status = status;
    run.seq++;
    if ('result' in opts) run.result = opts.result;
    runs.set(runId, run);
    const frame = { kind: 'run_status', status, seq: run.seq, ts: new Date().toISOString(), runId, attempt: 1 };
    if (opts.emit !== false) g.bus.emit(subjects.runTimeline(WS, runId), enc.encode(JSON.stringify(frame)));
  };
  /** The wait's answer, and how long it took. */
  const wait = async (path: string, key = g.secretKey) => {
    const t0 = Date.now();
    const r = await http(g.base, 'GET', path, { key });
    return { ...r, ms: Date.now() - t0 };
  };

  beforeAll(async () => {
    g = await startTestGateway({ gateway: { streams: { resyncMs: 400 } } });
    g.stub('scheduler', {
      async 'runs.get'({ caller, params }) {
        reads.set(params.id!, (reads.get(params.id!) ?? 0) + 1);
        const run = caller.workspaceId === WS ? runs.get(params.id!) : undefined;
        if (!run) throw notFound('run');
        return { body: { id: params.id, status: run.status, ...(run.result !== undefined ? { result: run.result } : {}) } };
      },
    });
  }, 60_000);
  afterAll(() => g?.stop(), 30_000);

  it('answers at once with a run that has ended, its result included', async () => {
    const id = ids.run();
    commit(id, 'running');
    commit(id, 'succeeded', { result: { ok: 1 } });
    const r = await wait(`/v1/runs/${id}/wait`);
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toMatch(/^application\/json/);
    expect(r.body).toEqual({ id, status: 'succeeded', result: { ok: 1 } });
    expect(r.ms).toBeLessThan(1000);
  });

  it('answers as the run ends, read once more for its result', async () => {
    const id = ids.run();
    commit(id, 'running');
    const pending = wait(`/v1/runs/${id}/wait?timeoutMs=20000`);
    await sleep(300);
    commit(id, 'failed', { result: 'boom' });
    const r = await pending;
    expect(r.body).toEqual({ id, status: 'failed', result: 'boom' });
    expect(r.ms).toBeGreaterThanOrEqual(300);
    expect(r.ms).toBeLessThan(2000);
    // One read on arrival (this gateway did not see the run begin), one for the end.
    expect(reads.get(id)).toBe(2);
  });

  it('answers with the run as it is once timeoutMs has passed', async () => {
    const id = ids.run();
    commit(id, 'running');
    const r = await wait(`/v1/runs/${id}/wait?timeoutMs=600`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ id, status: 'running' });
    expect(r.ms).toBeGreaterThanOrEqual(550);
    expect(r.ms).toBeLessThan(2000);
    const now = await wait(`/v1/runs/${id}/wait?timeoutMs=0`);
    expect(now.body).toEqual({ id, status: 'running' });
    expect(now.ms).toBeLessThan(500);
  });

  it('answers within the resync interval when the end frame was lost on the bus', async () => {
    const id = ids.run();
    commit(id, 'running');
    const pending = wait(`/v1/runs/${id}/wait?timeoutMs=20000`);
    await sleep(100);
    commit(id, 'cancelled', { emit: false });
    const r = await pending;
    expect(r.body).toEqual({ id, status: 'cancelled' });
    expect(r.ms).toBeLessThan(2000);
  });

  it('refuses what the run read refuses, and a bad timeoutMs, with the error body; the fast path and express alike', async () => {
    const id = ids.run();
    commit(id, 'succeeded', { result: 2 });
    const cases: [string, string | undefined][] = [
      [`/v1/runs/${id}/wait`, g.publicKey],
      [`/v1/runs/${id}/wait?timeoutMs=0`, g.secretKey],
      [`/v1/runs/${id}/wait?timeoutMs=`, g.secretKey],
      [`/v1/runs/${id}/wait?timeoutMs=soon`, g.secretKey],
      [`/v1/runs/${id}/wait?timeoutMs=-1`, g.secretKey],
      [`/v1/runs/${id}/wait?timeoutMs=1.5`, g.secretKey],
      [`/v1/runs/${id}/wait?timeoutMs=999999999`, g.secretKey],
      [`/v1/runs/${id}/wait`, undefined],
      [`/v1/runs/${id}/wait`, 'sk_nope'],
      ['/v1/runs/run_nothing_here/wait?timeoutMs=0', g.secretKey],
    ];
    await expectFastPathAsExpress(g.base, cases);
    expect((await http(g.base, 'GET', `/v1/runs/${id}/wait?timeoutMs=soon`, { key: g.secretKey })).body).toMatchObject({ error: { code: 'invalid_timeoutms' } });
    expect((await http(g.base, 'GET', `/v1/runs/${id}/wait?timeoutMs=999999999`, { key: g.secretKey })).body).toEqual({ id, status: 'succeeded', result: 2 });
    const missing = await http(g.base, 'GET', '/v1/runs/run_nothing_here/wait', { key: g.secretKey });
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ error: { code: 'run_not_found' } });
  });

  it('stops reading for a client that went away', async () => {
    const id = ids.run();
    commit(id, 'running');
    const ac = new AbortController();
    const { request } = await import('undici');
    const gone = request(`${g.base}/v1/runs/${id}/wait?timeoutMs=20000`, { headers: { authorization: `Bearer ${g.secretKey}` }, signal: ac.signal }).catch(() => undefined);
    await sleep(200);
    ac.abort();
    await gone;
    const before = reads.get(id);
    // Without the client, the resync interval (400 ms) reads nothing more.
    await sleep(1000);
    expect(reads.get(id)).toBe(before);
  });

  it('answers a wait in progress with the run as it is when the gateway drains, and its stop does not wait for the connection', async () => {
    const other = await g.replica();
    const id = ids.run();
    commit(id, 'running');
    const onMain = wait(`/v1/runs/${id}/wait?timeoutMs=20000`);
    const onOther = http(other.base, 'GET', `/v1/runs/${id}/wait?timeoutMs=20000`, { key: g.secretKey });
    await sleep(200);
    const t0 = Date.now();
    await other.stop();
    expect(Date.now() - t0).toBeLessThan(2000);
    const drained = await onOther;
    expect(drained.status).toBe(200);
    expect(drained.body).toEqual({ id, status: 'running' });
    commit(id, 'succeeded');
    expect((await onMain).body).toEqual({ id, status: 'succeeded' });
  });
});
