/**
 * The whole example with one command, no key and no network:
 *
 *   pnpm --filter @dws/example-agent-ai demo
 *
 * Starts the fake model server (Anthropic's Messages API shape) and the
 * service (`pnpm dev`, embedded, on a spare port) pointed at it, connects the
 * runner, opens a ticket, plays the reviewer who lowers the refund (approve
 * with edits), and prints the run's reply, its scores and each model call's
 * usage. Exits 0 when the run succeeded.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createClient } from '@dws/sdk';
import { startFakeModel } from './fake-model.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const KEY = 'sk_dev_agent_ai';

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const model = await startFakeModel(0);
const modelUrl = `http://127.0.0.1:${(model.address() as { port: number }).port}`;
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dws-agent-ai-'));
// As `pnpm dev` does: build the bundles when they are missing or stale, run the embedded one.
if (spawnSync(process.execPath, [path.join(ROOT, 'scripts/build.mjs'), '--if-stale', '--quiet'], { stdio: 'inherit' }).status !== 0) {
  throw new Error('node scripts/build.mjs failed');
}
const service = spawn(process.execPath, [path.join(ROOT, 'dist/apps/fleet/dev.js')], {
  cwd: ROOT,
  env: {
    ...process.env,
    PORT: String(port),
    SERVICE_DATA_DIR: dataDir,
    SERVICE_DEV_SECRET_KEY: KEY,
    SERVICE_ANTHROPIC_BASE_URL: modelUrl,
    SERVICE_ANTHROPIC_API_KEY: 'sk-ant-fake',
    LOG_LEVEL: 'warn',
    DATABASE_URL: '',
    NATS_URL: '',
  },
  stdio: ['ignore', 'ignore', 'inherit'],
});
let code = 1;
try {
  await until('the service', async () => ((await fetch(`${base}/readyz`)).ok ? true : undefined), 60_000);
  process.env.SERVICE_URL = `${base}/v1`;
  process.env.SERVICE_API_KEY = KEY;
  const { runner } = await import('./workflows.js');
  const conn = runner.connect();
  await conn.ready;
  process.stdout.write(`service on ${base}, fake model on ${modelUrl}, runner connected\n`);

  const client = createClient();
  const sent = await until('the event to start a run', async () => {
    const r = await client.send({ name: 'support/ticket.opened', data: { ticketId: 't-1', orderId: 'o-1', message: 'The tea arrived cold, refund please' } });
    return r.runId;
  });
  const pending = await until('the refund to wait for a reviewer', async () => (await client.approvals.list({ status: 'pending', runId: sent }))[0]);
  const args = pending.args as Record<string, unknown>;
  process.stdout.write(`the agent proposes ${pending.tool} ${JSON.stringify(args)} (risk ${pending.risk}): the reviewer approves 60 instead\n`);
  await client.approvals.decide(pending.id, { status: 'approved', args: { ...args, amount: 60 } });
  const run = await client.runs.wait(sent, { timeoutMs: 60_000 });
  const scores = await client.runs.scores(sent);
  const steps = await client.runs.steps(sent);
  process.stdout.write(`run ${run.status}: ${JSON.stringify(run.result)}\n`);
  process.stdout.write(`scores: ${scores.map((s) => `${s.name}=${JSON.stringify(s.value)}`).join(', ')}\n`);
  for (const s of steps.filter((x) => x.usage)) process.stdout.write(`model call ${s.name}: ${JSON.stringify(s.usage)}\n`);
  code = run.status === 'succeeded' ? 0 : 1;
  await conn.close();
} catch (err) {
  process.stderr.write(`demo failed: ${(err as Error).message}\n`);
} finally {
  service.kill('SIGTERM');
  await new Promise((r) => service.once('exit', r));
  model.close();
  rmSync(dataDir, { recursive: true, force: true });
}
process.exit(code);
