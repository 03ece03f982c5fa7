import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { api, eventually } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';
import { sse } from '@dws/testing';

const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];
const STEPS = 25;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The run stream against real runs: a client opens it right after POST
 * /events, is dropped mid-run, reconnects with `from` (and once with
 * Last-Event-ID), and ends up with every frame of the timeline exactly once.
 */
describe.each(modes)('run stream on %s', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;

  beforeAll(async () => {
    dep = await startDeployment(mode);
    runner = await startRunner(dep, (r) => {
      r.workflow('streamy', { triggers: [{ event: 'stream.go' }] }, async ({ step, logger }) => {
        logger.info('begin');
        let sum = 0;
        for (let i = 0; i < STEPS; i++) {
          sum += await step.run(`s${i}`, async () => {
            await sleep(15);
            logger.info(`step ${i}`, { i });
            return i;
          });
        }
        return { sum };
      });
      r.workflow('napper', { triggers: [{ event: 'nap.go' }] }, async ({ step }) => {
        await step.run('first', async () => 1);
        await step.sleep('nap', 3_600_000);
      });
      r.workflow('nest', { triggers: [{ event: 'nest.go' }] }, async ({ step }) => step.runWorkflow('kid', { workflow: 'napper' }));
    });
  }, 120_000);

  afterAll(async () => {
    await runner?.close();
    await dep?.stop(); // already stopped by the last test; stopping twice is harmless
  }, 60_000);

  it('replays, tails, survives drops with from / Last-Event-ID, and delivers each frame once', async () => {
    const tail = await sse(dep.base, '/v1/runs/stream', { key: dep.publicKey });
    const events = await sse(dep.base, '/v1/events/stream', { key: dep.publicKey });
    const ev = await eventually('the event to start a run', async () => {
      const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'stream.go', data: { hello: ['world', 1.5] } } });
      return r.body.runId ? r.body : undefined;
    });
    // The event tail shows the recorded event as GET /events/{id} does.
    await eventually('the event on the event tail', async () => (events.events.some((e) => JSON.parse(e.data!).id === ev.id) ? true : undefined));
    const live = JSON.parse(events.events.find((e) => JSON.parse(e.data!).id === ev.id)!.data!);
    const stored = (await api(dep.base, 'GET', `/v1/events/${ev.id}`, { key: dep.publicKey })).body;
    expect(live).toEqual({ ...stored, receivedAt: expect.any(String) });
    expect(events.events.every((e) => e.event === 'event')).toBe(true);
    events.close();
    const runId: string = ev.runId;
    const got: number[] = [];
    const kinds: string[] = [];
    let from = 0;
    // Opened at once (the run may not be stored yet), then dropped twice mid-run.
    for (const [i, dropAfter] of [5, 9].entries()) {
      const headers: Record<string, string> = i === 1 ? { 'last-event-id': String(from) } : {};
      const s = await sse(dep.base, `/v1/runs/${runId}/stream${i === 1 ? '' : `?from=${from}`}`, { key: dep.publicKey, headers });
      expect(s.status).toBe(200);
      await s.waitFor(dropAfter, 30_000).catch(() => undefined); // a fast run may end first
      s.close();
      await s.ended;
      got.push(...s.events.map((e) => Number(e.id)));
      kinds.push(...s.events.map((e) => e.event!));
      if (got.length) from = got[got.length - 1]!;
    }
    const rest = await sse(dep.base, `/v1/runs/${runId}/stream?from=${from}`, { key: dep.publicKey });
    await rest.ended; // ends by itself once the run is terminal
    got.push(...rest.events.map((e) => Number(e.id)));
    kinds.push(...rest.events.map((e) => e.event!));

    const run = (await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.publicKey })).body;
    expect(run).toMatchObject({ status: 'succeeded', result: { sum: (STEPS * (STEPS - 1)) / 2 } });
    const whole = await sse(dep.base, `/v1/runs/${runId}/stream`, { key: dep.publicKey });
    await whole.ended;
    const all = whole.events.map((e) => Number(e.id));
    expect(all).toEqual(Array.from({ length: all.length }, (_, i) => i + 1));
    expect(got).toEqual(all);
    expect(kinds).toEqual(whole.events.map((e) => e.event));
    expect(kinds[kinds.length - 1]).toBe('run_status');
    expect(JSON.parse(whole.events[whole.events.length - 1]!.data!)).toMatchObject({ kind: 'run_status', status: 'succeeded', runId });
    expect(kinds.filter((k) => k === 'step_status').length).toBeGreaterThanOrEqual(STEPS);
    for (const e of whole.events) expect(JSON.parse(e.data!)).toMatchObject({ kind: e.event, seq: Number(e.id), runId, ts: expect.any(String) });

    // The workspace tail saw the run change status (best-effort, but nothing is lost on a quiet test bus).
    await eventually('run_status on the workspace tail', async () =>
      tail.events.some((e) => JSON.parse(e.data!).runId === runId && JSON.parse(e.data!).status === 'succeeded') ? true : undefined,
    );
    tail.close();

    // Logs: persisted log frames, from/limit paging over the same seqs.
    const logs = (await api(dep.base, 'GET', `/v1/runs/${runId}/logs?limit=1000`, { key: dep.publicKey })).body as { seq: number; message: string }[];
    const logSeqs = whole.events.filter((e) => e.event === 'log').map((e) => Number(e.id));
    expect(logs.map((l) => l.seq)).toEqual(logSeqs);
    if (logs.length > 3) {
      const page = (await api(dep.base, 'GET', `/v1/runs/${runId}/logs?from=${logs[1]!.seq}&limit=2`, { key: dep.publicKey })).body as { seq: number }[];
      expect(page.map((l) => l.seq)).toEqual([logs[2]!.seq, logs[3]!.seq]);
    }
  }, 120_000);

  it('clients of one run that join as it goes each get every frame once, in order (the later ones from what the gateway saw)', async () => {
    const ev = await eventually('the event to start a run', async () => {
      const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'stream.go', data: {} } });
      return r.body.runId ? r.body : undefined;
    });
    const runId: string = ev.runId;
    const first = await sse(dep.base, `/v1/runs/${runId}/stream`, { key: dep.publicKey });
    await first.waitFor(8, 30_000);
    const joined = await Promise.all(Array.from({ length: 4 }, () => sse(dep.base, `/v1/runs/${runId}/stream`, { key: dep.publicKey })));
    const resumed = await sse(dep.base, `/v1/runs/${runId}/stream?from=5`, { key: dep.publicKey });
    await first.waitFor(16, 30_000);
    const late = await sse(dep.base, `/v1/runs/${runId}/stream`, { key: dep.publicKey });
    for (const c of [first, ...joined, resumed, late]) await c.ended;
    const whole = await sse(dep.base, `/v1/runs/${runId}/stream`, { key: dep.publicKey });
    await whole.ended;
    const all = whole.events.map((e) => Number(e.id));
    expect(JSON.parse(whole.events[whole.events.length - 1]!.data!)).toMatchObject({ kind: 'run_status', status: 'succeeded' });
    for (const c of [first, ...joined, late]) {
      expect(c.events.map((e) => Number(e.id))).toEqual(all);
      expect(c.events.map((e) => JSON.parse(e.data!))).toEqual(whole.events.map((e) => JSON.parse(e.data!)));
    }
    expect(resumed.events.map((e) => Number(e.id))).toEqual(all.slice(5));
  }, 120_000);

  it('shows a pause, a resume and a cancel on the run stream and the workspace stream at once', async () => {
    const ev = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'nap.go', data: {} } });
    const runId = ev.body.runId as string;
    const stream = await sse(dep.base, `/v1/runs/${runId}/stream`, { key: dep.publicKey });
    const tail = await sse(dep.base, '/v1/runs/stream', { key: dep.publicKey });
    const statusOf = (e: { event?: string; data?: string }) => (e.event === 'run_status' ? (JSON.parse(e.data!) as { status: string; runId: string }) : undefined);
    const onStream = (status: string) => stream.events.some((e) => statusOf(e)?.status === status);
    const onTail = (status: string) => tail.events.some((e) => statusOf(e)?.runId === runId && statusOf(e)?.status === status);
    // Within 2 s: well under the 5 s after which a quiet stream rereads storage, all that showed these before.
    const soon = async (what: string, cond: () => boolean) => {
      const end = Date.now() + 2000;
      while (!cond()) {
        if (Date.now() > end) throw new Error(`not shown within 2 s: ${what}`);
        await sleep(20);
      }
    };
    await eventually('the run asleep', async () => (await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.publicKey })).body.status === 'waiting' || undefined);
    for (const [action, status] of [['pause', 'paused'], ['resume', 'queued'], ['cancel', 'cancelled']] as const) {
      if (action === 'cancel') await eventually('the run asleep again', async () => (await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.publicKey })).body.status === 'waiting' || undefined);
      expect((await api(dep.base, 'POST', `/v1/runs/${runId}/${action}`, { key: dep.secretKey })).status).toBe(200);
      await soon(`${status} on the run stream`, () => onStream(status));
      await soon(`${status} on the workspace stream`, () => onTail(status));
    }
    await stream.ended;
    const seqs = stream.events.filter((e) => e.id !== undefined).map((e) => Number(e.id));
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    tail.close();
  }, 60_000);

  it("cancelling a parent ends its child: the child's stream shows it at once and ends", async () => {
    const ev = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'nest.go', data: {} } });
    const parent = ev.body.runId as string;
    const childId = await eventually('the child asleep', async () => {
      const steps = (await api(dep.base, 'GET', `/v1/runs/${parent}/steps`, { key: dep.publicKey })).body as { name: string; childRunId?: string }[];
      const id = steps.find((s) => s.name === 'kid')?.childRunId;
      return id && (await api(dep.base, 'GET', `/v1/runs/${id}`, { key: dep.publicKey })).body.status === 'waiting' ? id : undefined;
    });
    const stream = await sse(dep.base, `/v1/runs/${childId}/stream`, { key: dep.publicKey });
    expect((await api(dep.base, 'POST', `/v1/runs/${parent}/cancel`, { key: dep.secretKey })).status).toBe(200);
    // Within 2 s, well under a quiet stream's 5 s resync: the child's cancelled frame went live.
    const ended = await Promise.race([stream.ended.then(() => true), sleep(2000).then(() => false)]);
    expect(ended).toBe(true);
    const statuses = stream.events.filter((e) => e.event === 'run_status').map((e) => (JSON.parse(e.data!) as { status: string }).status);
    expect(statuses.at(-1)).toBe('cancelled');
    const child = (await api(dep.base, 'GET', `/v1/runs/${childId}`, { key: dep.publicKey })).body;
    expect(child).toMatchObject({ status: 'cancelled', error: { message: 'Parent run ended.' } });
  }, 60_000);

  it('ends open streams cleanly when the gateway gets SIGTERM', async () => {
    const ev = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'stream.go' } });
    const streams = await Promise.all([
      sse(dep.base, `/v1/runs/${ev.body.runId}/stream`, { key: dep.publicKey }),
      sse(dep.base, '/v1/runs/stream', { key: dep.publicKey }),
      sse(dep.base, '/v1/events/stream', { key: dep.publicKey }),
    ]);
    await streams[0]!.waitFor(1, 10_000);
    const t0 = Date.now();
    await runner.close();
    await dep.stop(); // SIGTERM to the gateway process (fleet) or the one dev process
    await Promise.all(streams.map((s) => s.ended));
    expect(streams.map((s) => s.cleanEnd())).toEqual([true, true, true]);
    expect(Date.now() - t0).toBeLessThan(10_000);
  }, 60_000);
});
