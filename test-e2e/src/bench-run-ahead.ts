/**
 * Measures the SDK's run-ahead budget (`stepBudgetMs`): passes and wall time
 * of one run of N sequential no-op steps (BENCH.md W4 shape), per budget,
 * against `pnpm dev` (embedded) and the fleet on Postgres + NATS.
 *
 *   npx tsx test-e2e/src/bench-run-ahead.ts [steps=500] [modes=embedded,fleet] [budgets=0,10,50,250,2000] [reps=3] [stepMs=0]
 *
 * stepMs > 0 makes every step wait that long (I/O-like) instead of being a no-op.
 *
 * Prints a table; the numbers in libs/sdk/README.md come from it.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { createRunner } from '@dws/sdk';
import { api, eventually } from './api.js';
import { startDeployment, type Mode } from './deployment.js';

const [stepsArg, modesArg, budgetsArg, repsArg, stepMsArg] = process.argv.slice(2);
const STEPS = Number(stepsArg ?? 500);
const MODES = (modesArg ?? 'embedded,fleet').split(',') as Mode[];
const BUDGETS = (budgetsArg ?? '0,10,50,250,2000').split(',').map(Number);
const REPS = Number(repsArg ?? 3);
const STEP_MS = Number(stepMsArg ?? 0);
const work = (i: number) =>
  STEP_MS > 0
    ? new Promise<{ ok: boolean; i: number; t: number }>((r) => setTimeout(() => r({ ok: true, i, t: Date.now() }), STEP_MS))
    : { ok: true, i, t: Date.now() };

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  if (!process.env.TEST_DATABASE_URL) process.env.TEST_DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  if (!process.env.TEST_NATS_URL) process.env.TEST_NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  const rows: string[] = [];
  for (const mode of MODES) {
    const dep = await startDeployment(mode);
    try {
      for (const budget of BUDGETS) {
        const app = `bench-${budget}`;
        let passes = 0;
        const runner = createRunner({ app, url: `${dep.base}/v1`, apiKey: dep.secretKey, signingKey: dep.signingKey, stepBudgetMs: budget });
        runner.workflow('w4', async ({ step }) => {
          let last = 0;
          for (let i = 0; i < STEPS; i++) last = (await step.run(`s${i}`, () => work(i))).i;
          return { last };
        });
        const serve = runner.serve();
        const server = createServer((req: IncomingMessage, res: ServerResponse) => {
          passes++;
          void serve(req, res);
        });
        await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
        const port = (server.address() as AddressInfo).port;
        const reg = createRunner({
          app,
          url: `${dep.base}/v1`,
          apiKey: dep.secretKey,
          signingKey: dep.signingKey,
          publicUrl: `http://127.0.0.1:${port}/invoke`,
        });
        reg.workflow('w4', () => null);
        await reg.register();
        await eventually('trigger index', async () => {
          const r = await api(dep.base, 'GET', `/v1/workflows?app=${app}`, { key: dep.secretKey });
          return r.body?.some?.((w: { name: string }) => w.name === 'w4') ? true : undefined;
        });
        const walls: number[] = [];
        const runMs: number[] = [];
        const counts: number[] = [];
        for (let rep = 0; rep < REPS; rep++) {
          passes = 0;
          const t0 = performance.now();
          const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'w4', app, data: {} } });
          const runId = sent.body.runId as string;
          const done = await eventually(
            'run succeeded',
            async () => {
              const r = await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.secretKey });
              if (r.body?.status === 'failed') throw new Error(JSON.stringify(r.body));
              return r.body?.status === 'succeeded' ? r.body : undefined;
            },
            600_000,
          );
          walls.push(performance.now() - t0);
          runMs.push(Number(done.durationMs));
          counts.push(passes);
        }
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
        rows.push(
          `| ${mode} | ${budget} | ${median(counts)} | ${Math.round(median(runMs))} | ${Math.round(Math.min(...runMs))}-${Math.round(Math.max(...runMs))} | ${(median(runMs) / STEPS).toFixed(2)} | ${Math.round(median(walls))} |`,
        );
        console.log(rows.at(-1));
      }
    } finally {
      await dep.stop();
    }
  }
  const what = STEP_MS > 0 ? `steps of ${STEP_MS} ms each` : 'no-op steps';
  console.log(`\n${STEPS} sequential ${what}, median of ${REPS}; ${os.cpus().length} x ${os.cpus()[0]?.model}, node ${process.version}`);
  console.log('| mode | stepBudgetMs | passes | run ms (durationMs) | min-max | ms/step | client wall ms (50 ms polling) |\n|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(r);
}

await main();
