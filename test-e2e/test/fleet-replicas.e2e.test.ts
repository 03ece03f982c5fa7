import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import { createRunner, type Connection } from '@dws/sdk';
import { api, eventually, runReached } from '../src/api.js';
import { SERVICES, startDeployment, type Deployment } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { metricTotal } from '../src/metrics.js';
import { Gates, sse } from '@dws/testing';
import { startRunner, type TestRunner } from '../src/runner.js';

/**
 * Every service twice (twelve processes), driven through both gateways in
 * turn: what one replica of each hides (a projection read on one replica and
 * written on another, a pass driven here and checkpointed there, a decision
 * taken on one gateway for an approval another listed, two dispatchers on
 * one run's end, a run followed live on the gateway it did not start on).
 * Each run takes steps, a sleep, parallel steps, a child, an emit, a wait
 * for an event the test sends, and for some an approval a human grants; a
 * concurrency key per shop bounds them.
 */
const maybe = realInfra() ? describe : describe.skip;
if (!realInfra()) console.warn('\n!!! Postgres/NATS missing: the two-of-everything e2e is SKIPPED !!!\n');

const RUNS = 16;

const LIMIT = 2;

maybe('two replicas of every service', () => {
  let dep: Deployment;
  let runner: TestRunner;
  let hooks: Server;
  let connect: Connection;
  const connectPasses = new Map<string, number>();
  const posts: { deliveryId: string; runId: string; workflow: string }[] = [];
  const executions = new Map<string, number>();
  /** What each run of the ingest-decided workflows took, by workflow. */
  const ingestRuns = new Map<string, unknown[]>();
  const gates = new Gates();
  const insideOf = new Map<string, Map<string, number>>();
  let maxInside = 0;
  const gateway = (i: number) => dep.bases[i % dep.bases.length]!;

  beforeAll(async () => {
    hooks = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as { data?: { runId?: string; workflow?: string } };
        posts.push({ deliveryId: String(req.headers['x-service-delivery-id']), runId: body.data?.runId ?? '', workflow: body.data?.workflow ?? '' });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((resolve) => hooks.listen(0, '127.0.0.1', resolve));
    dep = await startDeployment('fleet', { replicas: Object.fromEntries(SERVICES.map((s) => [s, 2])) });
    const port = (hooks.address() as { port: number }).port;
    const endpoint = await api(gateway(1), 'POST', '/v1/webhook-endpoints', {
      key: dep.secretKey,
      body: { url: `http://127.0.0.1:${port}/hooks`, eventKinds: ['run.succeeded'], app: 'reps' },
    });
    expect(endpoint.status).toBe(201);
    runner = await startRunner(
      dep,
      (r) => {
        const once = (runId: string, name: string) => executions.set(`${runId}/${name}`, (executions.get(`${runId}/${name}`) ?? 0) + 1);
        // A run holds one slot however many parallel steps it runs: count runs inside a step, per shop.
        const work = (runId: string, shop: string, name: string, value: number) => async () => {
          once(runId, name);
          const inside = insideOf.get(shop) ?? new Map<string, number>();
          insideOf.set(shop, inside.set(runId, (inside.get(runId) ?? 0) + 1));
          maxInside = Math.max(maxInside, inside.size);
          await new Promise((res) => setTimeout(res, 20));
          if (inside.get(runId) === 1) inside.delete(runId);
          else inside.set(runId, inside.get(runId)! - 1);
          return value;
        };
        // Flow control ingest decides, each event of a burst through either gateway (so either ingest replica).
        const seen = (name: string, value: unknown) => void ingestRuns.set(name, [...(ingestRuns.get(name) ?? []), value]);
        r.workflow<{ i: number }>('debounced', { triggers: [{ event: 'burst.debounce' }], debounce: { period: '1s' } }, async ({ event, step }) =>
          step.run('take', () => (seen('debounced', event.data.i), event.data.i)),
        );
        r.workflow<{ i: number }>('rate-limited', { triggers: [{ event: 'burst.rate' }], rateLimit: { limit: 3, period: '1m' } }, async ({ event, step }) =>
          step.run('take', () => (seen('rate-limited', event.data.i), event.data.i)),
        );
        r.workflow<{ i: number }>('once', { triggers: [{ event: 'burst.once' }], idempotency: 'event.data.id' }, async ({ event, step }) =>
          step.run('take', () => (seen('once', event.data.i), event.data.i)),
        );
        r.workflow('batched', { triggers: [{ event: 'burst.batch' }], batchEvents: { maxSize: 5, timeout: '30s' } }, async ({ event, step }) =>
          step.run('take', () => {
            const is = (event.data as { data: { i: number } }[]).map((e) => e.data.i);
            seen('batched', is);
            return is;
          }),
        );
        r.workflow<{ i: number }>('solo', { triggers: [{ event: 'burst.solo' }], singleton: { key: 'event.data.k', mode: 'skip' } }, async ({ event, step }) =>
          step.run('take', async () => (seen('solo', event.data.i), await gates.wait('solo'), event.data.i)),
        );
        r.workflow<{ i: number }>('spaced', { triggers: [{ event: 'burst.spaced' }], throttle: { limit: 1, period: '1s' } }, async ({ step }) =>
          step.run('take', () => (seen('spaced', Date.now()), true)),
        );
        // Controlled from one gateway while the other scheduler may drive it.
        r.workflow<{ n: number }>(
          'napper',
          { triggers: [{ event: 'nap.go' }], cancelOn: [{ event: 'nap.stop', if: 'async.data.n == event.data.n' }] },
          async ({ event, step, ctx }) => {
            await step.run('a', () => (once(ctx.runId, 'a'), event.data.n));
            await step.sleep('nap', 3000);
            return step.run('b', () => (once(ctx.runId, 'b'), event.data.n));
          },
        );
        r.workflow<{ n: number }>('kid', {}, async ({ event, step, ctx }) => step.run('double', () => (once(ctx.runId, 'double'), event.data.n * 2)));
        r.workflow<{ n: number; shop: string }>(
          'order',
          { triggers: [{ event: 'order.go' }], concurrency: { limit: LIMIT, key: 'event.data.shop' } },
          async ({ event, step, ctx }) => {
            const { n, shop } = event.data;
            const a = await step.run('a', work(ctx.runId, shop, 'a', n));
            await step.sleep('rest', 200);
            const [b1, b2] = await Promise.all([step.run('b1', work(ctx.runId, shop, 'b1', 1)), step.run('b2', work(ctx.runId, shop, 'b2', 2))]);
            const kid = (await step.runWorkflow('kid', { workflow: 'kid', data: { n } })) as number;
            await step.emit('ping', { name: 'order.pinged', data: { n } });
            const pong = await step.waitForEvent<{ n: number; add: number }>('pong', { event: 'order.pong', timeout: '60s', if: `event.data.n == ${n}` });
            const gate = n % 4 === 0 ? await step.approval('gate', { tool: 'ship', args: { n }, risk: 'high' }) : undefined;
            return { total: a + b1 + b2 + kid + (pong?.data.add ?? -1000), approved: gate?.status ?? 'ungated' };
          },
        );
      },
      { app: 'reps' },
    );
    // A Connect runner (its socket on one invoker, through one gateway): its checkpoints cross the bus to whichever scheduler drives the pass.
    const socketRunner = createRunner({ url: `${gateway(1)}/v1`, apiKey: dep.secretKey, signingKey: dep.signingKey, app: 'reps-connect', runnerId: 'reps-connect-1' });
    socketRunner.workflow<{ n: number }>('steps', { triggers: [{ event: 'connect.go' }] }, async ({ event, step, ctx }) => {
      connectPasses.set(ctx.runId, (connectPasses.get(ctx.runId) ?? 0) + 1);
      let total = 0;
      for (let i = 0; i < 5; i++) total += await step.run(`s${i}`, () => event.data.n + i);
      return { total };
    });
    connect = socketRunner.connect({ minBackoffMs: 50, maxBackoffMs: 500 });
    await connect.ready;
  }, 240_000);

  afterAll(async () => {
    gates.openAll();
    await connect?.close();
    await runner?.close();
    await dep?.stop();
    hooks?.closeAllConnections();
    await new Promise((resolve) => hooks?.close(resolve));
  }, 60_000);

  /** Send one event named `name` per n in [from, from + count) through the gateways in turn (`gw`); the runs they started, in order. */
  const sendEach = async (name: string, from: number, count: number, data: (n: number) => Record<string, unknown>, gw = gateway, onSent?: (n: number, runId: string) => Promise<void>) => {
    const ids: string[] = [];
    for (let n = from; n < from + count; n++) {
      const sent = await api(gw(n), 'POST', '/v1/events', { key: dep.secretKey, body: { name, data: data(n) } });
      expect(sent.status).toBe(202);
      ids.push(sent.body.runId as string);
      await onSent?.(n, sent.body.runId as string);
    }
    return ids;
  };

  /** What the runs with n from `from` return, in order. */
  const expected = (from: number) => Array.from({ length: RUNS }, (_, i) => from + i).map((n) => ({ total: n + 3 + 2 * n + 100, approved: n % 4 === 0 ? 'approved' : 'ungated' }));

  /**
   * Send RUNS order events (n from `from`) through the gateways in turn, send each run its pong once it
   * waits for it and decide each gated run's approval on another gateway than the one that listed it, until
   * every run has succeeded. `during` runs once some runs are under way, told how many have not finished. Returns the run ids.
   */
  const drive = async (from: number, gw: (i: number) => string, during?: (unfinished: number) => Promise<void>, onSent?: (n: number, runId: string) => Promise<void>) => {
    const ids = await sendEach('order.go', from, RUNS, (n) => ({ n, shop: `shop-${n % 2}` }), gw, onSent);
    const ponged = new Set<number>();
    const approved = new Set<number>();
    let underWay = false;
    await eventually(
      'every run to succeed',
      async () => {
        let done = 0;
        for (const [i, id] of ids.entries()) {
          const n = from + i;
          const run = runReached((await api(gw(n + 1), 'GET', `/v1/runs/${id}`, { key: dep.secretKey })).body, ['queued', 'running', 'waiting', 'succeeded']);
          if (run?.status === 'succeeded') done++;
          if (run?.waitingFor?.kind === 'event' && !ponged.has(n)) {
            const pong = await api(gw(n + 1), 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'order.pong', data: { n, add: 100 } } });
            expect(pong.status).toBe(202);
            ponged.add(n);
          }
          if (run?.needsAttention && !approved.has(n)) {
            const listed = await api(gw(n), 'GET', `/v1/approvals?runId=${id}`, { key: dep.secretKey });
            const open = (listed.body as { id: string; status: string }[]).find((x) => x.status === 'pending');
            if (open) {
              const decided = await api(gw(n + 1), 'POST', `/v1/approvals/${open.id}/decision`, { key: dep.secretKey, body: { status: 'approved' } });
              expect(decided.status).toBe(200);
              approved.add(n);
            }
          }
        }
        if (!underWay && during && ponged.size >= RUNS / 4) {
          underWay = true;
          await during(RUNS - done);
        }
        return done === RUNS ? true : undefined;
      },
      180_000,
    );
    const results = await Promise.all(ids.map(async (id) => (await api(gw(0), 'GET', `/v1/runs/${id}`, { key: dep.secretKey })).body.result));
    expect(results).toEqual(expected(from));
    return ids;
  };

  /** Deliveries received for these runs, by run. */
  const deliveriesOf = (ids: string[]) => posts.filter((p) => ids.includes(p.runId));

  it('runs every run to its right end once: steps, sleeps, children, emits, waits, approvals and webhooks across both replicas of each', async () => {
    const streams: Awaited<ReturnType<typeof sse>>[] = [];
    // Each run followed live on the other gateway from its start.
    const ids = await drive(0, gateway, undefined, async (n, runId) => void streams.push(await sse(gateway(n + 1), `/v1/runs/${runId}/stream`, { key: dep.publicKey })));
    // Never more than the limit of a shop's runs inside a step (two at once, under the limit, on a loaded machine too); every step once.
    expect(maxInside).toBeGreaterThan(0);
    expect(maxInside).toBeLessThanOrEqual(LIMIT);
    const counts = ids.flatMap((id) => ['a', 'b1', 'b2'].map((st) => executions.get(`${id}/${st}`)));
    expect(counts).toEqual(Array(RUNS * 3).fill(1));
    expect([...executions.entries()].filter(([, c]) => c !== 1)).toEqual([]);
    // Each live stream got the whole timeline once, in order: what a stream read afterwards on the gateway the event went through holds.
    for (const [n, live] of streams.entries()) {
      await live.ended;
      const whole = await sse(gateway(n), `/v1/runs/${ids[n]}/stream`, { key: dep.publicKey });
      await whole.ended;
      expect(JSON.parse(whole.events.at(-1)!.data!)).toMatchObject({ kind: 'run_status', status: 'succeeded' });
      expect(live.events.map((e) => [Number(e.id), JSON.parse(e.data!)])).toEqual(whole.events.map((e) => [Number(e.id), JSON.parse(e.data!)]));
    }
    // Both schedulers drove passes.
    const passesBy = await Promise.all(['scheduler', 'scheduler-1'].map((name) => metricTotal(dep.ports!()[name]!, 'dws_scheduler_passes_total')));
    expect(passesBy.every((n) => n > 0)).toBe(true);
    // One webhook delivery per run's end (the children's too), whichever dispatcher took it.
    await eventually('a delivery per run', async () => (posts.length >= 2 * RUNS ? true : undefined), 60_000);
    const mine = deliveriesOf(ids);
    expect(mine.map((p) => p.runId).sort()).toEqual([...ids].sort());
    expect([posts.filter((p) => p.workflow === 'kid').length, new Set(posts.map((p) => p.runId)).size, new Set(posts.map((p) => p.deliveryId)).size]).toEqual([
      RUNS,
      2 * RUNS,
      2 * RUNS,
    ]);
  }, 300_000);

  it('a Connect runner: each run one pass, its checkpoints relayed to whichever scheduler drives it', async () => {
    const ids = await sendEach('connect.go', 0, 12, (n) => ({ n }));
    const runs = await Promise.all(
      ids.map((id, n) => eventually(`run ${id}`, async () => runReached((await api(gateway(n + 1), 'GET', `/v1/runs/${id}`, { key: dep.secretKey })).body), 60_000)),
    );
    expect(runs.map((r) => r.result)).toEqual(Array.from({ length: 12 }, (_, n) => ({ total: 5 * n + 10 })));
    expect(ids.map((id) => connectPasses.get(id))).toEqual(Array(12).fill(1));
  }, 120_000);

  it('flow control ingest decides holds across both ingest replicas: a debounce, a rate limit, an idempotency key, batches, a singleton and a throttle over bursts through either gateway', async () => {
    const burst = (name: string, data: (i: number) => Record<string, unknown>) =>
      Promise.all(Array.from({ length: 10 }, (_, i) => api(gateway(i), 'POST', '/v1/events', { key: dep.secretKey, body: { name, data: data(i) } })));
    const sent = await Promise.all([
      burst('burst.debounce', (i) => ({ i })),
      burst('burst.rate', (i) => ({ i })),
      burst('burst.once', (i) => ({ i, id: 'order-7' })),
      burst('burst.batch', (i) => ({ i })),
      burst('burst.solo', (i) => ({ i, k: 'ada' })),
      burst('burst.spaced', (i) => ({ i })),
    ]);
    expect(sent.flat().map((r) => r.status)).toEqual(Array(60).fill(202));
    await eventually('the runs to take their events', async () =>
      (ingestRuns.get('debounced')?.length ?? 0) >= 1 && (ingestRuns.get('rate-limited')?.length ?? 0) >= 3 && (ingestRuns.get('once')?.length ?? 0) >= 1 && (ingestRuns.get('batched')?.length ?? 0) >= 2
        ? true
        : undefined,
    60_000);
    // Time for a second run that must not come (a debounce that fired twice, a limit passed).
    await new Promise((res) => setTimeout(res, 2500));
    expect(ingestRuns.get('debounced')).toHaveLength(1);
    expect(ingestRuns.get('rate-limited')).toHaveLength(3);
    expect(ingestRuns.get('once')).toHaveLength(1);
    // A singleton key's burst: one run took it; the others were skipped by ingest or, started meanwhile, by the scheduler.
    expect(ingestRuns.get('solo')).toHaveLength(1);
    gates.open('solo');
    // A throttle of one a second: ten starts spread over nine seconds at least (a little slack for the admission round that starts each).
    await eventually('the throttled runs', async () => ((ingestRuns.get('spaced')?.length ?? 0) === 10 ? true : undefined), 60_000);
    const at = (ingestRuns.get('spaced') as number[]).sort((x, y) => x - y);
    expect(at.slice(1).map((t, i) => t - at[i]! >= 800)).toEqual(Array(9).fill(true));
    // Nine seconds on, the singleton's skipped runs never ran.
    expect(ingestRuns.get('solo')).toHaveLength(1);
    const batches = ingestRuns.get('batched') as number[][];
    expect([batches.map((b) => b.length), batches.flat().sort((x, y) => x - y)]).toEqual([[5, 5], Array.from({ length: 10 }, (_, i) => i)]);
    // Each 202 said what became of its event: 3 rate-limited runs started, the rest dropped; one idempotent run, the rest deduped.
    const rate = sent[1]!.map((r) => r.body.triggered[0]);
    expect([rate.filter((t: { runId?: string }) => t.runId).length, rate.filter((t: { dropped: boolean }) => t.dropped).length]).toEqual([3, 7]);
    const once = sent[2]!.map((r) => r.body.triggered[0]);
    expect([once.filter((t: { runId?: string; deduped: boolean }) => t.runId && !t.deduped).length, once.filter((t: { deduped: boolean }) => t.deduped).length]).toEqual([1, 9]);
  }, 120_000);

  it('control through either gateway whichever scheduler drives the run: pause and resume, cancel, cancelOn, replay', async () => {
    const ids = await sendEach('nap.go', 0, 4, (n) => ({ n }));
    const read = async (i: number, g = i) => (await api(gateway(g), 'GET', `/v1/runs/${ids[i]}`, { key: dep.secretKey })).body;
    for (let i = 0; i < 4; i++) await eventually(`run ${i} to nap`, async () => ((await read(i, i + 1)).waitingFor?.kind === 'sleep' ? true : undefined));
    const control = async (g: number, action: string, i: number) => (await api(gateway(g), 'POST', `/v1/runs/${ids[i]}/${action}`, { key: dep.secretKey })).status;
    expect([await control(0, 'pause', 0), await control(1, 'cancel', 1)]).toEqual([200, 200]);
    expect((await api(gateway(1), 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'nap.stop', data: { n: 3 } } })).status).toBe(202);
    // Past the nap: the paused run has not gone on, the cancelled ones never will; run 2 ends.
    await eventually('run 2 to succeed', async () => runReached(await read(2, 3)), 30_000);
    await new Promise((res) => setTimeout(res, 1000));
    expect([(await read(0, 1)).status, (await read(1, 0)).status, (await read(3, 0)).status]).toEqual(['paused', 'cancelled', 'cancelled']);
    expect(ids.map((id) => executions.get(`${id}/b`) ?? 0)).toEqual([0, 0, 1, 0]);
    expect(await control(1, 'resume', 0)).toBe(200);
    await eventually('run 0 to succeed once resumed', async () => runReached(await read(0)), 30_000);
    const replay = await api(gateway(0), 'POST', `/v1/runs/${ids[2]}/replay`, { key: dep.secretKey });
    expect(replay.status).toBe(201);
    const again = await eventually('the replay to succeed', async () => runReached((await api(gateway(1), 'GET', `/v1/runs/${replay.body.id}`, { key: dep.secretKey })).body), 30_000);
    expect([again.result, executions.get(`${replay.body.id}/a`), executions.get(`${replay.body.id}/b`)]).toEqual([2, 1, 1]);
    expect(ids.map((id) => [executions.get(`${id}/a`), executions.get(`${id}/b`) ?? 0])).toEqual([[1, 1], [1, 0], [1, 1], [1, 0]]);
  }, 120_000);

  // Last: it leaves one process of each service.
  it('loses one replica of every service to kill -9 mid-load, none restarted: the others finish every run right, no step run more than twice', async () => {
    executions.clear();
    maxInside = 0;
    const lost = SERVICES.map((s) => `${s}-1`);
    let unfinishedAtCrash = 0;
    const ids = await drive(RUNS, () => dep.bases[0]!, async (unfinished) => {
      unfinishedAtCrash = unfinished;
      for (const name of lost) await dep.crash!(name);
    });
    expect(unfinishedAtCrash).toBeGreaterThan(0);
    expect(maxInside).toBeLessThanOrEqual(LIMIT);
    // A step in flight in a killed process's pass may run again (its result was never stored); none more.
    const counts = ids.flatMap((id) => ['a', 'b1', 'b2'].map((st) => executions.get(`${id}/${st}`) ?? 0));
    expect(counts.every((c) => c === 1 || c === 2)).toBe(true);
    // Every run's end delivered, each under one delivery id (an attempt cut off by the kill is sent again under it).
    await eventually('a delivery per run', async () => (new Set(deliveriesOf(ids).map((p) => p.runId)).size === RUNS ? true : undefined), 60_000);
    const byRun = new Map<string, Set<string>>();
    for (const p of deliveriesOf(ids)) byRun.set(p.runId, (byRun.get(p.runId) ?? new Set()).add(p.deliveryId));
    expect([...byRun.values()].map((d) => d.size)).toEqual(Array(RUNS).fill(1));
  }, 300_000);
});
