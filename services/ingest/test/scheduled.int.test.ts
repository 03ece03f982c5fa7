import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { create, EmitEventSchema, toBinary } from '@dws/proto';
import { ids, streams, subjects } from '@dws/runtime';
import { uniqueName } from '@dws/testing';
import { claimDueScheduled } from '../src/store/scheduled-events.js';
import { modes, sleep, startHarness, type Harness } from './harness.js';

jest.setTimeout(60_000);

// POST /events with a `delay`: stored until due, then taken in as though posted then.
describe.each(modes())('delayed events (%s)', (mode) => {
  let h: Harness;
  /** Event ids the played scheduler was asked to wake waiters for, in order. */
  const woken: string[] = [];
  beforeAll(async () => {
    h = await startHarness(mode);
    h.scheduler['waiters.wake'] = async (call) => {
      woken.push((call.body as { id: string }).id);
      return { body: { woke: 0 } };
    };
  }, 60_000);
  afterAll(() => h?.close());

  const setup = async (cfg: Record<string, unknown> = {}) => {
    const app = uniqueName('app');
    await h.register(app, [{ name: 'wf', triggers: [{ event: 'go' }], ...cfg }]);
    return app;
  };
  const startsOf = (app: string) => h.startsOf('wf').filter((s) => s.cmd.app === app);

  it('wakes nothing and starts nothing until due, then is taken in under its id', async () => {
    const app = await setup();
    const t0 = Date.now();
    const res = await h.send({ name: 'go', app, data: { n: 1 }, delay: 800 });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ scheduled: true, triggered: [], woke: 0, deduped: false });
    expect(res.body.runId).toBeUndefined();
    const id = res.body.id as string;
    expect(Date.parse(res.body.scheduledFor)).toBeGreaterThanOrEqual(t0 + 800);

    const stored = await h.call('events.get', { params: { id } });
    expect(stored.body).toMatchObject({ id, name: 'go', app, data: { n: 1 }, scheduled: true, scheduledFor: res.body.scheduledFor, triggered: [] });
    expect((await h.call('events.scheduled', { query: { app } })).body.map((e: { id: string }) => e.id)).toEqual([id]);
    await sleep(300);
    expect(startsOf(app)).toHaveLength(0);
    expect(woken).not.toContain(id);

    const [run] = await h.waitStarts(() => startsOf(app).length === 1, 10_000, 'the delayed run');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(800);
    expect(startsOf(app)[0]!.cmd.eventId).toBe(id);
    expect(startsOf(app)[0]!.input).toEqual({ n: 1 });
    expect(woken).toContain(id);
    expect(run).toBeDefined();
    const taken = await h.call('events.get', { params: { id } });
    expect(taken.body).toMatchObject({ id, triggered: [{ workflow: 'wf', app, runId: startsOf(app)[0]!.cmd.runId }] });
    // Its record keeps when it was due; it is no longer `scheduled`.
    expect(taken.body).toMatchObject({ scheduledFor: res.body.scheduledFor });
    expect(taken.body.scheduled).toBeUndefined();
    expect(Date.parse(taken.body.receivedAt)).toBeGreaterThanOrEqual(Date.parse(res.body.scheduledFor));
    expect((await h.call('events.scheduled', { query: { app } })).body).toEqual([]);
  });

  it('answers a batch in order, the delayed ones stored and the rest taken in now', async () => {
    const app = await setup();
    const res = await h.send([{ name: 'go', app, data: { i: 0 } }, { name: 'go', app, data: { i: 1 }, delay: '1h' }, { name: 'go', app, delay: 'soon' }]);
    const [now, later, bad] = res.body.results;
    expect(now).toMatchObject({ triggered: [{ workflow: 'wf' }] });
    expect(now.runId).toBeDefined();
    expect(later).toMatchObject({ scheduled: true, triggered: [] });
    expect(bad.error).toMatchObject({ code: 'invalid_event' });
    await h.waitStarts(() => startsOf(app).length === 1, 10_000, 'the run of the event taken in now');
    expect((await h.call('events.scheduled', { query: { app } })).body.map((e: { id: string }) => e.id)).toEqual([later.id]);
    expect((await h.call('events.cancel', { params: { id: later.id } })).status).toBe(200);
  });

  it('dedupes a repeat of its dedupeId while it waits, and once it is taken in', async () => {
    const app = await setup();
    const first = await h.send({ name: 'go', app, dedupeId: 'order-1', delay: 500 });
    expect(first.body.scheduled).toBe(true);
    expect((await h.send({ name: 'go', app, dedupeId: 'order-1', delay: 500 })).body).toMatchObject({ deduped: true });
    expect((await h.send({ name: 'go', app, dedupeId: 'order-1' })).body).toMatchObject({ deduped: true, triggered: [] });
    await h.waitStarts(() => startsOf(app).length === 1, 10_000, 'the delayed run');
    expect(startsOf(app)[0]!.cmd.eventId).toBe(first.body.id);
    expect((await h.send({ name: 'go', app, dedupeId: 'order-1' })).body).toMatchObject({ deduped: true });
    await sleep(500);
    expect(startsOf(app)).toHaveLength(1);
  });

  it('is cancelled before its time, and only then', async () => {
    const app = await setup();
    const res = await h.send({ name: 'go', app, data: { n: 2 }, delay: 600 });
    const id = res.body.id as string;
    const cancelled = await h.call('events.cancel', { params: { id } });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ id, cancelled: true, scheduledFor: res.body.scheduledFor, data: { n: 2 } });
    expect((await h.call('events.cancel', { params: { id } })).status).toBe(404);
    expect((await h.call('events.get', { params: { id } })).status).toBe(404);
    await sleep(1200);
    expect(startsOf(app)).toHaveLength(0);
    expect(woken).not.toContain(id);

    // Taken in: too late to cancel.
    const now = await h.send({ name: 'go', app });
    const late = await h.call('events.cancel', { params: { id: now.body.id } });
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe('event_not_scheduled');
    // Another workspace's id is not found.
    const other = await h.send({ name: 'go', app, delay: '1h' });
    expect((await h.call('events.cancel', { params: { id: other.body.id } }, uniqueName('ws'))).status).toBe(404);
    expect((await h.call('events.cancel', { params: { id: other.body.id } })).status).toBe(200);
  });

  it('is taken in once when the replica that claimed it died, and cannot be cancelled while claimed', async () => {
    const app = await setup();
    const res = await h.send({ name: 'go', app, delay: '1h' });
    const id = res.body.id as string;
    // Due now, then claimed by a replica that never takes it in (its lease 1.5 s).
    await h.db.query(`update ingest.scheduled_events set scheduled_for = now(), due_at = now() where id = $1`, [id]);
    const claimed = await claimDueScheduled(h.db, 100, 1500);
    expect(claimed.map((r) => r.id)).toContain(id);
    const busy = await h.call('events.cancel', { params: { id } });
    expect(busy.status).toBe(409);
    expect(busy.body.error.code).toBe('event_not_scheduled');
    await h.waitStarts(() => startsOf(app).length === 1, 10_000, 'the run once the claim lapsed');
    expect(startsOf(app)[0]!.cmd.eventId).toBe(id);
    await sleep(500);
    expect(startsOf(app)).toHaveLength(1);
  });

  it('is taken in once across replicas', async () => {
    const app = await setup();
    const other = await h.replica();
    try {
      const ids: string[] = [];
      for (let i = 0; i < 30; i++) ids.push((await h.send({ name: 'go', app, data: { i }, delay: 700 })).body.id);
      await h.waitStarts(() => startsOf(app).length >= 30, 15_000, 'thirty delayed runs');
      await sleep(700);
      const started = startsOf(app).map((s) => s.cmd.eventId);
      expect(started).toHaveLength(30);
      expect(new Set(started)).toEqual(new Set(ids));
    } finally {
      await other.stop();
    }
  });

  it('meets the flow control of the moment it is taken in', async () => {
    // One run a second: an event taken in now uses the second up; one delayed past it is not dropped.
    const app = await setup({ rateLimit: { limit: 1, period: '1s' } });
    expect((await h.send({ name: 'go', app, data: { i: 1 } })).body.dropped).toBe(false);
    expect((await h.send({ name: 'go', app, data: { i: 2 } })).body.dropped).toBe(true);
    const later = await h.send({ name: 'go', app, data: { i: 3 }, delay: 1500 });
    expect(later.body).toMatchObject({ scheduled: true, dropped: false });
    await h.waitStarts(() => startsOf(app).length === 2, 10_000, 'the delayed run');
    expect(startsOf(app).map((s) => s.input)).toEqual([{ i: 1 }, { i: 3 }]);
  });

  it("takes a delayed emit in once at its time, under the step's id, however often its command comes", async () => {
    const app = await setup();
    const other = uniqueName('app');
    await h.bus.ensureStream(streams.ingestCmds);
    const eventId = ids.event();
    const dueAtMs = Date.now() + 800;
    const cmd = toBinary(
      EmitEventSchema,
      create(EmitEventSchema, { workspaceId: h.ws, eventId, name: 'go', app: other, data: new TextEncoder().encode('{"n":7}'), sourceRunId: 'run_src', dueAtMs: BigInt(dueAtMs) }),
    );
    const handled = h.handled('ingest-emits');
    await Promise.all(Array.from({ length: 5 }, (_, i) => h.bus.publish(subjects.emitEvent, cmd, { msgId: `delayed-${eventId}-${i}` })));
    await h.waitStarts(() => h.handled('ingest-emits') >= handled + 5, 10_000, 'five deliveries handled');
    // Stored as an emit (it broadcasts: the emitting run's app is not its scope), nothing started yet.
    expect((await h.call('events.get', { params: { id: eventId } })).body).toMatchObject({ id: eventId, source: 'emit', scheduledFor: new Date(dueAtMs).toISOString() });
    expect(startsOf(app)).toHaveLength(0);
    await h.waitStarts(() => startsOf(app).length === 1, 10_000, 'the delayed emit run');
    expect(Date.now()).toBeGreaterThanOrEqual(dueAtMs);
    expect(startsOf(app)[0]!.cmd.eventId).toBe(eventId);
    // Delivered again after it was taken in: nothing more.
    await h.bus.publish(subjects.emitEvent, cmd, { msgId: `delayed-${eventId}-late` });
    await h.waitStarts(() => h.handled('ingest-emits') >= handled + 6, 10_000, 'the late delivery handled');
    await sleep(1500);
    expect(startsOf(app)).toHaveLength(1);
    // It broadcasts: every app of the workspace with a trigger on `go` (the earlier tests' too).
    const rec = await h.call('events.get', { params: { id: eventId } });
    expect(rec.body).toMatchObject({ source: 'emit', triggered: expect.arrayContaining([expect.objectContaining({ workflow: 'wf', app })]) });
  });
});
