import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { createLogger } from '@dws/log';
import type { Outbox } from '@dws/runtime';
import { recordingDb, uniqueName } from '@dws/testing';
import type { Admission } from '../src/handlers/admission.js';
import { Timers } from '../src/handlers/timers.js';
import { modes, sleep, startHarness, type Harness } from './harness.js';

jest.setTimeout(60_000);

// Ingest's timers sleep until the earliest cron tick, debounce or batch timeout, and are woken by what arms one.
describe.each(modes())('ingest timers between due times (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    // A replica looks on its own once a minute at most: whatever fires on time fired because it slept until then.
    h = await startHarness(mode, { pollMs: 60_000 });
  }, 60_000);
  afterAll(() => h?.close());

  it('with nothing armed, looks once and then sleeps', async () => {
    const { db, calls } = recordingDb(h.db);
    const timers = new Timers({ db, log: createLogger({ level: 'silent' }), outbox: {} as Outbox, admission: {} as Admission, takeInDelayed: async () => 0 }); // the default longest sleep
    timers.start();
    try {
      await sleep(300); // the first round (it also prunes) is over
      const first = calls.length;
      expect(first).toBeGreaterThan(0);
      await sleep(1000); // it looked every 250 ms before
      expect(calls.length).toBe(first);
    } finally {
      await timers.stop();
    }
  });

  const setup = async (cfg: Record<string, unknown>) => {
    const app = uniqueName('app');
    await h.register(app, [{ name: 'wf', triggers: [{ event: 'go' }], ...cfg }]);
    return app;
  };
  const startsOf = (app: string) => h.startsOf('wf').filter((s) => s.cmd.app === app);

  it('a debounce fires when its quiet period ends, not at the next poll', async () => {
    const app = await setup({ debounce: { period: '300ms' } });
    const t0 = Date.now();
    expect((await h.send({ name: 'go', app, data: { i: 1 } })).body.debounced).toBe(true);
    await h.waitStarts(() => startsOf(app).length === 1, 10_000, 'the debounced run');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
  });

  it('a batch fires at its timeout, not at the next poll', async () => {
    const app = await setup({ batchEvents: { maxSize: 100, timeout: '500ms' } });
    for (let i = 0; i < 3; i++) expect((await h.send({ name: 'go', app, data: { i } })).body.batched).toBe(true);
    const [run] = await h.waitStarts(() => startsOf(app).length === 1, 10_000, 'the batch run');
    expect(startsOf(app)[0]!.input).toHaveLength(3);
    expect(run).toBeDefined();
  });

  it('a schedule registered here ticks every second', async () => {
    const app = uniqueName('cron');
    await h.register(app, [{ name: 'wf', triggers: [{ cron: '* * * * * *' }] }]);
    await h.waitStarts(() => startsOf(app).length >= 3, 10_000, 'three ticks');
  });
});
