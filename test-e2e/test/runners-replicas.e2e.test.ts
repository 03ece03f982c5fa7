import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createRunner, type Connection } from '@dws/sdk';
import { api, eventually, runReached } from '../src/api.js';
import { realInfra } from '../src/infra.js';
import { startRunnersFleet, type RunnersFleet } from '../src/runners-fleet.js';

/**
 * Two invoker processes. The runner's socket sits on one of them; the
 * scheduler's invokes land on either (queue group), so about half of them
 * must hop to the replica holding the socket. Then each replica is killed -9
 * and restarted in turn: when the holder dies, the runner reconnects through
 * the gateway to the other one and runs keep succeeding.
 */
const maybe = realInfra() ? describe : describe.skip;
if (!realInfra()) console.warn('\n!!! Postgres/NATS missing: the two-invoker e2e is SKIPPED !!!\n');

maybe('two invoker replicas, one Connect socket', () => {
  let dep: RunnersFleet;
  let conn: Connection;
  const states: string[] = [];

  const run = async (n: number) => {
    const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'rep/go', data: { n } } });
    const runId = sent.body.runId as string;
    return eventually(
      `run ${runId}`,
      async () => {
        const r = await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.secretKey });
        return runReached(r.body);
      },
      90_000,
    );
  };

  beforeAll(async () => {
    // A short invoke timeout bounds how long a pass waits on a replica killed while holding it.
    dep = await startRunnersFleet({ invokers: 2, env: { SERVICE_INVOKE_TIMEOUT_MS: '10000' } });
    const runner = createRunner({ url: `${dep.base}/v1`, apiKey: dep.secretKey, signingKey: dep.signingKey, app: 'rep', runnerId: 'rep-1', stepBudgetMs: 0, checkpoints: false });
    // Checkpoints off: one invoke per step, so invokes land on both replicas (what this suite is about).
    runner.workflow<{ n: number }>('hops', { triggers: [{ event: 'rep/go' }] }, async ({ event, step }) => {
      let total = 0;
      for (let i = 0; i < 4; i++) total += await step.run(`s${i}`, () => event.data.n + i);
      return { total };
    });
    conn = runner.connect({ minBackoffMs: 50, maxBackoffMs: 500, onStateChange: (s) => states.push(s) });
    await conn.ready;
  }, 180_000);

  afterAll(async () => {
    await conn?.close();
    await dep?.stop();
  }, 60_000);

  it('runs every pass on the socket, whichever replica took the invoke', async () => {
    // 8 runs x 5 passes: the chance that no invoke lands on the replica without the socket is 2^-40.
    const runs = await Promise.all(Array.from({ length: 8 }, (_, n) => run(n)));
    expect(runs.map((r) => r.result)).toEqual(Array.from({ length: 8 }, (_, n) => ({ total: 4 * n + 6 })));
  }, 120_000);

  it('survives kill -9 of each invoker in turn: the runner reconnects to the other replica', async () => {
    // One of the two holds the socket; killing both in turn kills the holder at least once.
    for (const i of [0, 1]) {
      const opened = states.filter((s) => s === 'open').length;
      await dep.crashAndRestart(`invoker-${i}`);
      await eventually('the runner to be live', async () => {
        const r = await api(dep.base, 'GET', '/v1/runners?app=rep', { key: dep.secretKey });
        return r.body?.[0]?.live === true ? true : undefined;
      });
      const runs = await Promise.all(Array.from({ length: 4 }, (_, n) => run(10 * (i + 1) + n)));
      expect(runs.map((r) => r.result)).toEqual(Array.from({ length: 4 }, (_, n) => ({ total: 4 * (10 * (i + 1) + n) + 6 })));
      expect(states.filter((s) => s === 'open').length).toBeGreaterThanOrEqual(opened);
    }
    // The socket moved at least once: a reconnect happened.
    expect(states.filter((s) => s === 'open').length).toBeGreaterThanOrEqual(2);
  }, 180_000);
});
