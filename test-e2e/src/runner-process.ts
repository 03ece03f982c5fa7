/**
 * A user's runner in a process of its own, to be SIGKILLed mid-step
 * (runner-crash.e2e.test.ts). Serves workflow `ten`: ten sequential steps,
 * each appending `<runId> <step>` to the journal file as it executes; step 5
 * hangs on its first execution (the journal then holds `<runId> 5`), so the
 * test can kill the process while that step is in flight. Each pass (a call
 * of the handler) appends `<runId> pass`.
 *
 * Usage: node --import tsx runner-process.ts <api base> <secret key> <signing key> <journal file> [serve|connect]
 * Prints `ready` once registered.
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRunner } from '@dws/sdk';

const [base, apiKey, signingKey, journal, transport = 'serve'] = process.argv.slice(2);
if (!base || !apiKey || !signingKey || !journal) throw new Error('usage: runner-process.ts <api base> <secret key> <signing key> <journal file>');

const executions = (runId: string, step: number): number =>
  readFileSync(journal, 'utf8')
    .split('\n')
    .filter((l) => l === `${runId} ${step}`).length;

let handler: (req: never, res: never) => void = () => undefined;
const server = createServer((req, res) => handler(req as never, res as never));
await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
const runner = createRunner({ app: 'crashy', url: `${base}/v1`, apiKey, signingKey, publicUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/invoke` });
runner.workflow('ten', async ({ step, ctx }) => {
  appendFileSync(journal, `${ctx.runId} pass\n`);
  let total = 0;
  for (let i = 1; i <= 10; i++) {
    total += await step.run(`step-${i}`, async () => {
      appendFileSync(journal, `${ctx.runId} ${i}\n`);
      if (i === 5 && executions(ctx.runId, 5) === 1) await new Promise(() => {}); // hangs until the process is killed
      return i;
    });
  }
  return { total };
});
if (transport === 'connect') {
  await runner.connect().ready;
} else {
  const serve = runner.serve();
  handler = (req, res) => void serve(req, res);
  await runner.register();
  runner.startHeartbeat();
}
process.stdout.write('ready\n');
