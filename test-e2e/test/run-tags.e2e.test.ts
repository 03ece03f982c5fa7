import { beforeAll, describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { isApiError } from '@dws/sdk';
import { eventually } from '../src/api.js';
import { e2eModes, useClientFixture } from '../src/client-fixture.js';

const modes = e2eModes();

/**
 * Run tags through the public API with the SDK's client: an event's tags on
 * the runs it starts, their children and replays, GET /runs by tag, a bulk
 * cancel by tag, a bulk replay by tag once per Idempotency-Key, step.emit's
 * tags (and session) on its event and runs, step.tag's from inside a run,
 * and a schedule's tags on its ticks' runs, paused and resumed.
 */
describe.each(modes)('run tags on %s', (mode) => {
  const fx = useClientFixture(mode, (r) => {
    r.workflow<{ n: number }>('tagged-order', { triggers: [{ event: 'tags.order' }] }, async ({ event, step }) => {
      const total = await step.runWorkflow('price', { workflow: 'tagged-price', data: { n: event.data.n } });
      return step.run('confirm', () => `order ${event.data.n}: ${String(total)}`);
    });
    r.workflow<{ n: number }>('tagged-price', async ({ event, step }) => step.run('price', () => event.data.n * 10));
    r.workflow('tagged-sleeper', { triggers: [{ event: 'tags.sleep' }] }, async ({ step }) => {
      await step.sleep('long', '1h');
    });
    r.workflow('tagged-digest', async ({ step }) => step.run('send', () => 'sent'));
    r.workflow<{ tenant: string }>('tagged-notifier', { triggers: [{ event: 'tags.notify' }] }, async ({ event, step }) =>
      step.emit('fan-out', { name: 'tags.notified', data: { tenant: event.data.tenant }, tags: [`tenant:${event.data.tenant}`, 'via:emit'], session: `chat-${event.data.tenant}` }),
    );
    r.workflow('tagged-notified', { triggers: [{ event: 'tags.notified' }] }, async ({ step }) => step.run('note', () => 'noted'));
    r.workflow<{ tenant: string }>('tagged-later', { triggers: [{ event: 'tags.later' }] }, async ({ event, step }) => {
      const account = await step.run('look-up', () => `tenant:${event.data.tenant}`);
      const tags = await step.tag('account', [account]);
      await step.runWorkflow('price', { workflow: 'tagged-price', data: { n: 4 } });
      return tags;
    });
  });

  beforeAll(async () => {
    await eventually('the workflows registered', async () => ((await fx.client.workflows.list()).length >= 7 ? true : undefined));
  }, 60_000);

  it("tags the runs an event starts, their children and replays, and lists runs by tag", async () => {
    const acme = await fx.client.send({ name: 'tags.order', data: { n: 1 }, tags: ['tenant:acme', 'user:7'] });
    const globex = await fx.client.send({ name: 'tags.order', data: { n: 2 }, tags: ['tenant:globex'] });
    const untagged = await fx.client.send({ name: 'tags.order', data: { n: 3 } });
    const done = await fx.client.runs.wait<string>(acme.runId!, { timeoutMs: 30_000 });
    expect(done).toMatchObject({ status: 'succeeded', result: 'order 1: 10', tags: ['tenant:acme', 'user:7'] });
    await fx.client.runs.wait(globex.runId!, { timeoutMs: 30_000 });
    expect((await fx.client.runs.wait(untagged.runId!, { timeoutMs: 30_000 })).tags).toEqual([]);
    expect((await fx.client.events.get(acme.id)).tags).toEqual(['tenant:acme', 'user:7']);
    expect((await fx.client.events.list({ tags: ['tenant:acme'] })).map((e) => e.id)).toEqual([acme.id]);

    // The child its step started carries the parent's tags, and so does a replay.
    const [child] = (await fx.client.runs.list({ workflow: 'tagged-price', tags: ['tenant:acme'] })).runs;
    expect(child).toMatchObject({ workflow: 'tagged-price', status: 'succeeded', tags: ['tenant:acme', 'user:7'] });
    const replay = await fx.client.runs.replay(acme.runId!);
    expect((await fx.client.runs.wait(replay.id, { timeoutMs: 30_000 })).tags).toEqual(['tenant:acme', 'user:7']);

    const ids = async (tags: string[]) => (await fx.client.runs.list({ tags, limit: 200 })).runs.map((r) => r.id).sort();
    // The order, its child, its replay and the replay's own child.
    const acmeRuns = await ids(['tenant:acme']);
    expect(acmeRuns).toHaveLength(4);
    expect(acmeRuns).toEqual(expect.arrayContaining([acme.runId!, child!.id, replay.id]));
    expect(await ids(['tenant:acme', 'user:7'])).toEqual(acmeRuns);
    expect(await ids(['tenant:globex'])).toHaveLength(2); // its order and that order's child
    expect(await ids(['tenant:acme', 'tenant:globex'])).toEqual([]);
  }, 90_000);

  it("tags an emitted event and the runs it starts with the emit's tags, in the emit's session", async () => {
    const sent = await fx.client.send({ name: 'tags.notify', data: { tenant: 'initech' } });
    const notifier = await fx.client.runs.wait(sent.runId!, { timeoutMs: 30_000 });
    expect(notifier).toMatchObject({ status: 'succeeded', tags: [] });
    const emitted = (notifier.result as { id: string }).id;
    expect((await fx.client.events.get(emitted)).tags).toEqual(['tenant:initech', 'via:emit']);
    const notified = await eventually('the emitted event\'s run', async () => (await fx.client.runs.list({ workflow: 'tagged-notified', tags: ['tenant:initech'] })).runs[0]);
    expect(notified).toMatchObject({ eventId: emitted, tags: ['tenant:initech', 'via:emit'], session: 'chat-initech' });
  }, 60_000);

  it('adds tags from inside a run (step.tag): the run carries them from then on, and so does the child it starts after', async () => {
    const sent = await fx.client.send({ name: 'tags.later', data: { tenant: 'umbrella' }, tags: ['source:api'] });
    const done = await fx.client.runs.wait<string[]>(sent.runId!, { timeoutMs: 30_000 });
    expect(done).toMatchObject({ status: 'succeeded', result: ['source:api', 'tenant:umbrella'], tags: ['source:api', 'tenant:umbrella'] });
    const found = (await fx.client.runs.list({ tags: ['tenant:umbrella'] })).runs;
    expect(found.map((r) => r.workflow).sort()).toEqual(['tagged-later', 'tagged-price']);
    expect(found.find((r) => r.workflow === 'tagged-price')!.tags).toEqual(['source:api', 'tenant:umbrella']);
  }, 60_000);

  it('bulk-cancels the runs of one tag and leaves the rest', async () => {
    const mine = await Promise.all([1, 2, 3].map(() => fx.client.send({ name: 'tags.sleep', tags: ['batch:42'] })));
    const other = await fx.client.send({ name: 'tags.sleep', tags: ['batch:43'] });
    const all = [...mine, other].map((s) => s.runId!);
    await eventually('the sleepers parked', async () => ((await Promise.all(all.map((id) => fx.client.runs.get(id)))).every((r) => r.status === 'waiting') ? true : undefined));
    const res = await fx.client.runs.bulkCancel({ tags: ['batch:42'] });
    expect(res).toMatchObject({ matched: 3, cancelled: 3, capped: false });
    for (const s of mine) expect((await fx.client.runs.get(s.runId!)).status).toBe('cancelled');
    expect((await fx.client.runs.get(other.runId!)).status).toBe('waiting');
    await fx.client.runs.cancel(other.runId!);
  }, 60_000);

  it('bulk-replays the runs of one tag once per Idempotency-Key, however often the call is sent', async () => {
    const sent = await Promise.all([1, 2].map((n) => fx.client.send({ name: 'tags.order', data: { n }, tags: ['replay:once'] })));
    for (const s of sent) await fx.client.runs.wait(s.runId!, { timeoutMs: 30_000 });
    const filter = { tags: ['replay:once'], workflow: 'tagged-order', status: 'succeeded' as const };
    const [first, again] = await Promise.all([fx.client.runs.bulkReplay(filter, { idempotencyKey: 'replay-once-1' }), fx.client.runs.bulkReplay(filter, { idempotencyKey: 'replay-once-1' })]);
    expect(first).toMatchObject({ matched: 2, replayed: 2, failed: 0 });
    expect(again).toMatchObject({ matched: 2, replayed: 2, failed: 0 });
    const replays = (await fx.client.runs.list({ tags: ['replay:once'], workflow: 'tagged-order', limit: 200 })).runs.filter((r) => r.replayOf);
    expect(replays.map((r) => r.replayOf).sort()).toEqual(sent.map((s) => s.runId!).sort());
    const reused = await fx.client.runs.bulkReplay({ ...filter, status: 'failed' }, { idempotencyKey: 'replay-once-1' }).catch((e: unknown) => e);
    expect(isApiError(reused) && [reused.status, reused.code]).toEqual([422, 'idempotency_key_reused']);
  }, 60_000);

  it('refuses bad tags with a 400 naming them', async () => {
    const tooMany = await fx.client.send({ name: 'tags.order', tags: Array.from({ length: 11 }, (_, i) => `t${i}`) }).catch((e: unknown) => e);
    expect(isApiError(tooMany) && tooMany.status).toBe(400);
    const long = await fx.client.runs.list({ tags: ['x'.repeat(129)] }).catch((e: unknown) => e);
    expect(isApiError(long) && [long.status, long.code]).toEqual([400, 'invalid_tag']);
  }, 30_000);

  it("tags a schedule's runs; paused it starts none, resumed it starts them again", async () => {
    const made = await fx.client.schedules.create({ app: 'default', workflow: 'tagged-digest', cron: '* * * * * *', tags: ['tenant:initech'], externalId: 'initech' });
    expect(made).toMatchObject({ tags: ['tenant:initech'], nextRunAt: expect.any(String) });
    const count = async () => (await fx.client.runs.list({ workflow: 'tagged-digest', tags: ['tenant:initech'], limit: 200 })).runs.length;
    await eventually('a tagged tick', async () => ((await count()) > 0 ? true : undefined), 30_000);

    const paused = await fx.client.schedules.pause(made.id);
    expect(paused).toMatchObject({ paused: { at: expect.any(String) } });
    expect(paused.nextRunAt).toBeUndefined();
    await sleep(700); // a tick in flight as it paused
    const before = await count();
    await sleep(2500);
    expect(await count()).toBe(before);

    const resumed = await fx.client.schedules.resume(made.id);
    expect(resumed.paused).toBeUndefined();
    await eventually('a tick once resumed', async () => ((await count()) > before ? true : undefined), 30_000);
    await fx.client.schedules.delete(made.id);
  }, 90_000);
});
