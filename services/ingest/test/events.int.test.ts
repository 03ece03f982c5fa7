import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create, EmitEventSchema, toBinary } from '@dws/proto';
import { createLogger } from '@dws/log';
import { ApiBatcher, ids, Outbox, streams, subjects, type ApiHandler } from '@dws/runtime';
import { uniqueName } from '@dws/testing';
import { Admission } from '../src/handlers/admission.js';
import { Ingestor } from '../src/handlers/ingestor.js';
import { ScheduledEvents } from '../src/handlers/scheduled-events.js';
import { Wakes } from '../src/handlers/wakes.js';
import { WorkflowIndex } from '../src/handlers/workflow-index.js';
import { modes, startHarness, startsStored, until, type Harness } from './harness.js';

describe.each(modes())('ingest events (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode);
    await h.register('shop', [
      { name: 'on-order', triggers: [{ event: 'order.created' }] },
      { name: 'all-orders', triggers: [{ event: 'order.*' }] },
      { name: 'big-orders', triggers: [{ event: 'order.created', if: 'event.data.total > 100' }] },
      { name: 'implicit' },
      { name: 'nightly', triggers: [{ cron: '0 3 * * *' }] },
    ]);
    await h.register('billing', [{ name: 'invoice', triggers: [{ event: 'order.created' }] }]);
  }, 60_000);
  afterAll(() => h?.close());

  it('validates per SPEC: blank or missing name, over-long fields, non-object bodies (400 invalid_event)', async () => {
    for (const body of [{}, { name: '  ' }, { name: 'x'.repeat(257) }, { name: 'a', app: 'x'.repeat(257) }, { name: 'a', dedupeId: 'x'.repeat(257) },
      { name: 'a', runner: 'x'.repeat(257) }, { name: 'a', targetApp: 'x'.repeat(257) }, { name: 'a', session: 'x'.repeat(257) }, { name: 'a', app: 5 }, 'text', [], Array(101).fill({ name: 'a' })]) {
      const r = await h.send(body);
      expect(r).toMatchObject({ status: 400, body: { error: { code: 'invalid_event' } } });
    }
    expect((await h.send({ name: 'x'.repeat(256), app: 'a'.repeat(256) })).status).toBe(202);
  });

  it('matches exact, prefix and CEL triggers, records eventId on every run, and answers 202 as SPEC says', async () => {
    const r = await h.send({ name: 'order.created', data: { total: 500 }, app: 'shop' });
    expect(r.status).toBe(202);
    expect(r.body.runId).toBeUndefined(); // three matched
    expect(r.body).toMatchObject({ woke: 0, skipped: false, dropped: false, debounced: false, batched: false, deduped: false, suspended: false });
    expect(r.body.triggered.map((t: any) => t.workflow).sort()).toEqual(['all-orders', 'big-orders', 'on-order']);
    for (const t of r.body.triggered) expect(t).toMatchObject({ app: 'shop', runId: expect.stringMatching(/^run_/), dropped: false });
    const runIds = r.body.triggered.map((t: any) => t.runId);
    const starts = await h.waitStarts((s) => runIds.every((id: string) => s.some((x) => x.cmd.runId === id)));
    for (const s of starts.filter((x) => runIds.includes(x.cmd.runId))) {
      expect(s.cmd).toMatchObject({ workspaceId: h.ws, app: 'shop', eventId: r.body.id, eventName: 'order.created', triggerKind: 'event', runner: '' });
      expect(s.input).toEqual({ total: 500 });
    }
    const small = await h.send({ name: 'order.created', data: { total: 5 }, app: 'shop' });
    expect(small.body.triggered.map((t: any) => t.workflow).sort()).toEqual(['all-orders', 'on-order']);
  });

  it('answers each POST that reaches it in a batch from the gateway as it would alone, and records each event once', async () => {
    const batcher = new ApiBatcher(h.bus);
    const caller = { workspaceId: h.ws, actor: 'tester', keyKind: 'secret', requestId: '' };
    const bodies: unknown[] = [
      { name: 'order.created', data: { total: 5 }, app: 'billing' },
      {},
      [{ name: 'order.created', data: { total: 6 }, app: 'billing' }, { name: ' ' }],
      { name: 'nobody.listens', data: { n: 1 } },
    ];
    // The gateway's calls of one busy turn: a call has just left, and each POST arrives in a callback of its own.
    await batcher.call('ingest', 'events.ingest', caller, { rawBody: '{"name":"warm.up"}' });
    const out = await new Promise<PromiseSettledResult<{ status: number; bodyJson?: string }>[]>((resolve) => {
      const all: Promise<{ status: number; bodyJson?: string }>[] = [];
      bodies.forEach((b) =>
        setImmediate(() => {
          all.push(batcher.call('ingest', 'events.ingest', caller, { rawBody: JSON.stringify(b) }));
          if (all.length === bodies.length) resolve(Promise.allSettled(all));
        }),
      );
    });
    const ok = (i: number) => JSON.parse((out[i] as PromiseFulfilledResult<{ bodyJson?: string }>).value.bodyJson!);
    const one = ok(0);
    expect(one).toMatchObject({ id: expect.stringMatching(/^evt_/), runId: expect.stringMatching(/^run_/), triggered: [{ workflow: 'invoice' }] });
    expect((out[1] as PromiseRejectedResult).reason).toMatchObject({ status: 400, code: 'invalid_event' });
    const batch = ok(2).results;
    expect(batch).toMatchObject([{ id: expect.stringMatching(/^evt_/), triggered: [{ workflow: 'invoice' }] }, { error: { code: 'invalid_event' } }]);
    expect(ok(3)).toMatchObject({ id: expect.stringMatching(/^evt_/), triggered: [] });
    const runIds = [one.runId, batch[0].runId];
    await h.waitStarts((s) => runIds.every((id) => s.some((x) => x.cmd.runId === id)));
    for (const id of [one.id, batch[0].id, ok(3).id]) expect((await h.call('events.get', { params: { id } })).status).toBe(200);
    expect((await startsStored(h, [one.id, batch[0].id])).get(one.id)).toBe(1);
  });

  it('broadcasts without app, scopes with app, routes with targetApp, pins with runner', async () => {
    const all = await h.send({ name: 'order.created', data: { total: 1 } });
    expect(all.body.triggered.map((t: any) => `${t.app}/${t.workflow}`).sort()).toEqual(['billing/invoice', 'shop/all-orders', 'shop/on-order']);
    const scoped = await h.send({ name: 'order.created', data: { total: 1 }, app: 'billing' });
    expect(scoped.body.triggered.map((t: any) => t.workflow)).toEqual(['invoice']);
    const routed = await h.send({ name: 'order.created', data: { total: 1 }, app: 'shop', targetApp: 'billing' });
    expect(routed.body.triggered.map((t: any) => t.workflow)).toEqual(['invoice']);
    const pinned = await h.send({ name: 'implicit', data: null, runner: 'runner-7' });
    expect(pinned.body.runId).toMatch(/^run_/);
    const [s] = await h.waitStarts((x) => x.some((y) => y.cmd.runId === pinned.body.runId));
    expect([...h.starts.values()].find((y) => y.cmd.runId === pinned.body.runId)!.cmd.runner).toBe('runner-7');
    expect(s).toBeDefined();
  });

  it('an event matching nothing is recorded with an empty triggered; cron triggers add no event trigger', async () => {
    const r = await h.send({ name: 'nightly', data: { a: 1 } });
    expect(r).toMatchObject({ status: 202, body: { triggered: [] } });
    const rec = await h.call('events.get', { params: { id: r.body.id } });
    expect(rec.body).toMatchObject({ id: r.body.id, name: 'nightly', source: 'api', data: { a: 1 }, woke: 0, triggered: [] });
  });

  it('takes an array of up to 100; a bad event gets its own error and does not sink the others', async () => {
    const r = await h.send([{ name: 'implicit', data: { i: 1 } }, { name: '' }, { name: 'implicit', data: { i: 2 } }]);
    expect(r.status).toBe(202);
    expect(r.body.results).toHaveLength(3);
    expect(r.body.results[0].runId).toMatch(/^run_/);
    expect(r.body.results[1]).toEqual({ error: { code: 'invalid_event', message: expect.any(String) } });
    expect(r.body.results[2].runId).toMatch(/^run_/);
    const hundred = await h.send(Array.from({ length: 100 }, (_, i) => ({ name: 'nothing.matches', data: { i } })));
    expect(hundred.body.results).toHaveLength(100);
  });

  it('drops a repeat dedupeId per app within 24 h entirely: no waiters, no fan-out, no row', async () => {
    let wakes = 0;
    h.scheduler['waiters.wake'] = async () => ({ body: { woke: ++wakes } });
    const id = uniqueName('d');
    const first = await h.send({ name: 'implicit', dedupeId: id });
    expect(first.body).toMatchObject({ deduped: false, woke: 1, runId: expect.any(String) });
    const again = await h.send({ name: 'implicit', dedupeId: id });
    expect(again.body).toMatchObject({ deduped: true, woke: 0, triggered: [] });
    expect(again.body.id).toBeUndefined();
    // Another app's same dedupeId is its own.
    const other = await h.send({ name: 'implicit', dedupeId: id, app: 'shop' });
    expect(other.body.deduped).toBe(false);
    // Concurrent repeats: exactly one wins.
    const id2 = uniqueName('d');
    const many = await Promise.all(Array.from({ length: 20 }, () => h.send({ name: 'implicit', dedupeId: id2 })));
    expect(many.filter((m) => !m.body.deduped)).toHaveLength(1);
    const rows = await h.call('events.list', { query: { name: 'implicit', limit: 1000 } });
    expect(rows.body.filter((e: any) => e.id === first.body.id)).toHaveLength(1);
    h.scheduler['waiters.wake'] = async () => ({ body: { woke: 0 } });
  });

  it('lists events newest first with app, name and limit (default 100, max 1000)', async () => {
    const app = uniqueName('app');
    for (let i = 0; i < 3; i++) await h.send({ name: 'list.me', app, data: { i } });
    const r = await h.call('events.list', { query: { app, name: 'list.me', limit: 2 } });
    expect(r.body.map((e: any) => e.data.i)).toEqual([2, 1]);
    expect((await h.call('events.list', { query: { limit: 0 } })).status).toBe(400);
    expect((await h.call('events.list', { query: { limit: 5000 } })).status).toBe(200);
    expect((await h.call('events.get', { params: { id: 'evt_nope' } })).status).toBe(404);
    // Another workspace's event reads as 404.
    const mine = await h.send({ name: 'list.me', app });
    expect((await h.call('events.get', { params: { id: mine.body.id } }, uniqueName('ws'))).status).toBe(404);
  });

  it('keeps the trigger index right when a runner re-registers with changed triggers', async () => {
    await h.register('reg', [{ name: 'moving', triggers: [{ event: 'first.name' }] }]);
    expect((await h.send({ name: 'first.name', app: 'reg' })).body.triggered).toHaveLength(1);
    await h.register('reg', [{ name: 'moving', triggers: [{ event: 'second.name', if: 'event.data.ok == true' }] }]);
    const gone = await h.send({ name: 'first.name', app: 'reg' });
    expect(gone.body.triggered).toHaveLength(0);
    // It was matched first on the index as cached (the old trigger): that match wrote nothing, no StartRun either.
    expect((await startsStored(h, [gone.body.id])).get(gone.body.id)).toBe(0);
    expect((await h.send({ name: 'second.name', app: 'reg', data: { ok: false } })).body.triggered).toHaveLength(0);
    expect((await h.send({ name: 'second.name', app: 'reg', data: { ok: true } })).body.triggered).toHaveLength(1);
    // Dropping the triggers list brings back the implicit trigger on the name.
    await h.register('reg', [{ name: 'moving' }]);
    expect((await h.send({ name: 'moving', app: 'reg' })).body.triggered).toHaveLength(1);
  });

  it('reports the waiters the scheduler woke', async () => {
    const seen: any[] = [];
    h.scheduler['waiters.wake'] = async ({ body }) => {
      seen.push(body);
      return { body: { woke: 2 } };
    };
    const r = await h.send({ name: 'wake.me', data: { k: 1 } });
    expect(r.body.woke).toBe(2);
    expect(seen[0]).toMatchObject({ name: 'wake.me', data: { k: 1 }, id: r.body.id });
    expect((await h.call('events.get', { params: { id: r.body.id } })).body.woke).toBe(2);
    h.scheduler['waiters.wake'] = async () => ({ body: { woke: 0 } });
  });

  it('starts a matched run without waiting for the answer about waiters, and still reports and stores woke', async () => {
    // The scheduler answers about waiters only once the event's run has reached it (or 400 ms went by).
    h.scheduler['waiters.wake'] = async ({ body }) => {
      const id = (body as { id: string }).id;
      const started = () => [...h.starts.values()].some((s) => s.cmd.eventId === id);
      const t0 = Date.now();
      while (!started() && Date.now() - t0 < 400) await new Promise((r) => setTimeout(r, 5));
      return { body: { woke: started() ? 1 : 0 } };
    };
    try {
      const r = await h.send({ name: 'implicit', data: {} });
      expect(r).toMatchObject({ status: 202, body: { runId: expect.any(String) } });
      // On PGlite (one connection) the wake is settled before the event's statement: the run cannot be there first.
      const woke = mode === 'real' ? 1 : 0;
      expect(r.body.woke).toBe(woke);
      expect((await h.call('events.get', { params: { id: r.body.id } })).body.woke).toBe(woke);
    } finally {
      h.scheduler['waiters.wake'] = async () => ({ body: { woke: 0 } });
    }
  });

  it('asks the scheduler about the events that arrive together in one call, each answered on its own', async () => {
    h.scheduler['waiters.wake'] = async ({ body }) => ({ body: { woke: (body as { name: string }).name === 'wake.one' ? 1 : 0 } });
    try {
      const before = h.wakeBatches.length;
      const r = await h.send(Array.from({ length: 100 }, (_, i) => ({ name: i % 10 === 0 ? 'wake.one' : 'wake.none', data: { i } })));
      expect(r.body.results.map((x: { woke: number }) => x.woke)).toEqual(Array.from({ length: 100 }, (_, i) => (i % 10 === 0 ? 1 : 0)));
      // One call for the hundred, not one each.
      expect(h.wakeBatches.slice(before)).toEqual([100]);
      // Single-event POSTs arriving while calls are in flight share the next call.
      h.scheduler['waiters.wake'] = async () => {
        await new Promise((r) => setTimeout(r, 100));
        return { body: { woke: 0 } };
      };
      const mark = h.wakeBatches.length;
      await Promise.all(Array.from({ length: 20 }, (_, i) => h.send({ name: 'wake.none', data: { i } })));
      const calls = h.wakeBatches.slice(mark);
      expect(calls.reduce((a, b) => a + b, 0)).toBe(20);
      expect(calls.length).toBeLessThan(10);
    } finally {
      h.scheduler['waiters.wake'] = async () => ({ body: { woke: 0 } });
    }
  });

  it('asks about the events of one turn together even when each answer comes back within the turn (one process)', async () => {
    // Its own Wakes, so the service's traffic does not make the moment quiet or busy.
    const wakes = new Wakes({ bus: h.bus, log: createLogger({ level: 'silent' }) });
    const caller = { workspaceId: h.ws, actor: 'test', keyKind: 'secret', requestId: '' };
    // A call that has just been answered: not a quiet moment.
    await wakes.wake(caller, JSON.stringify({ name: 'turn.first', data: {} }));
    const mark = h.wakeBatches.length;
    // Twenty events, each from a callback of its own in one turn, as requests read together off their sockets.
    const out = await new Promise<unknown[]>((resolve) => {
      const all: Promise<unknown>[] = [];
      for (let i = 0; i < 20; i++) {
        setImmediate(() => {
          all.push(wakes.wake(caller, JSON.stringify({ name: 'turn.each', data: { i } })));
          if (all.length === 20) resolve(Promise.all(all));
        });
      }
    });
    expect(out).toHaveLength(20);
    const calls = h.wakeBatches.slice(mark);
    expect(calls.reduce((a, b) => a + b, 0)).toBe(20);
    expect(calls.length).toBeLessThanOrEqual(3);
  });

  it('wakes one event at a time when the scheduler has no waiters.wakeMany (an older one, mid-upgrade)', async () => {
    const many = h.scheduler['waiters.wakeMany']!;
    delete h.scheduler['waiters.wakeMany'];
    h.scheduler['waiters.wake'] = async ({ body }) => ({ body: { woke: (body as { data: { n: number } }).data.n } });
    try {
      // Its own Wakes: the service's would keep to single calls for a minute after this.
      const wakes = new Wakes({ bus: h.bus, log: createLogger({ level: 'silent' }) });
      const caller = { workspaceId: h.ws, actor: 'test', keyKind: 'secret', requestId: '' };
      const out = await Promise.all([1, 2].map((n) => wakes.wake(caller, JSON.stringify({ name: 'old.scheduler', data: { n } }))));
      expect(out).toEqual([{ woke: 1, wakeDeferred: false }, { woke: 2, wakeDeferred: false }]);
    } finally {
      h.scheduler['waiters.wakeMany'] = many;
      h.scheduler['waiters.wake'] = async () => ({ body: { woke: 0 } });
    }
  });

  it.each<[string, ApiHandler]>([
    [
      'fails on its side (a 5xx)',
      async () => {
        throw new Error('the database is unreachable');
      },
    ],
    [
      'is slow to answer',
      async () => {
        await new Promise((r) => setTimeout(r, 1500));
        return { body: { woke: 1 } };
      },
    ],
  ])('queues the wake durably when the scheduler %s, and still accepts the event promptly', async (_what, wake) => {
    // The wakes ingest queues durably, as the scheduler would receive them.
    const wakes: string[] = [];
    const consumer = await h.bus.consume(
      { stream: streams.schedulerCmds.name, durable: uniqueName('wakes'), filterSubject: subjects.schedulerApiCommand },
      async (msg) => void wakes.push(msg.msgId ?? ''),
    );
    h.scheduler['waiters.wake'] = wake;
    try {
      const t0 = Date.now();
      const r = await h.send({ name: 'queued.wake', data: { k: 1 } });
      expect(Date.now() - t0).toBeLessThan(1400);
      expect(r).toMatchObject({ status: 202, body: { woke: 0 } });
      await until(() => wakes.includes(`wake:${r.body.id}`), 10_000, 'the queued wake');
    } finally {
      h.scheduler['waiters.wake'] = async () => ({ body: { woke: 0 } });
      await consumer.stop();
    }
  });

  it('suspended workspace (gateway flag or projected fact): 202 suspended, waiters woken, nothing started', async () => {
    let woke = 0;
    h.scheduler['waiters.wake'] = async () => ({ body: { woke: ++woke } });
    const r = await h.send({ name: 'order.created', app: 'shop', data: { total: 1 } }, { suspended: true });
    expect(r.body).toMatchObject({ suspended: true, woke: 1 });
    expect(r.body.runId).toBeUndefined();
    expect(r.body.triggered.length).toBe(2);
    for (const t of r.body.triggered) expect(t.runId).toBeUndefined();
    expect((await h.call('events.get', { params: { id: r.body.id } })).body.triggered).toEqual([]);

    const ws = uniqueName('ws');
    await h.register('shop', [{ name: 'on-order', triggers: [{ event: 'order.created' }] }], ws);
    await h.suspend(ws, true);
    const s = await h.send({ name: 'order.created', app: 'shop' }, { ws });
    expect(s.body).toMatchObject({ suspended: true, triggered: [{ workflow: 'on-order' }] });
    await h.suspend(ws, false);
    const ok = await h.send({ name: 'order.created', app: 'shop' }, { ws });
    expect(ok.body).toMatchObject({ suspended: false, runId: expect.any(String) });
    await h.waitStarts((x) => x.some((y) => y.cmd.runId === ok.body.runId));
    expect([...h.starts.values()].some((x) => x.cmd.eventId === r.body.id || x.cmd.eventId === s.body.id)).toBe(false);
    h.scheduler['waiters.wake'] = async () => ({ body: { woke: 0 } });
  });

  it('an emit delivered many times at once (one shared transaction) is recorded and fans out once', async () => {
    await h.bus.ensureStream(streams.ingestCmds);
    const eventId = ids.event();
    const cmd = toBinary(
      EmitEventSchema,
      create(EmitEventSchema, { workspaceId: h.ws, eventId, name: 'implicit', data: new TextEncoder().encode('{"n":1}'), sourceRunId: 'run_src' }),
    );
    const handled = h.handled('ingest-emits');
    await Promise.all(Array.from({ length: 20 }, (_, i) => h.bus.publish(subjects.emitEvent, cmd, { msgId: `many-${eventId}-${i}` })));
    await until(() => h.handled('ingest-emits') >= handled + 20, 20_000, 'ingest to handle all 20 deliveries');
    expect((await startsStored(h, [eventId])).get(eventId)).toBe(1);
    const rec = await h.call('events.get', { params: { id: eventId } });
    expect(rec.body).toMatchObject({ source: 'emit', triggered: [{ workflow: 'implicit' }] });

    // The same id several times in one transaction (one group commit; here one call carrying it twice, which only a test does).
    const log = createLogger({ level: 'silent' });
    const outbox = new Outbox({ db: h.db, bus: h.bus, schema: 'ingest', log });
    const index = new WorkflowIndex(h.db, log);
    const ingestor = new Ingestor({ db: h.db, bus: h.bus, log, outbox, index, admission: new Admission({ db: h.db, bus: h.bus, log }), wakes: new Wakes({ bus: h.bus, log }), scheduled: new ScheduledEvents({ db: h.db, log, onArmed: () => {} }) });
    const again = ids.event();
    const ev = { name: 'implicit', app: undefined, scope: undefined, dataJson: '{}', data: {}, dedupeId: undefined, runner: undefined, targetApp: undefined, session: undefined };
    const caller = { workspaceId: h.ws, actor: 'run:x', keyKind: 'internal', requestId: '' };
    const res = await ingestor.ingest(caller, Array.from({ length: 3 }, () => ({ ev, source: 'emit' as const, id: again })));
    expect(res.filter((r) => r.runId)).toHaveLength(1);
    expect(res.filter((r) => r.deduped)).toHaveLength(2);
    await outbox.stop();
  });
});
