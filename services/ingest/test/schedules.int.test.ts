import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { uniqueName } from '@dws/testing';
import { modes, sleep, startHarness, type Harness } from './harness.js';

jest.setTimeout(60_000);

// Schedules made through the API (POST /v1/schedules): a cron pattern starting runs of a registered workflow with its data.
describe.each(modes())('schedules made through the API (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode);
  }, 60_000);
  afterAll(() => h?.close());

  const setup = async (cfg: Record<string, unknown> = {}) => {
    const app = uniqueName('app');
    await h.register(app, [{ name: 'wf', ...cfg }]);
    return app;
  };
  const startsOf = (app: string) => h.startsOf('wf').filter((s) => s.cmd.app === app);
  const create = (body: unknown) => h.call('schedules.create', { rawBody: JSON.stringify(body) } as never);

  it('refuses a bad schedule with a 400 naming what is wrong, and one of a workflow that is not registered with a 404', async () => {
    const app = await setup();
    const cases: [unknown, RegExp][] = [
      [{ app, workflow: 'wf' }, /cron is required/],
      [{ app, workflow: 'wf', cron: 'every day' }, /cron "every day" is not valid/],
      [{ app, workflow: 'wf', cron: '0 9 * * *', timezone: 'Mars/Olympus' }, /not valid/],
      [{ app, workflow: 'wf', cron: '0 9 * * *', every: 'day' }, /Unknown field "every"/],
      [{ workflow: 'wf', cron: '0 9 * * *' }, /app is required/],
      [{ app, workflow: 'wf', cron: '0 9 * * *', externalId: 'x'.repeat(257) }, /externalId is over 256/],
      [{ app, workflow: 'wf', cron: '0 9 * * *', tags: ['ok', ''] }, /1-128 characters/],
    ];
    for (const [body, message] of cases) {
      const r = await create(body);
      expect({ body, status: r.status, message: r.body.error?.message }).toEqual({ body, status: 400, message: expect.stringMatching(message) });
      expect(r.body.error.code).toBe('invalid_schedule');
    }
    // A zone: the pattern kept as given, its ticks in that zone.
    const paris = await create({ app, workflow: 'wf', cron: '0 9 * * *', timezone: 'Europe/Paris' });
    expect(paris.body).toMatchObject({ cron: '0 9 * * *', timezone: 'Europe/Paris' });
    const next = new Date(paris.body.nextRunAt as string);
    expect(new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Paris', hour: '2-digit', minute: '2-digit' }).format(next)).toBe('09:00');
    expect((await h.call('schedules.delete', { params: { id: paris.body.id } })).status).toBe(204);
    const missing = await create({ app, workflow: 'nope', cron: '0 9 * * *' });
    expect([missing.status, missing.body.error.code]).toEqual([404, 'workflow_not_found']);
  });

  it('starts a run of its workflow at each tick with its data, is replaced by its externalId, and stops once deleted', async () => {
    const app = await setup();
    const made = await create({ app, workflow: 'wf', cron: '* * * * * *', data: { tenant: 'acme' }, externalId: 'acme' });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ app, workflow: 'wf', cron: '* * * * * *', timezone: 'UTC', data: { tenant: 'acme' }, externalId: 'acme', createdBy: 'tester' });
    const id = made.body.id as string;
    const [first] = await h.waitStarts(() => startsOf(app).length >= 1, 10_000, 'a tick');
    expect(first).toBeDefined();
    const s0 = startsOf(app)[0]!;
    expect(s0.cmd.triggerKind).toBe('cron');
    expect(s0.input).toEqual({ cron: '* * * * * *', scheduledAt: expect.any(String), scheduleId: id, externalId: 'acme', data: { tenant: 'acme' } });

    // Made again under its externalId: the same schedule, with the new data.
    const again = await create({ app, workflow: 'wf', cron: '* * * * * *', data: { tenant: 'acme', plan: 'pro' }, externalId: 'acme' });
    expect([again.status, again.body.id]).toEqual([200, id]);
    const n = startsOf(app).length;
    await h.waitStarts(() => startsOf(app).length >= n + 1, 10_000, 'a tick with the new data');
    expect(startsOf(app).at(-1)!.input.data).toEqual({ tenant: 'acme', plan: 'pro' });
    const got = await h.call('schedules.get', { params: { id } });
    expect(got.body).toMatchObject({ id, lastRunAt: expect.any(String), nextRunAt: expect.any(String) });
    expect((await h.call('schedules.list', { query: { app } })).body.map((s: { id: string }) => s.id)).toEqual([id]);

    expect((await h.call('schedules.delete', { params: { id } })).status).toBe(204);
    expect((await h.call('schedules.get', { params: { id } })).status).toBe(404);
    expect((await h.call('schedules.delete', { params: { id } })).status).toBe(404);
    await sleep(300); // a tick in flight when it was deleted
    const after = startsOf(app).length;
    await sleep(2200);
    expect(startsOf(app).length).toBe(after);
  });

  it("fires each tick once across replicas, and no run while its workflow is paused (the ticks pass)", async () => {
    const app = await setup();
    const other = await h.replica();
    try {
      const made = await create({ app, workflow: 'wf', cron: '* * * * * *' });
      await h.waitStarts(() => startsOf(app).length >= 3, 15_000, 'three ticks');
      const ticks = startsOf(app).map((s) => s.input.scheduledAt as string);
      expect(new Set(ticks).size).toBe(ticks.length);
      await h.register(app, [{ name: 'wf', paused: { at: new Date().toISOString(), by: 'ops' } }]);
      await sleep(300);
      const before = startsOf(app).length;
      const last = (await h.call('schedules.get', { params: { id: made.body.id } })).body.lastRunAt as string;
      await sleep(2200);
      expect(startsOf(app).length).toBe(before);
      expect(Date.parse((await h.call('schedules.get', { params: { id: made.body.id } })).body.lastRunAt)).toBeGreaterThan(Date.parse(last));
    } finally {
      await other.stop();
    }
  });

  it('gives its runs its tags; paused, its ticks start nothing (a replacement by externalId keeps it paused); resumed, it fires from its next tick', async () => {
    const app = await setup();
    const made = await create({ app, workflow: 'wf', cron: '* * * * * *', tags: ['tenant:acme'], externalId: 'acme' });
    expect(made.body).toMatchObject({ tags: ['tenant:acme'] });
    const id = made.body.id as string;
    await h.waitStarts(() => startsOf(app).length >= 1, 10_000, 'a tick');
    expect(startsOf(app)[0]!.cmd.tags).toEqual(['tenant:acme']);

    const paused = await h.call('schedules.pause', { params: { id } });
    expect(paused.body).toMatchObject({ id, paused: { at: expect.any(String), by: 'tester' } });
    expect(paused.body.nextRunAt).toBeUndefined();
    // Sent again by a sync, it takes the new tags and stays paused.
    const synced = await create({ app, workflow: 'wf', cron: '* * * * * *', tags: ['tenant:acme', 'plan:pro'], externalId: 'acme' });
    expect(synced.body).toMatchObject({ id, tags: ['tenant:acme', 'plan:pro'], paused: paused.body.paused });
    expect(synced.body.nextRunAt).toBeUndefined();
    await sleep(300); // a tick in flight when it was paused
    const before = startsOf(app).length;
    await sleep(2200);
    expect(startsOf(app).length).toBe(before);

    const resumed = await h.call('schedules.resume', { params: { id } });
    expect(resumed.body.paused).toBeUndefined();
    expect(Date.parse(resumed.body.nextRunAt)).toBeGreaterThan(Date.now() - 1000);
    await h.waitStarts(() => startsOf(app).length >= before + 1, 10_000, 'a tick once resumed');
    expect(startsOf(app).at(-1)!.cmd.tags).toEqual(['tenant:acme', 'plan:pro']);
    // Only ticks after the resume fired: none of the paused seconds was made up.
    expect(Date.parse(startsOf(app)[before]!.input.scheduledAt)).toBeGreaterThanOrEqual(Date.parse(resumed.body.updatedAt) - 1000);
    expect((await h.call('schedules.pause', { params: { id: 'sch_missing' } })).status).toBe(404);
    expect((await h.call('schedules.resume', { params: { id: 'sch_missing' } })).status).toBe(404);
    await h.call('schedules.delete', { params: { id } });
  });
});
