import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '@dws/config';
import { sealKeyFor, subjects } from '@dws/runtime';
import { modes, ScriptedInvoker, startHarness, WS, type Harness } from './harness.js';

const dec = new TextDecoder();

jest.setTimeout(60_000);

/**
 * Passes to serve runners skip the invoker's hop: the invoker names the
 * runner's address (invoker.route) and the scheduler POSTs the signed body
 * itself. Whatever goes wrong with that falls back to the invoker path, never
 * to a stranded or failed run.
 */
describe.each(modes())('scheduler direct invokes (%s)', (mode) => {
  const signingKey = `sign_${randomBytes(8).toString('hex')}`;
  const invoker = new ScriptedInvoker({ five: () => Array.from({ length: 5 }, (_, i) => ({ run: `s${i}` })) });
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode, invoker);
  });
  afterAll(async () => h?.close());

  it('POSTs every pass to the runner itself while the route holds', async () => {
    const direct = await invoker.serveDirect(h.bus, sealKeyFor(loadConfig({})), signingKey);
    try {
      const before = { ...invoker.via };
      const id = await h.start('five');
      const run = await h.waitFor(id, ['succeeded']);
      expect(Object.keys(run.result.results)).toHaveLength(5);
      // Five steps (the last rides on the return): five passes, none through the bus.
      expect(invoker.via.http - before.http).toBe(5);
      expect(invoker.via.bus - before.bus).toBe(0);
    } finally {
      await direct.stop();
    }
  });

  it('a runner that refuses the connection sends the pass through the invoker, and the run goes on', async () => {
    const direct = await invoker.serveDirect(h.bus, sealKeyFor(loadConfig({})), signingKey);
    try {
      // Warm the route, then take the HTTP endpoint away: the route still names it.
      await h.waitFor(await h.start('five'), ['succeeded']);
      await direct.stopHttp();
      const before = { ...invoker.via };
      const id = await h.start('five');
      await h.waitFor(id, ['succeeded']);
      expect(invoker.via.http - before.http).toBe(0);
      expect(invoker.via.bus - before.bus).toBeGreaterThanOrEqual(5);
      for (let i = 0; i < 5; i++) expect(invoker.count(id, `s${i}`)).toBe(1);
    } finally {
      await direct.stop();
    }
  });

  it('with the invoker gone, passes keep going straight to the serve runner it last named', async () => {
    const direct = await invoker.serveDirect(h.bus, sealKeyFor(loadConfig({})), signingKey);
    try {
      await h.waitFor(await h.start('five'), ['succeeded']);
      await direct.stopRoutes();
      // Past the route's ttl: the scheduler asks again, nobody answers, the last route holds.
      await new Promise((r) => setTimeout(r, 1200));
      const before = { ...invoker.via };
      await h.waitFor(await h.start('five'), ['succeeded']);
      expect(invoker.via.http - before.http).toBe(5);
      expect(invoker.via.bus - before.bus).toBe(0);
    } finally {
      await direct.stop();
    }
  });

  it('a signing key sealed under another seal key is not used: passes go through the invoker', async () => {
    const direct = await invoker.serveDirect(h.bus, randomBytes(32), signingKey);
    try {
      const before = { ...invoker.via };
      await h.waitFor(await h.start('five'), ['succeeded']);
      expect(invoker.via.http - before.http).toBe(0);
      expect(invoker.via.bus - before.bus).toBe(5);
    } finally {
      await direct.stop();
    }
  });

  it('with no route answer (no invoker), passes go through the invoker subject as before', async () => {
    const before = { ...invoker.via };
    await h.waitFor(await h.start('five'), ['succeeded']);
    expect(invoker.via.http - before.http).toBe(0);
    expect(invoker.via.bus - before.bus).toBe(5);
  });
});

/**
 * StartRun as a direct request (what ingest's outbox tries before the stream):
 * answered once the run is stored, and a repeat of the same StartRun, direct
 * or from the stream, starts nothing more.
 */
describe.each(modes())('scheduler direct starts (%s)', (mode) => {
  const invoker = new ScriptedInvoker({ two: () => [{ run: 'a' }, { run: 'b' }], napper: () => [{ run: 'a' }, { sleep: 'nap', ms: 3_600_000 }] });
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode, invoker);
  });
  afterAll(async () => h?.close());

  it('stores the run before it answers, and a repeat of the StartRun does nothing', async () => {
    const id = await h.start('two', {}, { direct: true });
    // Answered: the run is there to read at once.
    expect((await h.db.query('select 1 from scheduler.runs where id = $1', [id])).length).toBe(1);
    await h.waitFor(id, ['succeeded']);
    await h.start('two', {}, { direct: true, runId: id });
    await h.start('two', {}, { runId: id });
    await new Promise((r) => setTimeout(r, 300));
    expect(invoker.count(id, 'a')).toBe(1);
    const frames = await h.db.query<{ seq: number }>('select seq from scheduler.frames where run_id = $1 order by seq', [id]);
    expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i + 1));
  });

  it("publishes a new run's first frames again ahead of its next ones (a follower that subscribed a moment late sees its beginning)", async () => {
    const id = `run_again_${Date.now()}`;
    const live: number[] = [];
    const sub = h.bus.subscribe(subjects.runTimeline(WS, id), (data) => live.push((JSON.parse(dec.decode(data)) as { seq: number }).seq));
    await h.start('two', {}, { direct: true, runId: id });
    await h.waitFor(id, ['succeeded']);
    await new Promise((r) => setTimeout(r, 100));
    await sub.stop();
    const stored = (await h.db.query<{ seq: number }>('select seq from scheduler.frames where run_id = $1 order by seq', [id])).map((f) => f.seq);
    expect(live).toEqual([1, 2, 1, 2, ...stored.slice(2)]);
  });

  it('a repeated StartRun of a singleton "cancel" run does not cancel the run that replaced it', async () => {
    const flow = { singletonKey: 'k', singletonMode: 'cancel' };
    const first = await h.start('napper', {}, { direct: true, flow });
    await h.waitFor(first, ['waiting']);
    const second = await h.start('napper', {}, { direct: true, flow });
    await h.waitFor(first, ['cancelled']);
    await h.waitFor(second, ['waiting']);
    // The first run's StartRun again (a redelivery): it must not act a second time.
    await h.start('napper', {}, { runId: first, flow });
    await new Promise((r) => setTimeout(r, 500));
    expect((await h.call('runs.get', { params: { id: second } })).body.status).toBe('waiting');
    await h.call('runs.cancel', { params: { id: second } });
  });
});
