import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { sse } from '@dws/testing';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { metricTotal } from '../src/metrics.js';
import { startRunner, type TestRunner } from '../src/runner.js';

/**
 * Checkpoints on the six-process fleet, with the scheduler SIGKILLed while a
 * runner streams them (one every ~10 ms, so the kill lands next to one: before
 * its commit, between its commit and its answer, or after). Whatever the
 * moment, nothing is lost and nothing is applied twice: the run ends with
 * the right result, every step stored once, at most the one step in flight
 * run twice, and the timeline's seqs gap-free.
 */
const maybe = realInfra() ? describe : describe.skip;
if (!realInfra()) console.warn('\n!!! Postgres/NATS missing: the checkpoint e2e is SKIPPED !!!\n');

const STEPS = 120;

/** dws_scheduler_checkpoints_total{outcome="stored"} by path, from the scheduler's /metrics. */
async function storedCheckpoints(dep: Deployment): Promise<{ socket: number; direct: number; bus: number }> {
  const of = (path: string) => metricTotal(dep.ports!().scheduler!, 'dws_scheduler_checkpoints_total', { path, outcome: 'stored' });
  return { socket: await of('socket'), direct: await of('direct'), bus: await of('bus') };
}

// Straight to the replica (the SDK's frames on ctx.checkpointSocket, as the chart deploys it), and through the
// gateway (SERVICE_SCHEDULER_URL unset).
maybe.each([
  ['straight to the replica', true],
  ['through the gateway', false],
])('checkpoints %s through a scheduler crash (fleet)', (_how, direct) => {
  let dep: Deployment;
  let runner: TestRunner;
  const executions = new Map<string, number>();
  let passes = 0;
  beforeAll(async () => {
    dep = await startDeployment('fleet', { directCheckpoints: direct });
    runner = await startRunner(dep, (r) =>
      r.workflow('long', async ({ step }) => {
        passes++;
        let total = 0;
        for (let i = 0; i < STEPS; i++) {
          total += await step.run(`s${i}`, async () => {
            executions.set(`s${i}`, (executions.get(`s${i}`) ?? 0) + 1);
            await new Promise((res) => setTimeout(res, 8));
            return i;
          });
        }
        return { total };
      }),
    );
  }, 120_000);
  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
  }, 60_000);

  it('loses nothing and applies nothing twice', async () => {
    const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'long', data: {} } });
    const runId: string = sent.body.runId;
    await eventually('a third of the steps done', async () => (executions.size >= STEPS / 3 ? true : undefined), 30_000);
    // Which way the checkpoints went, by the scheduler's count.
    const stored = await storedCheckpoints(dep);
    expect(stored.socket > 0).toBe(direct);
    expect(stored.bus > 0).toBe(!direct);
    expect(stored.direct).toBe(0);
    const passesBefore = passes;
    await dep.crashAndRestart('scheduler');
    const run = await eventually(
      'run succeeded',
      async () => runReached((await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.secretKey })).body as { status?: string; result?: unknown }),
      90_000,
    );
    expect(run.result).toEqual({ total: (STEPS * (STEPS - 1)) / 2 });
    const counts = [...executions.values()];
    expect(executions.size).toBe(STEPS);
    expect(counts.every((n) => n <= 2)).toBe(true);
    expect(counts.filter((n) => n === 2).length).toBeLessThanOrEqual(1);
    // One pass before the crash; after it, a pass or two (a checkpoint refused by the dead replica ends one).
    expect(passesBefore).toBe(1);
    expect(passes).toBeLessThanOrEqual(4);
    const steps = (await api(dep.base, 'GET', `/v1/runs/${runId}/steps`, { key: dep.secretKey })).body as { name: string; index: number }[];
    expect(steps.map((s) => s.name)).toEqual(Array.from({ length: STEPS }, (_, i) => `s${i}`));
    expect(steps.map((s) => s.index)).toEqual(Array.from({ length: STEPS }, (_, i) => i));
    const stream = await sse(dep.base, `/v1/runs/${runId}/stream`, { key: dep.secretKey });
    await stream.ended;
    const frames = stream.events.map((e) => JSON.parse(e.data!) as { seq: number; kind: string; name?: string; status?: string });
    expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i + 1));
    const succeeded = frames.filter((f) => f.kind === 'step_status' && f.status === 'succeeded').map((f) => f.name);
    expect(new Set(succeeded).size).toBe(STEPS);
    expect(succeeded).toHaveLength(STEPS);
    expect(frames.at(-1)).toMatchObject({ kind: 'run_status', status: 'succeeded' });
  }, 150_000);
});
