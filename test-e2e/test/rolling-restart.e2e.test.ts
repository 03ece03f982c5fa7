import { describe, expect, it } from '@jest/globals';
import { runChaos, violations } from '../src/chaos.js';
import { SERVICES } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';

/**
 * A rolling restart of the six-process fleet under the chaos load (issue
 * 17, "Rolling restart"): every 10 s the next service gets SIGTERM and must
 * drain and exit by itself, with code 0, within 30 s (stop taking work,
 * finish what is in flight, hand back leases, close sockets), then starts
 * again. Nothing may be lost or done twice: the chaos invariants hold, and
 * every run succeeds.
 */
const infra = realInfra();
if (!infra && process.env.CI) throw new Error('CI needs real Postgres and NATS for the rolling restart e2e test');
if (!infra) console.warn('\n!!! Postgres/NATS missing: the rolling restart test on the six-process fleet is SKIPPED !!!\n');
const describeFleet = infra ? describe : describe.skip;

describeFleet('rolling restart of the six-process fleet', () => {
  it('each service drains and exits by itself on SIGTERM, and no run is lost, failed or done twice', async () => {
    const report = await runChaos({
      loadMs: 65_000,
      inFlight: 20,
      killEveryMs: 10_000,
      rolling: true,
      settleMs: 60_000,
      seed: process.env.CHAOS_SEED ? Number(process.env.CHAOS_SEED) : undefined,
      log: (line) => process.stdout.write(`${line}\n`),
    });
    expect(report.stops.map((s) => s.service).sort()).toEqual([...SERVICES].sort());
    expect(report.stops.every((s) => !s.forced && s.code === 0 && s.ms < 30_000)).toBe(true);
    expect(report.runs).toBeGreaterThan(50);
    expect(report.failed).toEqual([]);
    expect(violations(report)).toEqual([]);
  }, 300_000);
});
