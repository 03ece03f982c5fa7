import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createRunner, type Connection } from '@dws/sdk';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunnersFleet } from '../src/runners-fleet.js';

/**
 * A runner with no inbound address: it dials GET /v1/connect, registers on
 * the socket, and runs workflows over it, through `pnpm dev` (the gateway
 * hands the upgrade to the invoker in process) and through the fleet (the
 * gateway proxies it to an invoker process).
 */
const modes: (Mode | 'fleet')[] = realInfra() ? ['embedded', 'dev-real', 'fleet'] : ['embedded'];
if (!realInfra()) console.warn('\n!!! Postgres/NATS missing: Connect e2e runs embedded only (dev-real and fleet SKIPPED) !!!\n');

describe.each(modes)('Connect runner on %s', (mode) => {
  let dep: Deployment;
  let conn: Connection;
  const ran: string[] = [];

  const runUntilDone = async (body: Record<string, unknown>) => {
    const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body });
    expect(sent.status).toBe(202);
    const runId = sent.body.runId as string;
    return eventually(
      `run ${runId} to finish`,
      async () => {
        const r = await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.publicKey });
        return runReached(r.body);
      },
      60_000,
    );
  };

  beforeAll(async () => {
    dep = mode === 'fleet' ? await startRunnersFleet({ invokers: 1 }) : await startDeployment(mode);
    const runner = createRunner({ url: `${dep.base}/v1`, apiKey: dep.secretKey, signingKey: dep.signingKey, app: 'conn', runnerId: 'conn-1' });
    runner.workflow<{ n: number }>('tally', { triggers: [{ event: 'conn/tally' }] }, async ({ event, step, ctx }) => {
      const a = await step.run('a', () => {
        ran.push(`a:${ctx.runId}`);
        return event.data.n + 1;
      });
      const b = await step.run('b', () => a * 10);
      await step.sleep('nap', 50);
      const c = await step.run('c', () => b + 1);
      return { a, b, c, runner: ctx.runner };
    });
    conn = runner.connect();
    await conn.ready;
  }, 180_000);

  afterAll(async () => {
    await conn?.close();
    await dep?.stop();
  }, 60_000);

  it('lists the connect runner as live, connected and holding the right key', async () => {
    const r = await api(dep.base, 'GET', '/v1/runners?app=conn', { key: dep.publicKey });
    expect(r.status).toBe(200);
    expect(r.body).toEqual([
      expect.objectContaining({ id: 'conn-1', app: 'conn', transport: 'connect', live: true, connected: true, keyMatch: true, workflows: ['tally'] }),
    ]);
  });

  it('runs an event-triggered workflow over the socket to succeeded', async () => {
    const run = await runUntilDone({ name: 'conn/tally', data: { n: 1 } });
    expect(run.result).toEqual({ a: 2, b: 20, c: 21, runner: '' });
    expect(ran.filter((x) => x === `a:${run.id}`)).toHaveLength(1);
    const steps = await api(dep.base, 'GET', `/v1/runs/${run.id}/steps`, { key: dep.secretKey });
    expect(steps.body.map((s: { name: string; status: string }) => [s.name, s.status])).toEqual([
      ['a', 'succeeded'],
      ['b', 'succeeded'],
      ['nap', 'succeeded'],
      ['c', 'succeeded'],
    ]);
  }, 60_000);

  it('pins a run to the connect runner by its id', async () => {
    const run = await runUntilDone({ name: 'conn/tally', data: { n: 5 }, runner: 'conn-1' });
    expect(run.result).toEqual({ a: 6, b: 60, c: 61, runner: 'conn-1' });
  }, 60_000);

  it('refuses a socket without a secret key', async () => {
    const withPublic = createRunner({ url: `${dep.base}/v1`, apiKey: dep.publicKey, app: 'conn' });
    withPublic.workflow('x', () => 1);
    await expect(withPublic.connect().ready).rejects.toThrow(/refused with 403/);
    const unknown = createRunner({ url: `${dep.base}/v1`, apiKey: 'sk_not_a_key', app: 'conn' });
    unknown.workflow('x', () => 1);
    await expect(unknown.connect().ready).rejects.toThrow(/refused with 401/);
  });
});
