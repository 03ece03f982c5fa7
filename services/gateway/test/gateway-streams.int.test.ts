import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { notFound } from '@dws/protocol';
import { ids, subjects } from '@dws/runtime';
import { liveEventsSubject } from '../src/handlers/streams.js';
import { expectFastPathAsExpress, http, infraAvailable, sse, startTestGateway, type TestGateway } from './harness.js';

const d = infraAvailable ? describe : describe.skip;
const enc = new TextEncoder();
const WS = 'ws_default';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Poll `pred` until it holds; fail naming `what` at the deadline. */
async function until(pred: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

interface StoredRun {
  status: string;
  frames: Record<string, unknown>[];
}

/**
 * The SSE endpoints on real NATS, with a stand-in scheduler whose storage is
 * a map: frames are "committed" to it, then emitted on the live subject
 * exactly as the engine does (or not emitted, to play a lost message).
 */
d('gateway streams', () => {
  let g: TestGateway;
  const runs = new Map<string, StoredRun>();
  let timelineCalls = 0;

  /** Commit frames (seq continues), then emit those in `emit` (default all). */
  const commit = (runId: string, frames: Record<string, unknown>[], emit: (seq: number) => boolean = () => true) => {
    const run = runs.get(`${WS}/${runId}`) ?? { status: 'queued', frames: [] };
    runs.set(`${WS}/${runId}`, run);
    for (const f of frames) {
      const frame: Record<string, unknown> = { ...f, seq: run.frames.length + 1, ts: new Date().toISOString(), runId };
      run.frames.push(frame);
      if (frame.kind === 'run_status') run.status = frame.status as string;
      if (emit(frame.seq as number)) g.bus.emit(subjects.runTimeline(WS, runId), enc.encode(JSON.stringify(frame)));
    }
  };
  const logs = (n: number) => Array.from({ length: n }, (_, i) => ({ kind: 'log', level: 'info', message: `line ${i}`, scope: '@root', attempt: 1 }));
  const status = (s: string) => ({ kind: 'run_status', status: s, attempt: 1 });
  const seqs = (events: { id?: string }[]) => events.map((e) => Number(e.id));
  const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

  beforeAll(async () => {
    g = await startTestGateway({ gateway: { streams: { heartbeatMs: 100, resyncMs: 400, pendingRunWaitMs: 3000 } } });
    g.stub('scheduler', {
      async 'runs.timeline'({ caller, params, query }) {
        timelineCalls++;
        const run = runs.get(`${caller.workspaceId}/${params.id}`);
        if (!run) throw notFound('run');
        const from = Number(query.from ?? 0);
        const limit = Number(query.limit ?? 1000);
        const terminal = ['succeeded', 'failed', 'cancelled'].includes(run.status);
        const frames = run.frames.filter((f) => (f.seq as number) > from).slice(0, limit);
        return { body: { status: run.status, terminal, more: frames.length === limit, frames } };
      },
    });
  }, 60_000);
  afterAll(() => g?.stop(), 30_000);

  it('replays a finished run from the start, or after `from` / Last-Event-ID, then ends', async () => {
    const id = ids.run();
    commit(id, [status('queued'), status('running'), ...logs(3), status('succeeded')]);
    const all = await sse(g.base, `/v1/runs/${id}/stream`, { key: g.publicKey });
    await all.ended;
    expect(all.status).toBe(200);
    expect(all.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(seqs(all.events)).toEqual(range(1, 6));
    expect(all.events.map((e) => e.event)).toEqual(['run_status', 'run_status', 'log', 'log', 'log', 'run_status']);
    expect(JSON.parse(all.events[2]!.data!)).toMatchObject({ kind: 'log', seq: 3, runId: id, message: 'line 0', ts: expect.any(String) });

    const after = await sse(g.base, `/v1/runs/${id}/stream?from=4`, { key: g.secretKey });
    await after.ended;
    expect(seqs(after.events)).toEqual([5, 6]);
    const resumed = await sse(g.base, `/v1/runs/${id}/stream?from=1`, { key: g.secretKey, headers: { 'last-event-id': '3' } });
    await resumed.ended;
    expect(seqs(resumed.events)).toEqual([4, 5, 6]);
    const past = await sse(g.base, `/v1/runs/${id}/stream?from=6`, { key: g.secretKey });
    await past.ended;
    expect(past.events).toEqual([]);
  });

  it('answers a run stream without express (fast-routes.ts) exactly as express does, request by request', async () => {
    const id = ids.run();
    commit(id, [status('queued'), status('running'), ...logs(2), status('succeeded')]);
    const cases: [string, string | undefined][] = [
      [`/v1/runs/${id}/stream`, g.secretKey],
      [`/v1/runs/${id}/stream?from=3`, g.publicKey],
      [`/v1/runs/${id}/stream?from=`, g.secretKey],
      [`/v1/runs/${id}/stream?from=abc`, g.secretKey],
      [`/v1/runs/${id}/stream?from=-1`, g.secretKey],
      [`/v1/runs/${id}/stream`, undefined],
      [`/v1/runs/${id}/stream`, 'sk_nope'],
      ['/v1/runs/run_nothing_here/stream', g.secretKey],
    ];
    await expectFastPathAsExpress(g.base, cases);
  });

  it('tails live frames after the backlog and ends at the terminal frame, each frame once', async () => {
    const id = ids.run();
    commit(id, [status('queued'), status('running')]);
    const s = await sse(g.base, `/v1/runs/${id}/stream`, { key: g.secretKey });
    await s.waitFor(2);
    commit(id, logs(20));
    commit(id, [status('failed')]);
    await s.ended;
    expect(seqs(s.events)).toEqual(range(1, 23));
    expect(s.events[22]).toMatchObject({ event: 'run_status' });
  });

  it('fills a lost live frame from storage, and ends on a lost terminal frame within the resync interval', async () => {
    const id = ids.run();
    commit(id, [status('running')]);
    const s = await sse(g.base, `/v1/runs/${id}/stream`, { key: g.secretKey });
    await s.waitFor(1);
    commit(id, logs(5), (seq) => seq !== 3 && seq !== 4); // 3 and 4 lost on the bus
    await s.waitFor(6);
    expect(seqs(s.events)).toEqual(range(1, 6));
    commit(id, [status('succeeded')], () => false); // the terminal frame is lost too
    const t0 = Date.now();
    await s.ended;
    expect(seqs(s.events)).toEqual(range(1, 7));
    expect(Date.now() - t0).toBeLessThan(3000);
  });

  it('a client that drops mid-stream and reconnects with `from` gets every frame exactly once', async () => {
    const id = ids.run();
    commit(id, [status('running')]);
    let producing = true;
    const producer = (async () => {
      for (let i = 0; i < 300 && producing; i++) {
        commit(id, logs(1));
        if (i % 10 === 0) await sleep(5);
      }
      commit(id, [status('succeeded')]);
    })();
    const got: number[] = [];
    let from = 0;
    // Drop the connection three times at different points, as a flaky network would.
    for (const dropAfter of [40, 90, 35]) {
      const s = await sse(g.base, `/v1/runs/${id}/stream?from=${from}`, { key: g.secretKey });
      await s.waitFor(dropAfter, 15_000);
      s.close();
      await s.ended;
      got.push(...seqs(s.events));
      from = got[got.length - 1]!;
    }
    const rest = await sse(g.base, `/v1/runs/${id}/stream`, { key: g.secretKey, headers: { 'last-event-id': String(from) } });
    await rest.ended;
    got.push(...seqs(rest.events));
    producing = false;
    await producer;
    const total = runs.get(`${WS}/${id}`)!.frames.length;
    expect(got).toEqual(range(1, total));
  }, 30_000);

  it('sends heartbeat comments while a run is quiet', async () => {
    const id = ids.run();
    commit(id, [status('waiting')]);
    const s = await sse(g.base, `/v1/runs/${id}/stream`, { key: g.secretKey });
    await until(() => s.comments.filter((c) => c === 'ping').length >= 2, 5000, 'two heartbeats');
    s.close();
  });

  it('waits for a run announced moments ago, and answers an unknown or foreign run with 404', async () => {
    const id = ids.run();
    const pending = sse(g.base, `/v1/runs/${id}/stream`, { key: g.secretKey });
    await sleep(300); // deliberately: the run is announced only after the client asked for it
    commit(id, [status('queued'), status('succeeded')]);
    const s = await pending;
    await s.ended;
    expect(seqs(s.events)).toEqual([1, 2]);

    for (const missing of ['run_missing', 'run_01aaaaaaaaaaaaaaaaaaaaaaaa', 'a.b.>', '*']) {
      const r = await sse(g.base, `/v1/runs/${encodeURIComponent(missing)}/stream`, { key: g.secretKey });
      expect({ missing, status: r.status, body: r.body }).toEqual({ missing, status: 404, body: { error: { code: 'run_not_found', message: expect.any(String) } } });
    }
    const ws = (await http(g.base, 'POST', '/v1/admin/workspaces', { key: g.adminToken, body: { name: 'other' } })).body;
    const foreign = await sse(g.base, `/v1/runs/run_missing/stream`, { key: ws.secretKey });
    expect(foreign.status).toBe(404);
    const other = ids.run().replace(/.$/, '0');
    commit(other, [status('succeeded')]);
    const t0 = Date.now();
    const cross = await sse(g.base, `/v1/runs/${other}/stream`, { key: ws.secretKey });
    expect(cross.status).toBe(404);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2500); // a fresh id is waited for, then still 404
    expect((await sse(g.base, `/v1/runs/${other}/stream`)).status).toBe(401);
    expect((await sse(g.base, `/v1/runs/${other}/stream?from=-1`, { key: g.secretKey })).status).toBe(400);
  }, 20_000);

  it('tails run_status frames of the workspace and ingested events, and nothing of other workspaces', async () => {
    const runsTail = await sse(g.base, '/v1/runs/stream', { key: g.publicKey });
    const eventsTail = await sse(g.base, '/v1/events/stream', { key: g.publicKey });
    // Best-effort tails drop what is emitted before their subscription is live: probe until each shows a probe.
    let probes = 0;
    const probe = () => {
      const n = ++probes;
      g.bus.emit(subjects.workspaceRuns(WS), enc.encode(JSON.stringify({ kind: 'run_status', runId: `probe_${n}`, status: 'queued' })));
      g.bus.emit(liveEventsSubject(WS), enc.encode(JSON.stringify({ id: `probe_${n}`, name: 'probe' })));
      return `probe_${n}`;
    };
    const probed = (events: { data?: string }[], id?: string) => events.some((e) => e.data?.includes(id ? `"${id}"` : '"probe_'));
    await until(() => {
      if (probed(runsTail.events) && probed(eventsTail.events)) return true;
      probe();
      return false;
    }, 5000, 'both tails to be live');
    const frame = { kind: 'run_status', ts: new Date().toISOString(), runId: 'run_x', status: 'succeeded', workflow: 'w', app: 'a' };
    g.bus.emit(subjects.workspaceRuns('ws_other'), enc.encode(JSON.stringify({ ...frame, runId: 'run_foreign' })));
    g.bus.emit(subjects.workspaceRuns(WS), enc.encode(JSON.stringify(frame)));
    const event = { id: 'evt_1', name: 'user.created', source: 'api', data: { a: 1 }, receivedAt: new Date().toISOString(), woke: 0, triggered: [] };
    g.bus.emit(liveEventsSubject('ws_other'), enc.encode(JSON.stringify({ ...event, id: 'evt_foreign' })));
    g.bus.emit(liveEventsSubject(WS), enc.encode(JSON.stringify(event)));
    // One publisher to one subscriber keeps its order: once a probe sent last arrives, anything foreign would have too.
    const last = probe();
    await until(() => probed(runsTail.events, last) && probed(eventsTail.events, last), 5000, 'the closing probe');
    const real = (events: { data?: string }[]) => events.filter((e) => !e.data?.includes('"probe_'));
    expect(real(runsTail.events)).toEqual([{ event: 'run_status', data: JSON.stringify(frame) }]);
    expect(real(eventsTail.events)).toEqual([{ event: 'event', data: JSON.stringify(event) }]);
    runsTail.close();
    eventsTail.close();
  });

  it('shares one bus subscription among the clients of a run and drops it when they leave', async () => {
    const id = ids.run();
    commit(id, [status('running')]);
    const deadline = Date.now() + 5000;
    while (g.gw.openStreams() > 0 && Date.now() < deadline) await sleep(20); // earlier tests' closes land
    const before = g.gw.openStreams();
    const subsBefore = g.gw.liveSubscriptions();
    const clients = await Promise.all(Array.from({ length: 20 }, () => sse(g.base, `/v1/runs/${id}/stream`, { key: g.secretKey })));
    await Promise.all(clients.map((c) => c.waitFor(1)));
    expect(g.gw.openStreams()).toBe(before + 20);
    expect(g.gw.liveSubscriptions()).toBe(subsBefore + 1);
    commit(id, [...logs(2), status('cancelled')]);
    await Promise.all(clients.map((c) => c.ended));
    for (const c of clients) expect(seqs(c.events)).toEqual([1, 2, 3, 4]);
    await until(() => g.gw.openStreams() === before && g.gw.liveSubscriptions() === subsBefore, 5000, 'every stream and its subscription to close');
  });

  it('a stream opened while others of its run are open starts from what they saw: no backlog read, every frame once', async () => {
    const id = ids.run();
    commit(id, [status('queued'), status('running')]);
    const first = await sse(g.base, `/v1/runs/${id}/stream`, { key: g.secretKey });
    await first.waitFor(2);
    commit(id, logs(2));
    await first.waitFor(4);
    const reads = timelineCalls;
    const later = await Promise.all(Array.from({ length: 5 }, () => sse(g.base, `/v1/runs/${id}/stream`, { key: g.secretKey })));
    const resumed = await sse(g.base, `/v1/runs/${id}/stream?from=3`, { key: g.secretKey });
    await Promise.all(later.map((c) => c.waitFor(4)));
    await resumed.waitFor(1);
    expect(timelineCalls).toBe(reads);
    commit(id, [status('succeeded')]);
    for (const c of [first, ...later, resumed]) await c.ended;
    for (const c of [first, ...later]) expect(seqs(c.events)).toEqual(range(1, 5));
    expect(seqs(resumed.events)).toEqual([4, 5]);
    expect(timelineCalls).toBe(reads);
  });

  it('streams of a run longer than a page, opened together, each get every frame once', async () => {
    const id = ids.run();
    // 1,200 frames stored, none heard live: the backlog takes two pages.
    commit(id, [status('running'), ...logs(1198), status('succeeded')], () => false);
    const clients = await Promise.all(Array.from({ length: 3 }, () => sse(g.base, `/v1/runs/${id}/stream`, { key: g.secretKey })));
    for (const c of clients) await c.ended;
    for (const c of clients) expect(seqs(c.events)).toEqual(range(1, 1200));
  });

  it('a frame lost on the bus is read back into what the open streams saw: a stream opened after gets every frame once', async () => {
    const id = ids.run();
    commit(id, [status('running')]);
    const first = await sse(g.base, `/v1/runs/${id}/stream`, { key: g.secretKey });
    await first.waitFor(1);
    commit(id, logs(3), (seq) => seq !== 2); // 2 lost: the first stream rereads storage at 3
    await first.waitFor(4);
    const later = await sse(g.base, `/v1/runs/${id}/stream`, { key: g.secretKey });
    await later.waitFor(4);
    commit(id, [status('succeeded')]);
    await Promise.all([first.ended, later.ended]);
    expect(seqs(first.events)).toEqual(range(1, 5));
    expect(seqs(later.events)).toEqual(range(1, 5));
  });

  describe('runs a POST /events just announced', () => {
    /** What ingest answers next: a 202 naming `announce` as the runs it started. */
    let announce: string[] = [];
    const post = async (ids: string[]) => {
      announce = ids;
      const r = await http(g.base, 'POST', '/v1/events', { key: g.secretKey, body: { name: 'order.placed' } });
      expect(r.status).toBe(202);
    };
    beforeAll(() => {
      g.stub('ingest', {
        'events.ingest': async () => ({ status: 202, body: { runId: announce[0], woke: 0, triggered: announce.map((runId) => ({ workflow: 'w', app: 'a', runId })) } }),
      });
    });

    it('are followed from their first frame: the stream that comes next reads no backlog', async () => {
      const id = ids.run();
      await post([id]);
      commit(id, [status('queued'), status('running')]);
      const before = timelineCalls;
      const s = await sse(g.base, `/v1/runs/${id}/stream`, { key: g.secretKey });
      await s.waitFor(2);
      commit(id, [...logs(3), status('succeeded')]);
      await s.ended;
      expect(seqs(s.events)).toEqual(range(1, 6));
      expect(timelineCalls - before).toBe(0);
    });

    it('a stream opened before the first frame waits for it, and a batch announces each of its runs', async () => {
      const [a, b] = [ids.run(), ids.run()];
      await post([a, b]);
      const before = timelineCalls;
      const sa = sse(g.base, `/v1/runs/${a}/stream`, { key: g.secretKey });
      const sb = sse(g.base, `/v1/runs/${b}/stream`, { key: g.secretKey });
      await sleep(5);
      commit(a, [status('queued'), status('succeeded')]);
      commit(b, [status('queued'), status('succeeded')]);
      for (const s of await Promise.all([sa, sb])) {
        await s.ended;
        expect(seqs(s.events)).toEqual([1, 2]);
      }
      expect(timelineCalls - before).toBe(0);
    });

    it('a tail that missed the first frame, or lost one, reads storage and sends every frame once', async () => {
      const early = ids.run();
      commit(early, [status('queued'), status('running')]); // went live before the 202: nobody heard it
      await post([early]);
      commit(early, logs(1));
      let before = timelineCalls;
      const s1 = await sse(g.base, `/v1/runs/${early}/stream`, { key: g.secretKey });
      await s1.waitFor(3);
      expect(timelineCalls - before).toBeGreaterThanOrEqual(1);
      commit(early, [status('succeeded')]);
      await s1.ended;
      expect(seqs(s1.events)).toEqual(range(1, 4));

      const lossy = ids.run();
      await post([lossy]);
      commit(lossy, [status('queued'), status('running'), ...logs(2)], (seq) => seq !== 2);
      before = timelineCalls;
      const s2 = await sse(g.base, `/v1/runs/${lossy}/stream`, { key: g.secretKey });
      commit(lossy, [status('succeeded')]);
      await s2.ended;
      expect(seqs(s2.events)).toEqual(range(1, 5));
      expect(timelineCalls - before).toBeGreaterThanOrEqual(1);
    });

    it("a tail that missed the run's first frames gets them again with its next ones (as the scheduler sends them): no backlog read", async () => {
      const id = ids.run();
      commit(id, [status('queued')]); // went live before the 202: nobody heard it
      await post([id]);
      commit(id, [status('running')]); // heard: the tail has seq 2, not 1
      await sleep(20);
      const before = timelineCalls;
      const opened = sse(g.base, `/v1/runs/${id}/stream`, { key: g.secretKey });
      await sleep(10);
      // The scheduler's next publish of a new run leads with its first frames again.
      for (const f of runs.get(`${WS}/${id}`)!.frames) g.bus.emit(subjects.runTimeline(WS, id), enc.encode(JSON.stringify(f)));
      commit(id, [...logs(1), status('succeeded')]);
      const s = await opened;
      await s.ended;
      expect(seqs(s.events)).toEqual(range(1, 4));
      expect(timelineCalls).toBe(before);
    });

    it('another workspace cannot take the tail of a run it did not start', async () => {
      const id = ids.run().replace(/.$/, '1');
      await post([id]);
      commit(id, [status('queued'), status('succeeded')]);
      const ws = (await http(g.base, 'POST', '/v1/admin/workspaces', { key: g.adminToken, body: { name: 'tail-other' } })).body;
      const foreign = await sse(g.base, `/v1/runs/${id}/stream`, { key: ws.secretKey });
      expect(foreign.status).toBe(404);
      const own = await sse(g.base, `/v1/runs/${id}/stream`, { key: g.secretKey });
      await own.ended;
      expect(seqs(own.events)).toEqual([1, 2]);
    }, 20_000);
  });

  it('closes open streams cleanly on shutdown', async () => {
    const g2 = await startTestGateway({ gateway: { streams: { heartbeatMs: 1000 } } });
    try {
      g2.stub('scheduler', { 'runs.timeline': async () => ({ body: { status: 'running', terminal: false, more: false, frames: [{ kind: 'run_status', seq: 1, status: 'running', ts: '', runId: 'r' }] } }) });
      const clients = await Promise.all([
        sse(g2.base, `/v1/runs/${ids.run()}/stream`, { key: g2.secretKey }),
        sse(g2.base, '/v1/runs/stream', { key: g2.secretKey }),
        sse(g2.base, '/v1/events/stream', { key: g2.secretKey }),
      ]);
      await clients[0]!.waitFor(1);
      const t0 = Date.now();
      await g2.gw.stop();
      await Promise.all(clients.map((c) => c.ended));
      expect(Date.now() - t0).toBeLessThan(2000);
    } finally {
      await g2.stop().catch(() => undefined);
    }
  }, 30_000);
});
