import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { uniqueName } from '@dws/testing';
import { modes, ScriptedInvoker, startHarness, until, type Harness } from './harness.js';

jest.setTimeout(60_000);

const invoker = new ScriptedInvoker({
  three: () => [{ run: 'a' }, { run: 'b' }, { run: 'c' }],
  sleeper: () => [{ run: 'first' }, { sleep: 'nap', ms: 3_600_000 }],
  parent: () => [{ child: 'kid', workflow: 'three' }],
  doomed: () => [{ run: 'boom', fn: () => { throw new Error('no'); }, retriable: false }],
  // step.tag (an extension of SPEC): tags added mid-run, the second step two at once; then a child, which takes them.
  tagger: (event) => [
    { run: 'look-up' },
    { tag: 'tenant', tags: [event.data.tenant] },
    { parallel: ['p1', 'p2'] },
    { tag: 'more', tags: ['vip', event.data.tenant, ...Array.from({ length: 8 }, (_, i) => `extra-${i}`)] },
    { child: 'kid', workflow: 'three' },
  ],
  badTag: () => [{ tag: 'bad', tags: 'not-a-list' }],
});

// A run's tags (StartRun `tags`): stored on every path a run starts by, kept by the runs made from it, and filtered on.
describe.each(modes())('run tags (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode, invoker);
    await h.register('app', [{ name: 'doomed', onFailure: true }]);
  });
  afterAll(async () => h?.close());

  const list = async (tag: string | string[], extra: Record<string, unknown> = {}) =>
    ((await h.call('runs.list', { query: { tag, ...extra } })).body as { id: string; tags: string[] }[]).map((r) => r.id).sort();
  const tagsOf = async (id: string) => (await h.call('runs.get', { params: { id } })).body.tags as string[];

  it('stores them whether the run starts at once, by the direct path or queued, and lists by them', async () => {
    const [t, u] = [uniqueName('tenant'), uniqueName('user')];
    const published = await h.start('three', {}, { flow: { tags: [t, u] } });
    const direct = await h.start('three', {}, { flow: { tags: [t] }, direct: true });
    const queued = await h.start('three', {}, { flow: { tags: [u], concurrencyKey: 'k', concurrencyLimit: 1 } });
    const untagged = await h.start('three');
    for (const id of [published, direct, queued, untagged]) await h.waitFor(id, ['succeeded']);

    expect(await tagsOf(published)).toEqual([t, u]);
    expect(await tagsOf(untagged)).toEqual([]);
    expect(await list(t)).toEqual([published, direct].sort());
    expect(await list(u)).toEqual([published, queued].sort());
    // Repeated, the parameter asks for runs carrying every tag given.
    expect(await list([t, u])).toEqual([published]);
    expect(await list([t, u], { status: 'failed' })).toEqual([]);
    expect(await list(uniqueName('nobody'))).toEqual([]);
  });

  it('gives a replay its source\'s tags, a child its parent\'s, and an on-failure run its failed run\'s', async () => {
    const t = uniqueName('tree');
    const parent = await h.start('parent', {}, { flow: { tags: [t] } });
    await h.waitFor(parent, ['succeeded']);
    const [child] = await h.db.query<{ id: string }>('select id from scheduler.runs where parent_run_id = $1', [parent]);
    expect(await tagsOf(child!.id)).toEqual([t]);

    const replay = (await h.call('runs.replay', { params: { id: parent } })).body.id as string;
    expect(await tagsOf(replay)).toEqual([t]);

    const doomed = await h.start('doomed', {}, { flow: { tags: [t, 'doomed'] } });
    await h.waitFor(doomed, ['failed']);
    let follow: string | undefined;
    await until(async () => !!(follow = (await h.db.query<{ id: string }>('select id from scheduler.runs where on_failure_of = $1', [doomed]))[0]?.id), 10_000, 'the on-failure run');
    expect(await tagsOf(follow!)).toEqual([t, 'doomed']);
    expect(await list(t)).toEqual(expect.arrayContaining([parent, child!.id, replay, doomed, follow!]));
  });

  it('bulk-cancels only the runs carrying every tag of the filter', async () => {
    const t = uniqueName('bulk');
    const mine = [await h.start('sleeper', {}, { flow: { tags: [t, 'x'] } }), await h.start('sleeper', {}, { flow: { tags: ['x', t] } })];
    const other = await h.start('sleeper', {}, { flow: { tags: ['x'] } });
    for (const id of [...mine, other]) await h.waitFor(id, ['waiting']);
    const res = await h.call('runs.bulkCancel', { body: { tags: [t, 'x'] } });
    expect(res.body).toEqual(expect.objectContaining({ matched: 2, cancelled: 2 }));
    for (const id of mine) expect((await h.call('runs.get', { params: { id } })).body.status).toBe('cancelled');
    expect((await h.call('runs.get', { params: { id: other } })).body.status).toBe('waiting');
    await h.call('runs.cancel', { params: { id: other } });
  });

  it('adds tags from inside a run (step.tag) once, up to ten, seen by reads and by a child started after', async () => {
    const [start, tenant] = [uniqueName('start'), uniqueName('acme')];
    const id = await h.start('tagger', { tenant }, { flow: { tags: [start] } });
    await h.waitFor(id, ['succeeded']);
    const expected = [start, tenant, 'vip', ...Array.from({ length: 7 }, (_, i) => `extra-${i}`)];
    expect(await tagsOf(id)).toEqual(expected);
    expect(await list(tenant)).toEqual(expect.arrayContaining([id]));
    // Each Tag step's result is the run's tags after it; stored once, however many passes replayed it.
    const steps = (await h.call('runs.steps', { params: { id } })).body as { name: string; status: string }[];
    const tagSteps = await h.db.query<{ name: string; data: string }>(`select name, data from scheduler.steps where run_id = $1 and op = 'Tag' order by idx`, [id]);
    expect(tagSteps.map((s) => [s.name, JSON.parse(s.data)])).toEqual([['tenant', [start, tenant]], ['more', expected]]);
    expect(steps.filter((s) => s.name === 'tenant' || s.name === 'more').map((s) => s.status)).toEqual(['succeeded', 'succeeded']);
    const [child] = await h.db.query<{ id: string }>('select id from scheduler.runs where parent_run_id = $1', [id]);
    expect(await tagsOf(child!.id)).toEqual(expected);
  });

  it('fails a Tag step whose tags are not a list of strings', async () => {
    const id = await h.start('badTag');
    await h.waitFor(id, ['failed']);
    const [step] = await h.db.query<{ status: string; error: { message: string } }>(`select status, error from scheduler.steps where run_id = $1`, [id]);
    expect(step).toMatchObject({ status: 'failed', error: { message: 'Tag: tags must be an array of strings.' } });
  });

  it('refuses a bad tag filter with a 400', async () => {
    await expect(h.call('runs.list', { query: { tag: '' } })).rejects.toMatchObject({ status: 400, code: 'invalid_tag' });
    await expect(h.call('runs.list', { query: { tag: Array.from({ length: 11 }, (_, i) => `t${i}`) } })).rejects.toMatchObject({ status: 400, code: 'invalid_tag' });
    await expect(h.call('runs.bulkCancel', { body: { tags: 'x' } })).rejects.toMatchObject({ status: 400, code: 'invalid_body' });
    await expect(h.call('runs.bulkReplay', { body: { tags: [] } })).rejects.toMatchObject({ status: 400, code: 'filter_required' });
  });
});
