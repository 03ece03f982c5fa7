import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { uniqueName } from '@dws/testing';
import { modes, sleep, startHarness, storedStarts, until, type Harness } from './harness.js';

jest.setTimeout(60_000);

const N = 500;
const USERS = ['u0', 'u1', 'u2', 'u3', 'u4'];

/** N single-event requests at once, as N clients would send them. */
const burst = (h: Harness, name: string, app: string, data: (i: number) => unknown) =>
  Promise.all(Array.from({ length: N }, (_, i) => h.send({ name, app, data: data(i) })));

const countBy = <T>(xs: T[], f: (x: T) => string) => xs.reduce((m, x) => m.set(f(x), (m.get(f(x)) ?? 0) + 1), new Map<string, number>());

describe.each(modes())('flow control under concurrent load (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode);
  }, 60_000);
  afterAll(() => h?.close());

  const setup = async (cfg: Record<string, unknown>) => {
    const app = uniqueName('app');
    await h.register(app, [{ name: 'wf', triggers: [{ event: 'go' }], ...cfg }]);
    return app;
  };

  it(`rateLimit: ${N} events at once against limit 10 per key start exactly 10 per key; the rest are dropped`, async () => {
    const app = await setup({ rateLimit: { limit: 10, period: '1h', key: 'event.data.user' } });
    const res = await burst(h, 'go', app, (i) => ({ user: USERS[i % USERS.length], i }));
    expect(res.every((r) => r.status === 202)).toBe(true);
    const started = res.filter((r) => r.body.runId);
    const dropped = res.filter((r) => r.body.dropped);
    expect(started).toHaveLength(10 * USERS.length);
    expect(dropped).toHaveLength(N - 10 * USERS.length);
    for (const d of dropped) expect(d.body.triggered).toEqual([expect.objectContaining({ workflow: 'wf', dropped: true })]);
    for (const d of dropped) expect(d.body.triggered[0].runId).toBeUndefined();
    const runs = await h.waitStarts(() => h.startsOf('wf').filter((s) => s.cmd.app === app).length === 10 * USERS.length);
    const mine = runs.filter((s) => s.cmd.app === app);
    expect([...countBy(mine, (s) => s.input.user).values()]).toEqual(USERS.map(() => 10));
    // Exactly: every StartRun ingest published, read to a marker (a rate-limited start is never deferred).
    expect((await storedStarts(h)).filter((c) => c.app === app)).toHaveLength(10 * USERS.length);
  });

  it('rateLimit holds across array requests that lock keys in opposite orders (deadlocks retried, never a 500)', async () => {
    const app = await setup({ rateLimit: { limit: 3, period: '1h', key: 'event.data.user' } });
    const res = await Promise.all(
      Array.from({ length: 30 }, (_, i) => {
        const order = i % 2 ? [...USERS] : [...USERS].reverse();
        return h.send(Array.from({ length: 50 }, (_, j) => ({ name: 'go', app, data: { user: order[j % order.length] } })));
      }),
    );
    expect(res.map((r) => r.status)).toEqual(res.map(() => 202));
    const results = res.flatMap((r) => r.body.results);
    expect(results.filter((x: any) => x.runId)).toHaveLength(3 * USERS.length);
  });

  it(`throttle: ${N} events at once all start, spread to one per interval; none dropped`, async () => {
    const app = await setup({ throttle: { limit: 20, period: '1s' } });
    const res = await burst(h, 'go', app, (i) => ({ i }));
    expect(res.every((r) => r.body.runId && !r.body.dropped)).toBe(true);
    const mine = (await h.waitStarts(() => h.startsOf('wf').filter((s) => s.cmd.app === app).length === N)).filter((s) => s.cmd.app === app);
    const later = mine.map((s) => Number(s.cmd.notBeforeMs)).filter((t) => t > 0).sort((a, b) => a - b);
    // The first runs start at once; every later one waits its turn, 50 ms (1 s / 20) after the one before.
    expect(later.length).toBeGreaterThan(N / 2);
    for (let i = 1; i < later.length; i++) expect(later[i]! - later[i - 1]!).toBeGreaterThanOrEqual(50);
    expect(later.at(-1)! - later[0]!).toBeGreaterThanOrEqual((later.length - 1) * 50);
  });

  it(`debounce: ${N} events at once on ${USERS.length} keys coalesce into one run per key, carrying one of its events`, async () => {
    // A window of 2 s: a key whose events stalled past a 400 ms one on a loaded CI machine got a second run, as debounce should.
    const app = await setup({ debounce: { period: '2s', key: 'event.data.user' } });
    const res = await burst(h, 'go', app, (i) => ({ user: USERS[i % USERS.length], i }));
    expect(res.every((r) => r.body.debounced && r.body.triggered[0].debounced)).toBe(true);
    const runIdsByUser = countBy(res, (r) => `${r.body.triggered[0].runId}`);
    expect(runIdsByUser.size).toBe(USERS.length);
    const mine = (await h.waitStarts(() => h.startsOf('wf').filter((s) => s.cmd.app === app).length === USERS.length)).filter((s) => s.cmd.app === app);
    for (const s of mine) {
      const from = res.find((r) => r.body.id === s.cmd.eventId)!;
      expect(from.body.triggered[0].runId).toBe(s.cmd.runId);
      expect(s.input.user).toBe(USERS[s.input.i % USERS.length]);
    }
    // Exactly: once no debounce buffer of the app is left to fire, every StartRun ingest published, read to a marker.
    await until(async () => (await h.db.query('select 1 from ingest.debounces where app = $1', [app])).length === 0, 10_000, 'the debounce buffers to fire');
    expect((await storedStarts(h)).filter((c) => c.app === app)).toHaveLength(USERS.length);
  });

  it('debounce: the last event wins, and timeout bounds the wait under a steady stream', async () => {
    const app = await setup({ debounce: { period: '300ms', timeout: '1s' } });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await h.send({ name: 'go', app, data: { i } })).body.runId);
    expect(new Set(ids).size).toBe(1);
    const [first] = await h.waitStarts(() => h.startsOf('wf').some((s) => s.cmd.app === app));
    expect(h.startsOf('wf').find((s) => s.cmd.app === app)!.input).toEqual({ i: 2 });
    expect(first).toBeDefined();
    // Events every 100 ms never leave a 300 ms quiet period; the 1 s timeout still fires runs.
    const t0 = Date.now();
    while (Date.now() - t0 < 2600) {
      await h.send({ name: 'go', app, data: { t: Date.now() - t0 } });
      await sleep(100);
    }
    await until(() => h.startsOf('wf').filter((s) => s.cmd.app === app).length >= 3, 5000, 'timeout-fired runs');
  });

  it(`batchEvents: ${N} events at once become runs of exactly maxSize events, each event in exactly one run`, async () => {
    const app = await setup({ batchEvents: { maxSize: 10, timeout: '5s' } });
    const res = await burst(h, 'go', app, (i) => ({ i }));
    expect(res.every((r) => r.body.batched && r.body.runId)).toBe(true);
    const mine = (await h.waitStarts(() => h.startsOf('wf').filter((s) => s.cmd.app === app).length === N / 10)).filter((s) => s.cmd.app === app);
    const seen = new Set<number>();
    for (const s of mine) {
      expect(s.cmd.batch).toBe(true);
      expect(s.input).toHaveLength(10);
      expect(s.cmd.eventId).toBe(s.input[0].id);
      for (const e of s.input) {
        expect(e).toMatchObject({ id: expect.stringMatching(/^evt_/), name: 'go', ts: expect.any(Number) });
        seen.add(e.data.i);
        // The answer to each event named the run it landed in.
        expect(res.find((r) => r.body.id === e.id)!.body.runId).toBe(s.cmd.runId);
      }
    }
    expect(seen.size).toBe(N);
  });

  it('batchEvents: a batch that does not fill starts at its timeout, per key', async () => {
    const app = await setup({ batchEvents: { maxSize: 50, timeout: '500ms', key: 'event.data.user' } });
    await Promise.all(['a', 'b', 'a', 'a', 'b'].map((user, i) => h.send({ name: 'go', app, data: { user, i } })));
    const mine = (await h.waitStarts(() => h.startsOf('wf').filter((s) => s.cmd.app === app).length === 2)).filter((s) => s.cmd.app === app);
    expect(mine.map((s) => s.input.length).sort()).toEqual([2, 3]);
    for (const s of mine) expect(new Set(s.input.map((e: any) => e.data.user)).size).toBe(1);
  });

  it(`idempotency: ${N} events at once with 10 distinct keys start exactly 10 runs; the rest are deduped`, async () => {
    const app = await setup({ idempotency: 'event.data.orderId' });
    const res = await burst(h, 'go', app, (i) => ({ orderId: `o${i % 10}` }));
    expect(res.filter((r) => r.body.runId)).toHaveLength(10);
    expect(res.filter((r) => r.body.deduped && r.body.triggered[0].deduped)).toHaveLength(N - 10);
    // The event itself is recorded: only the run is deduplicated.
    expect(res.every((r) => r.body.id)).toBe(true);
    const mine = (await h.waitStarts(() => h.startsOf('wf').filter((s) => s.cmd.app === app).length === 10)).filter((s) => s.cmd.app === app);
    expect(new Set(mine.map((s) => s.input.orderId)).size).toBe(10);
    // An event without the key field is not deduplicated against others like it.
    const a = await h.send({ name: 'go', app, data: {} });
    const b = await h.send({ name: 'go', app, data: {} });
    expect(a.body.runId && b.body.runId).toBeTruthy();
  });

  it('idempotency keys are given back when a later gate drops the run', async () => {
    const app = await setup({ idempotency: 'event.data.k', rateLimit: { limit: 1, period: '1h' } });
    expect((await h.send({ name: 'go', app, data: { k: 'a' } })).body.runId).toBeDefined();
    expect((await h.send({ name: 'go', app, data: { k: 'b' } })).body).toMatchObject({ dropped: true, deduped: false });
    const rows = await h.db.query('select key from ingest.idempotency_keys where app = $1', [app]);
    expect(rows).toEqual([{ key: 'a' }]);
  });

  it(`singleton skip: ${N} events at once start one run per key while it is active; the rest are skipped`, async () => {
    const app = await setup({ singleton: { key: 'event.data.user', mode: 'skip' } });
    const finished = new Set<string>();
    const asked: any[] = [];
    // The scheduler's side of runs.activeForKey, played over what the test's scheduler received.
    h.scheduler['runs.activeForKey'] = async ({ body }) => {
      const b = body as { app: string; workflow: string; key: string; runIds: string[] };
      asked.push(b);
      const ofKey = h.startsOf(b.workflow).filter((s) => s.cmd.app === b.app && s.cmd.singletonKey === b.key);
      return {
        body: {
          active: ofKey.filter((s) => !finished.has(s.cmd.runId)).map((s) => s.cmd.runId),
          finished: b.runIds.filter((id) => finished.has(id)),
        },
      };
    };
    try {
      const res = await burst(h, 'go', app, (i) => ({ user: USERS[i % USERS.length] }));
      const started = res.filter((r) => r.body.runId);
      expect(started).toHaveLength(USERS.length);
      expect(res.filter((r) => r.body.skipped && r.body.triggered[0].skipped)).toHaveLength(N - USERS.length);
      const mine = (await h.waitStarts(() => h.startsOf('wf').filter((s) => s.cmd.app === app).length === USERS.length)).filter((s) => s.cmd.app === app);
      expect(mine.map((s) => s.cmd.singletonKey).sort()).toEqual(USERS);
      for (const s of mine) expect(s.cmd.singletonMode).toBe('skip');
      expect(asked.some((a) => a.app === app && a.workflow === 'wf' && USERS.includes(a.key))).toBe(true);
      // Still active: skipped. Finished: the next event starts a new run.
      expect((await h.send({ name: 'go', app, data: { user: 'u0' } })).body.skipped).toBe(true);
      for (const s of mine) finished.add(s.cmd.runId);
      const next = await h.send({ name: 'go', app, data: { user: 'u0' } });
      expect(next.body).toMatchObject({ skipped: false, runId: expect.any(String) });
    } finally {
      delete h.scheduler['runs.activeForKey'];
    }
  });

  it('singleton skip without the scheduler op (404): treated as none active, but events racing in one request still take turns', async () => {
    const app = await setup({ singleton: { mode: 'skip' } });
    const one = await h.send(Array.from({ length: 20 }, () => ({ name: 'go', app })));
    expect(one.body.results.filter((r: any) => r.runId)).toHaveLength(1);
    // A later event: the scheduler cannot say, so the key is free.
    expect((await h.send({ name: 'go', app })).body.runId).toBeDefined();
  });

  it('singleton cancel, concurrency and priority ride on every StartRun for the scheduler to enforce', async () => {
    const app = await setup({
      singleton: { key: 'event.data.user', mode: 'cancel' },
      concurrency: { limit: 3, key: 'event.data.user' },
      priority: { run: 'event.data.vip == true ? 100 : -5' },
    });
    const res = await burst(h, 'go', app, (i) => ({ user: USERS[i % USERS.length], vip: i % 2 === 0 }));
    expect(res.every((r) => r.body.runId && !r.body.skipped)).toBe(true);
    const mine = (await h.waitStarts(() => h.startsOf('wf').filter((s) => s.cmd.app === app).length === N)).filter((s) => s.cmd.app === app);
    for (const s of mine) {
      expect(s.cmd).toMatchObject({ singletonMode: 'cancel', singletonKey: s.input.user, concurrencyLimit: 3, concurrencyKey: s.input.user });
      expect(s.cmd.priority).toBe(s.input.vip ? 100n : -5n);
      expect(s.cmd.notBeforeMs).toBe(0n);
    }
    // A key that does not evaluate shares the '' bucket rather than escaping the limit.
    const r = await h.send({ name: 'go', app, data: {} });
    const [s] = (await h.waitStarts((x) => x.some((y) => y.cmd.runId === r.body.runId))).filter((y) => y.cmd.runId === r.body.runId);
    expect(s!.cmd).toMatchObject({ concurrencyKey: '', concurrencyLimit: 3, singletonKey: '' });
    expect(s!.cmd.priority).toBe(0n);
  });

  it('a workflow without flow control starts every one of N events at once, each exactly once', async () => {
    const app = await setup({});
    const res = await burst(h, 'go', app, (i) => ({ i }));
    const mine = (await h.waitStarts(() => h.startsOf('wf').filter((s) => s.cmd.app === app).length === N)).filter((s) => s.cmd.app === app);
    expect(new Set(mine.map((s) => s.input.i)).size).toBe(N);
    expect(new Set(res.map((r) => r.body.runId)).size).toBe(N);
  });
});
