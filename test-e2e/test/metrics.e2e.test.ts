import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { request } from 'undici';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

/**
 * GET /metrics (CONTRACT): Prometheus text on the gateway and on every
 * separately started service's own port, with the names docs/metrics.md lists,
 * moving when runs execute.
 */
const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];

async function scrape(url: string): Promise<Map<string, number>> {
  const res = await request(url);
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
  const samples = new Map<string, number>();
  for (const line of (await res.body.text()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    samples.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return samples;
}
const sum = (m: Map<string, number>, prefix: string) => [...m].filter(([k]) => k.startsWith(prefix)).reduce((a, [, v]) => a + v, 0);

describe.each(modes)('metrics (%s)', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;
  beforeAll(async () => {
    dep = await startDeployment(mode);
    runner = await startRunner(dep, (r) => r.workflow('two', async ({ step }) => (await step.run('a', () => 1)) + (await step.run('b', () => 2))), { app: 'metrics' });
  }, 120_000);
  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
  }, 60_000);

  it('serves process and service metrics that move under load', async () => {
    // Where the scheduler's metrics live: the one process (pnpm dev), or the scheduler's own port.
    const schedulerUrl = mode === 'fleet' ? `http://127.0.0.1:${dep.ports!().scheduler}/metrics` : `${dep.base}/metrics`;
    const before = await scrape(schedulerUrl);
    for (let i = 0; i < 3; i++) {
      const runId = (await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'two', data: {} } })).body.runId as string;
      await eventually('run', async () => runReached((await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.secretKey })).body), 30_000);
    }
    const after = await scrape(schedulerUrl);
    expect(sum(after, 'dws_scheduler_steps_total{status="succeeded"}') - sum(before, 'dws_scheduler_steps_total{status="succeeded"}')).toBeGreaterThanOrEqual(6);
    // With checkpoints a two-step run is one pass: step a is checkpointed, b rides the reply.
    expect(sum(after, 'dws_scheduler_passes_total') - sum(before, 'dws_scheduler_passes_total')).toBeGreaterThanOrEqual(3);
    expect(sum(after, 'dws_scheduler_checkpoints_total{outcome="stored",') - sum(before, 'dws_scheduler_checkpoints_total{outcome="stored",')).toBeGreaterThanOrEqual(3);
    expect(sum(after, 'dws_scheduler_invoke_seconds_count') - sum(before, 'dws_scheduler_invoke_seconds_count')).toBeGreaterThanOrEqual(3);
    expect(after.has('dws_scheduler_timers_due')).toBe(true);
    expect(after.get('dws_db_up')).toBe(1);
    expect(after.get('dws_bus_up')).toBe(1);
    // The scheduler's durables, each with its lag (drained by now: the runs ended).
    const lags = [...after].filter(([k]) => k.startsWith('dws_bus_consumer_pending{'));
    expect(lags.length).toBeGreaterThan(0);
    expect(lags.every(([k, v]) => /durable="[^"]+",stream="[^"]+"/.test(k) && v >= 0)).toBe(true);
    expect(sum(after, 'dws_scheduler_invokes_total{outcome="reply",path="direct"}')).toBeGreaterThan(0);
    expect(after.has('dws_scheduler_held_runs')).toBe(true);

    const gateway = await scrape(`${dep.base}/metrics`);
    for (const name of ['dws_process_cpu_seconds_total', 'dws_process_gc_seconds_total', 'dws_process_resident_memory_bytes', 'dws_process_event_loop_lag_seconds', 'dws_gateway_sse_streams']) {
      expect({ name, present: gateway.has(name) }).toEqual({ name, present: true });
    }
    expect(gateway.get('dws_process_resident_memory_bytes')).toBeGreaterThan(10_000_000);
    // Committed holds at least what is live.
    expect(gateway.get('dws_process_heap_total_bytes')).toBeGreaterThanOrEqual(gateway.get('dws_process_heap_used_bytes') ?? Infinity);
    if (mode === 'fleet') {
      // Every separately started service has its own.
      for (const svc of ['ingest', 'invoker', 'approvals', 'webhook-dispatcher']) {
        const m = await scrape(`http://127.0.0.1:${dep.ports!()[svc]}/metrics`);
        expect({ svc, rss: (m.get('dws_process_resident_memory_bytes') ?? 0) > 0 }).toEqual({ svc, rss: true });
      }
      const ingest = await scrape(`http://127.0.0.1:${dep.ports!().ingest}/metrics`);
      expect(sum(ingest, 'dws_outbox_published_total{path="direct",schema="ingest"}')).toBeGreaterThanOrEqual(3);
      // The scheduler's Postgres pool: its connections by state, and its waits (none or some, never negative).
      expect(after.get('dws_db_pool_size')).toBeGreaterThan(0);
      expect((after.get('dws_db_pool_connections{state="in_use"}') ?? -1) + (after.get('dws_db_pool_connections{state="idle"}') ?? -1)).toBeGreaterThan(0);
      for (const name of ['dws_db_pool_waiting', 'dws_db_pool_waits_total', 'dws_db_pool_wait_seconds_total']) expect({ name, ok: (after.get(name) ?? -1) >= 0 }).toEqual({ name, ok: true });
    } else {
      // PGlite: one connection, no pool to tell of.
      expect(after.has('dws_db_pool_size')).toBe(false);
    }
  });
});
