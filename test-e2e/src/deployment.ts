import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, startTs, waitReady, type Proc } from './processes.js';
import { freshDatabase, realInfra, uniquePrefix } from './infra.js';

export type Mode = 'embedded' | 'dev-real' | 'fleet';

export const SERVICES = ['invoker', 'scheduler', 'ingest', 'approvals', 'webhook-dispatcher', 'gateway'] as const;

export interface Deployment {
  readonly mode: Mode;
  /** Gateway root, e.g. http://127.0.0.1:23456 (the API is under /v1). */
  readonly base: string;
  readonly secretKey: string;
  readonly publicKey: string;
  readonly signingKey: string;
  /** kill -9 one process (`dev` in the one-process modes) and start it again with the same environment. */
  crashAndRestart(name: string, beforeRestart?: () => Promise<void>): Promise<void>;
  /** The deployment's own database on the real Postgres (absent when embedded). */
  readonly databaseUrl?: string;
  /** Pids of the service processes (for CPU accounting in benchmarks). */
  pids?(): number[];
  stop(): Promise<void>;
}

/**
 * Start the fleet the way a user does: `pnpm dev` (embedded or on real
 * Postgres + NATS) or six `pnpm start:<service>` processes. Each deployment
 * gets its own data directory or database and bus namespace.
 */
export async function startDeployment(mode: Mode, opts: { env?: Record<string, string> } = {}): Promise<Deployment> {
  const port = await freePort();
  const keys = {
    SERVICE_DEV_SECRET_KEY: `sk_e2e_${uniquePrefix('')}`,
    SERVICE_DEV_PUBLIC_KEY: `pk_e2e_${uniquePrefix('')}`,
    SERVICE_SIGNING_KEY: `signing-${uniquePrefix('')}`,
  };
  const cleanups: (() => Promise<void>)[] = [];
  const procs = new Map<string, { proc: Proc; entry: string; env: Record<string, string>; port: number }>();
  const base = `http://127.0.0.1:${port}`;

  let databaseUrl: string | undefined;
  let shared: Record<string, string> = { ...keys, HOST: '127.0.0.1', SERVICE_RUN_LEASE_MS: '2000', ...opts.env };
  if (mode === 'embedded') {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dws-e2e-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    shared = { ...shared, SERVICE_DATA_DIR: dir, DATABASE_URL: '', NATS_URL: '' };
  } else {
    const infra = realInfra();
    if (!infra) throw new Error('real Postgres and NATS are required for this mode');
    const db = await freshDatabase(infra.databaseUrl, mode === 'fleet' ? 'fleet' : 'dev');
    cleanups.push(db.drop);
    databaseUrl = db.url;
    shared = { ...shared, DATABASE_URL: db.url, NATS_URL: infra.natsUrl, SERVICE_BUS_PREFIX: uniquePrefix('e2e') };
  }

  const launch = (name: string, entry: string, env: Record<string, string>, p: number) => {
    const proc = startTs(name, entry, { ...env, PORT: String(p) });
    procs.set(name, { proc, entry, env, port: p });
    return proc;
  };
  const stopAll = async () => {
    // Gateway first, like a rolling shutdown; then the rest.
    for (const name of ['gateway', 'dev', ...SERVICES]) await procs.get(name)?.proc.kill('SIGTERM');
    for (const c of cleanups.reverse()) await c();
  };
  try {
    if (mode === 'fleet') {
      let invokerUrl = '';
      for (const s of SERVICES) {
        const p = s === 'gateway' ? port : await freePort();
        if (s === 'invoker') invokerUrl = `http://127.0.0.1:${p}`;
        // The gateway hands GET /v1/connect to the invoker process.
        const env = s === 'gateway' ? { ...shared, SERVICE_INVOKER_URL: invokerUrl } : shared;
        const proc = launch(s, `services/${s}/src/bin.ts`, env, p);
        await waitReady(`http://127.0.0.1:${p}`, proc);
      }
    } else {
      await waitReady(base, launch('dev', 'apps/fleet/src/dev.ts', shared, port));
    }
  } catch (err) {
    await stopAll();
    throw err;
  }

  return {
    mode,
    base,
    secretKey: keys.SERVICE_DEV_SECRET_KEY,
    publicKey: keys.SERVICE_DEV_PUBLIC_KEY,
    signingKey: keys.SERVICE_SIGNING_KEY,
    async crashAndRestart(name, beforeRestart) {
      const p = procs.get(name);
      if (!p) throw new Error(`no process ${name}`);
      await p.proc.kill('SIGKILL');
      await beforeRestart?.();
      const proc = launch(name, p.entry, p.env, p.port);
      await waitReady(`http://127.0.0.1:${p.port}`, proc);
    },
    databaseUrl,
    pids: () => [...procs.values()].map((p) => p.proc.child.pid).filter((x): x is number => x !== undefined),
    stop: stopAll,
  };
}
