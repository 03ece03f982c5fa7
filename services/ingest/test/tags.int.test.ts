import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { uniqueName } from '@dws/testing';
import { modes, startHarness, type Harness } from './harness.js';

jest.setTimeout(60_000);

// POST /events `tags`: the runs an event starts carry them, through every gate that holds the event first.
describe.each(modes())('tags (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode);
  }, 60_000);
  afterAll(() => h?.close());

  const startsOf = (app: string) => h.startsOf('wf').filter((s) => s.cmd.app === app);
  const setup = async (flow: Record<string, unknown> = {}) => {
    const app = uniqueName('tags');
    await h.register(app, [{ name: 'wf', triggers: [{ event: 'go' }], ...flow }]);
    return app;
  };

  it('gives the run its event\'s tags, each once and in order, and keeps them on the event', async () => {
    const app = await setup();
    const res = await h.send({ name: 'go', app, tags: ['tenant:acme', 'user:7', 'tenant:acme'] });
    expect(res.status).toBe(202);
    const [run] = await h.waitStarts(() => startsOf(app).length === 1, 10_000, 'the run').then(() => startsOf(app));
    expect(run!.cmd.tags).toEqual(['tenant:acme', 'user:7']);
    expect((await h.call('events.get', { params: { id: res.body.id } })).body.tags).toEqual(['tenant:acme', 'user:7']);

    const untagged = await h.send({ name: 'go', app });
    // The log by tag: every tag given must be carried.
    const byTag = async (tag: string | string[]) => (await h.call('events.list', { query: { app, tag } })).body.map((e: { id: string }) => e.id);
    expect(await byTag('user:7')).toEqual([res.body.id]);
    expect(await byTag(['user:7', 'tenant:acme'])).toEqual([res.body.id]);
    expect(await byTag(['user:7', 'tenant:other'])).toEqual([]);
    expect((await h.call('events.list', { query: { app } })).body).toHaveLength(2);
    expect((await h.call('events.list', { query: { app, tag: 'x'.repeat(129) } })).body.error.code).toBe('invalid_tag');
    await h.waitStarts(() => startsOf(app).length === 2, 10_000, 'the untagged run');
    expect(startsOf(app).find((s) => s.cmd.runId === untagged.body.runId)!.cmd.tags).toEqual([]);
    expect((await h.call('events.get', { params: { id: untagged.body.id } })).body.tags).toBeUndefined();
  });

  it.each([
    [{ tags: 'acme' }, 'must be an array of strings'],
    [{ tags: [''] }, '1-128 characters'],
    [{ tags: ['x'.repeat(129)] }, '1-128 characters'],
    [{ tags: Array.from({ length: 11 }, (_, i) => `t${i}`) }, 'At most 10 tags'],
  ])('refuses %j with a 400, storing nothing', async (extra, message) => {
    const app = await setup();
    const res = await h.send({ name: 'go', app, ...extra });
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({ code: 'invalid_event', message: expect.stringContaining(message) });
    expect(await h.db.query('select 1 from ingest.events where app = $1', [app])).toHaveLength(0);
  });

  it('gives a debounced run its last event\'s tags and session', async () => {
    const app = await setup({ debounce: { period: '300ms' } });
    await h.send({ name: 'go', app, tags: ['first'], session: 's1' });
    await h.send({ name: 'go', app, tags: ['last'], session: 's2' });
    await h.waitStarts(() => startsOf(app).length === 1, 10_000, 'the debounced run');
    expect(startsOf(app)[0]!.cmd).toEqual(expect.objectContaining({ tags: ['last'], session: 's2' }));
  });

  it('gives a batched run all of its events\' tags, each once, and its first event\'s session', async () => {
    const app = await setup({ batchEvents: { maxSize: 3, timeout: '10s' } });
    await h.send({ name: 'go', app, tags: ['tenant:a'], session: 's1' });
    await h.send({ name: 'go', app, tags: ['tenant:b', 'tenant:a'] });
    await h.send({ name: 'go', app });
    await h.waitStarts(() => startsOf(app).length === 1, 10_000, 'the batch run');
    expect(startsOf(app)[0]!.cmd).toEqual(expect.objectContaining({ tags: ['tenant:a', 'tenant:b'], session: 's1', batch: true }));
  });

  it('keeps a delayed event\'s tags until it is taken in', async () => {
    const app = await setup();
    const res = await h.send({ name: 'go', app, tags: ['later'], delay: 300 });
    expect(res.body.scheduled).toBe(true);
    expect((await h.call('events.get', { params: { id: res.body.id } })).body).toEqual(expect.objectContaining({ tags: ['later'], scheduledFor: expect.any(String) }));
    await h.waitStarts(() => startsOf(app).length === 1, 10_000, 'the delayed run');
    expect(startsOf(app)[0]!.cmd.tags).toEqual(['later']);
    expect((await h.call('events.get', { params: { id: res.body.id } })).body.tags).toEqual(['later']);
  });
});
