import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { uniqueName } from '@dws/testing';
import { modes, sleep, startHarness, type Harness } from './harness.js';

jest.setTimeout(60_000);

// A workflow an operator paused: the invoker announces it with `paused` in its config.
describe.each(modes())('a paused workflow (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode);
  }, 60_000);
  afterAll(() => h?.close());

  const paused = { at: new Date().toISOString(), by: 'ops' };
  const startsOf = (app: string, workflow = 'wf') => h.startsOf(workflow).filter((s) => s.cmd.app === app);

  it('starts no run from its events, through no gate, while the other matches start theirs; resumed, it starts them again', async () => {
    const app = uniqueName('app');
    const wf = { name: 'wf', triggers: [{ event: 'go' }], rateLimit: { limit: 1, period: '1h' } };
    await h.register(app, [{ name: 'other', triggers: [{ event: 'go' }] }, { ...wf, paused }]);
    const res = await h.send({ name: 'go', app, data: { n: 1 } });
    expect(res.body.triggered).toEqual(
      expect.arrayContaining([
        { workflow: 'wf', app, paused: true, skipped: false, dropped: false, debounced: false, batched: false, deduped: false },
        expect.objectContaining({ workflow: 'other', runId: expect.any(String) }),
      ]),
    );
    expect(res.body.runId).toBeUndefined();
    await h.waitStarts(() => startsOf(app, 'other').length === 1, 10_000, 'the other run');
    expect(startsOf(app)).toHaveLength(0);
    expect((await h.call('events.get', { params: { id: res.body.id } })).body.triggered.map((t: { workflow: string }) => t.workflow)).toEqual(['other']);

    // Resumed: its events start runs again, and its rate limit was not spent while it was paused.
    await h.register(app, [{ name: 'other', triggers: [{ event: 'go' }] }, wf]); // (the harness waits for the last one)
    const again = await h.send({ name: 'go', app, data: { n: 2 } });
    expect(again.body.triggered).toEqual(expect.arrayContaining([expect.objectContaining({ workflow: 'wf', runId: expect.any(String), dropped: false })]));
    await h.waitStarts(() => startsOf(app).length === 1, 10_000, 'its run once resumed');
    expect(startsOf(app)[0]!.input).toEqual({ n: 2 });
  });

  it('paused with hold, keeps each match and admits it on resume, in order and under the flow control of that moment', async () => {
    const app = uniqueName('hold');
    const wf = { name: 'wf', triggers: [{ event: 'go' }], rateLimit: { limit: 2, period: '1h' } };
    await h.register(app, [{ name: 'other', triggers: [{ event: 'go' }] }, { ...wf, paused: { ...paused, hold: true } }]);
    const sent = [];
    for (const n of [1, 2, 3]) sent.push(await h.send({ name: 'go', app, data: { n }, tags: [`n:${n}`], session: `s${n}` }));
    for (const res of sent) {
      expect(res.body.triggered).toEqual(
        expect.arrayContaining([{ workflow: 'wf', app, paused: true, held: true, skipped: false, dropped: false, debounced: false, batched: false, deduped: false }]),
      );
    }
    await h.waitStarts(() => startsOf(app, 'other').length === 3, 10_000, 'the other runs');
    await sleep(500);
    expect(startsOf(app)).toHaveLength(0);
    expect(await h.db.query('select event_id from ingest.held_events where app = $1 order by seq', [app])).toEqual(sent.map((r) => ({ event_id: r.body.id })));
    const listed = (await h.call('events.held', { query: { app, workflow: 'wf' } })).body;
    expect(listed.map((x: { event: { id: string } }) => x.event.id)).toEqual(sent.map((r) => r.body.id));
    expect(listed[0]).toEqual({ workflow: 'wf', app, heldAt: expect.any(String), event: expect.objectContaining({ name: 'go', data: { n: 1 }, tags: ['n:1'] }) });

    // Resumed: the held matches are admitted oldest first; the rate limit of now lets two through.
    await h.register(app, [{ name: 'other', triggers: [{ event: 'go' }] }, wf]);
    await h.waitStarts(() => startsOf(app).length === 2, 10_000, 'the held runs');
    const runs = startsOf(app).sort((a, b) => a.at - b.at);
    expect(runs.map((s) => s.input)).toEqual([{ n: 1 }, { n: 2 }]);
    expect(runs.map((s) => [s.cmd.eventId, s.cmd.tags, s.cmd.session])).toEqual([[sent[0]!.body.id, ['n:1'], 's1'], [sent[1]!.body.id, ['n:2'], 's2']]);
    expect(await h.db.query('select 1 from ingest.held_events where app = $1', [app])).toHaveLength(0);
    expect((await h.call('events.held', { query: { app } })).body).toEqual([]);
    const record = (await h.call('events.get', { params: { id: sent[0]!.body.id } })).body;
    expect(record.triggered).toEqual(expect.arrayContaining([{ workflow: 'wf', app, runId: runs[0]!.cmd.runId }, expect.objectContaining({ workflow: 'other' })]));
    await sleep(500);
    expect(startsOf(app)).toHaveLength(2);
  });

  it('lets its cron ticks pass with no run', async () => {
    const app = uniqueName('cron');
    await h.register(app, [{ name: 'wf', triggers: [{ cron: '* * * * * *' }], paused }]);
    await sleep(2500);
    expect(startsOf(app)).toHaveLength(0);
    await h.register(app, [{ name: 'wf', triggers: [{ cron: '* * * * * *' }] }]);
    await h.waitStarts(() => startsOf(app).length >= 1, 10_000, 'a tick once resumed');
  });
});
