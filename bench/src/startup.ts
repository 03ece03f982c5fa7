/**
 * `npx tsx bench/src/startup.ts [reps=3] [variants=ts,dist,dist-maps] [targets=<six services>,embedded]`:
 * start-up time and idle memory of each service, run as TypeScript through tsx (`ts`), as
 * its bundle on plain node (`dist`: what `pnpm start:<x>`, `pnpm dev`, the image and the e2e
 * harness run) and as the bundle with `--enable-source-maps` (`dist-maps`). Each service is
 * started alone on a fresh database of the real Postgres and NATS (TEST_DATABASE_URL |
 * DATABASE_URL, TEST_NATS_URL | NATS_URL, else the local defaults); `embedded` is `pnpm dev`'s
 * process on a PGlite directory made before the timed starts. The time is from spawn to the
 * first 200 of /readyz, the RSS is read 5 s later. Prints medians.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { bundleOf, ensureBuilt, freePort, freshDatabase, freshNamespace, nodeFlagsOf } from '@dws/test-e2e';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SERVICES = ['gateway', 'ingest', 'scheduler', 'invoker', 'approvals', 'webhook-dispatcher'];
const reps = Number(process.argv[2] ?? 3);
const variants = (process.argv[3] ?? 'ts,dist,dist-maps').split(',');
const targets = (process.argv[4] ?? [...SERVICES, 'embedded'].join(',')).split(',');
const databaseUrl = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const natsUrl = process.env.TEST_NATS_URL || process.env.NATS_URL || 'nats://127.0.0.1:4222';

function argsFor(variant: string, entry: string): string[] {
  // As package.json's command starts it (pnpm dev: --v8-pool-size=1 --max-semi-space-size=8).
  const flags = nodeFlagsOf(entry);
  if (variant === 'ts') return [...flags, '--import', 'tsx', path.join(ROOT, entry)];
  const bundle = path.join(ROOT, bundleOf(entry));
  return variant === 'dist-maps' ? [...flags, '--enable-source-maps', bundle] : [...flags, bundle];
}

async function once(variant: string, service: string, env: Record<string, string>): Promise<{ ms: number; rss: number }> {
  const port = await freePort();
  const t0 = performance.now();
  const entry = service === 'embedded' ? 'apps/fleet/src/dev.ts' : `services/${service}/src/bin.ts`;
  const child = spawn(process.execPath, argsFor(variant, entry), {
    cwd: ROOT,
    env: { ...process.env, ...env, LOG_LEVEL: 'warn', HOST: '127.0.0.1', PORT: String(port) },
    stdio: 'ignore',
  });
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${service} exited ${child.exitCode}`);
      if (performance.now() - t0 > 60_000) throw new Error(`${service} not ready in 60 s`);
      const ok = await request(`http://127.0.0.1:${port}/readyz`).then(
        async (r) => (await r.body.dump(), r.statusCode === 200),
        () => false,
      );
      if (ok) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const ms = performance.now() - t0;
    await new Promise((r) => setTimeout(r, 5000));
    const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1]);
    return { ms, rss: kb / 1024 };
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

ensureBuilt();
const db = await freshDatabase(databaseUrl, 'startup');
const ns = freshNamespace(natsUrl, 'startup');
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dws-startup-'));
try {
  const fleetEnv = { DATABASE_URL: db.url, NATS_URL: natsUrl, SERVICE_BUS_PREFIX: ns.prefix };
  const embeddedEnv = { DATABASE_URL: '', NATS_URL: '', SERVICE_DATA_DIR: dataDir };
  const envOf = (s: string) => (s === 'embedded' ? embeddedEnv : fleetEnv);
  // One start of each first: migrations, streams and the PGlite directory are made once, not in the timed starts.
  for (const s of targets) await once('dist', s, envOf(s));
  const rows: string[] = [];
  for (const s of targets) {
    const env = envOf(s);
    const cells: string[] = [];
    for (const v of variants) {
      const runs = [];
      for (let i = 0; i < reps; i++) runs.push(await once(v, s, env));
      cells.push(`${Math.round(median(runs.map((r) => r.ms)))} ms, ${Math.round(median(runs.map((r) => r.rss)))} MiB`);
    }
    rows.push(`| ${s} | ${cells.join(' | ')} |`);
    process.stderr.write(`${rows.at(-1)}\n`);
  }
  process.stdout.write(`\n| service | ${variants.join(' | ')} |\n|---|${variants.map(() => '---|').join('')}\n${rows.join('\n')}\n`);
} finally {
  await ns.drop();
  await db.drop();
  rmSync(dataDir, { recursive: true, force: true });
}
