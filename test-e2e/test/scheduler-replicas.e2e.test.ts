import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { metricTotal } from '../src/metrics.js';
import { startRoundRobin, type RoundRobin } from '../src/round-robin.js';
import { startRunner, type TestRunner } from '../src/runner.js';

/**
 * Two scheduler replicas behind one address (SERVICE_SCHEDULER_URL names a
 * front that spreads connections over both, as `docker compose --scale` or a
 * Kubernetes Service does). A runner's checkpoints then reach either replica,
 * whichever drives the pass: the other relays them on the bus, so each run
 * still takes one pass, its steps stored as they finish.
 */
const maybe = realInfra() ? describe : describe.skip;
if (!realInfra()) console.warn('\n!!! Postgres/NATS missing: the two-scheduler e2e is SKIPPED !!!\n');

maybe('two scheduler replicas behind one address', () => {
  let front: RoundRobin;
  let dep: Deployment;
  let runner: TestRunner;
  const passes = new Map<string, number>();

  beforeAll(async () => {
    front = await startRoundRobin();
    dep = await startDeployment('fleet', { replicas: { scheduler: 2 }, schedulerUrl: front.url });
    const ports = dep.ports!();
    front.targets = [ports.scheduler!, ports['scheduler-1']!];
    runner = await startRunner(dep, (r) => {
      r.workflow<{ n: number }>('steps', { triggers: [{ event: 'steps.go' }] }, async ({ event, step, ctx }) => {
        passes.set(ctx.runId, (passes.get(ctx.runId) ?? 0) + 1);
        let total = 0;
        for (let i = 0; i < 5; i++) total += await step.run(`s${i}`, () => event.data.n + i);
        return { total };
      });
    });
  }, 180_000);

  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
    await front?.close();
  }, 60_000);

  it('each run takes one pass whichever replica its checkpoints reach', async () => {
    const ids: string[] = [];
    for (let n = 0; n < 12; n++) {
      const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'steps.go', data: { n } } });
      expect(sent.status).toBe(202);
      ids.push(sent.body.runId as string);
    }
    const runs = await Promise.all(
      ids.map((id) => eventually(`run ${id}`, async () => runReached((await api(dep.base, 'GET', `/v1/runs/${id}`, { key: dep.secretKey })).body), 60_000)),
    );
    expect(runs.map((r) => [r.status, r.result])).toEqual(Array.from({ length: 12 }, (_, n) => ['succeeded', { total: 5 * n + 10 }]));
    // The runner's one checkpoint socket sits on one replica: the other's runs had theirs relayed, and no run needed a second pass.
    expect(ids.map((id) => passes.get(id))).toEqual(Array(12).fill(1));
    const relayed = await Promise.all(['scheduler', 'scheduler-1'].map((name) => metricTotal(dep.ports!()[name]!, 'dws_scheduler_checkpoints_total', { path: 'relayed', outcome: 'stored' })));
    expect(relayed.reduce((x, y) => x + y)).toBeGreaterThan(0);
  }, 120_000);
});
