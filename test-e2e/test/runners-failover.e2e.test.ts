import { afterEach, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRunner, type Connection, type Runner } from '@dws/sdk';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunnersFleet } from '../src/runners-fleet.js';

/**
 * Two runners of one app; the one executing a step is killed in the middle
 * of it. The service notices (a dropped HTTP request, a closed socket),
 * retries the pass, routes it to the survivor, and the run succeeds there.
 */
type Transport = 'serve' | 'connect';
const cases: ['embedded' | 'fleet', Transport][] = [
  ['embedded', 'serve'],
  ['embedded', 'connect'],
];
if (realInfra()) cases.push(['fleet', 'serve'], ['fleet', 'connect']);

interface Killable {
  id: string;
  kill(): Promise<void>;
}

describe.each(cases)('a runner killed mid-run (%s, %s)', (mode, transport) => {
  let dep: Deployment | undefined;
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c().catch(() => undefined);
    await dep?.stop();
  }, 60_000);

  it('is finished by the other runner', async () => {
    dep = mode === 'fleet' ? await startRunnersFleet({ invokers: 1 }) : await startDeployment('embedded');
    const d = dep;
    const app = `fo-${transport}`;
    const executions: string[] = [];
    let victimStarted: (id: string) => void = () => undefined;
    const started = new Promise<string>((resolve) => (victimStarted = resolve));

    const define = (r: Runner, id: string) =>
      r.workflow(`relay`, { triggers: [{ event: `${app}/go` }] }, async ({ step }) => {
        const first = await step.run('first', () => {
          executions.push(`first@${id}`);
          return 1;
        });
        // Slow enough that the first pass reports `first` before it starts (run-ahead stops at the 0 budget).
        const slow = await step.run('slow', async () => {
          executions.push(`slow@${id}`);
          if (executions.filter((e) => e.startsWith('slow@')).length === 1) {
            victimStarted(id);
            await new Promise(() => undefined); // the process dies before this step ends
          }
          return 2;
        });
        return { first, slow, finishedBy: id };
      });

    const start = async (id: string): Promise<Killable> => {
      const common = { url: `${d.base}/v1`, apiKey: d.secretKey, signingKey: d.signingKey, app, runnerId: id, stepBudgetMs: 0 };
      if (transport === 'connect') {
        const runner = createRunner(common);
        define(runner, id);
        const conn: Connection = runner.connect({ minBackoffMs: 50 });
        cleanups.push(() => conn.close());
        await conn.ready;
        // The runner goes away mid-step: its socket closes with the invoke unanswered.
        return { id, kill: () => conn.close() };
      }
      const server: Server = createServer();
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const runner = createRunner({ ...common, publicUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/invoke` });
      define(runner, id);
      const serve = runner.serve();
      server.on('request', (req, res) => void serve(req, res));
      await runner.register();
      const kill = async () => {
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
      };
      cleanups.push(kill);
      return { id, kill };
    };
    const runners = [await start(`${transport}-a`), await start(`${transport}-b`)];

    const sent = await api(d.base, 'POST', '/v1/events', { key: d.secretKey, body: { name: `${app}/go`, data: {} } });
    const runId = sent.body.runId as string;
    const victimId = await started;
    await runners.find((r) => r.id === victimId)!.kill();
    const survivor = runners.find((r) => r.id !== victimId)!.id;

    const run = await eventually(
      'the run to succeed on the survivor',
      async () => {
        const r = await api(d.base, 'GET', `/v1/runs/${runId}`, { key: d.secretKey });
        return runReached(r.body);
      },
      90_000,
    );
    expect(run.result).toEqual({ first: 1, slow: 2, finishedBy: survivor });
    // `first` was persisted before the crash: it ran once. `slow` ran on the victim, then again on the survivor.
    expect(executions.filter((e) => e.startsWith('first@'))).toHaveLength(1);
    expect(executions.filter((e) => e.startsWith('slow@'))).toEqual([`slow@${victimId}`, `slow@${survivor}`]);
  }, 180_000);
});
