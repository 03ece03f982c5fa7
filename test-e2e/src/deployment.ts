import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '@dws/testing';
import { startService, waitReady, type Proc } from './processes.js';
import { freshDatabase, freshNamespace, realInfra, uniquePrefix } from './infra.js';

export type Mode = 'embedded' | 'dev-real' | 'fleet';

export const SERVICES = ['invoker', 'scheduler', 'ingest', 'approvals', 'webhook-dispatcher', 'gateway'] as const;

export interface Deployment {
  readonly mode: Mode;
  /** Gateway root, e.g. http://127.0.0.1:23456 (the API is under /v1). */
  readonly base: string;
  /** Every gateway replica's root (fleet with `replicas.gateway` > 1); `[base]` otherwise. */
  readonly bases: string[];
  readonly secretKey: string;
  readonly publicKey: string;
  readonly signingKey: string;
  /**
   * kill -9 one process (`dev` in the one-process modes) and start it again with the same environment.
   * Replicas past the first are named `<service>-<i>` (`ingest-1`).
   */
  crashAndRestart(name: string, beforeRestart?: () => Promise<void>): Promise<void>;
  /** kill -9 one process and leave it down (a replica lost for good; `stop` skips it). */
  crash?(name: string): Promise<void>;
  /**
   * A rolling restart of one process: SIGTERM, up to 30 s to drain and exit on
   * its own (then SIGKILL), start it again and wait until it is ready. Says how
   * the old process went.
   */
  restart?(name: string): Promise<{ ms: number; forced: boolean; code: number | null }>;
  /** The deployment's own database on the real Postgres (absent when embedded). */
  readonly databaseUrl?: string;
  /** Pids of the service processes (for CPU accounting in benchmarks). */
  pids?(): number[];
  /** Each process's own HTTP port by name (`gateway`, `scheduler`, ... or `dev`): health and /metrics. */
  ports?(): Record<string, number>;
  stop(): Promise<void>;
}

/**
 * Start the fleet the way a user does: `pnpm dev` (embedded or on real
 * Postgres + NATS) or six `pnpm start:<service>` processes. Each deployment
 * gets its own data directory or database and bus namespace.
 */
export async function startDeployment(
  mode: Mode,
  opts: {
    env?: Record<string, string>;
    /** Fleet only: processes per service (default 1 each). */
    replicas?: Partial<Record<(typeof SERVICES)[number], number>>;
    /** Fleet only: false leaves SERVICE_SCHEDULER_URL unset, so checkpoints go through the gateway. @default true */
    directCheckpoints?: boolean;
    /** Fleet only: one SERVICE_SCHEDULER_URL for every scheduler replica (replicas behind one address); by default each names its own port. */
    schedulerUrl?: string;
  } = {},
): Promise<Deployment> {
  const keys = {
    SERVICE_DEV_SECRET_KEY: `sk_e2e_${uniquePrefix('')}`,
    SERVICE_DEV_PUBLIC_KEY: `pk_e2e_${uniquePrefix('')}`,
    SERVICE_SIGNING_KEY: `signing-${uniquePrefix('')}`,
  };
  const cleanups: (() => Promise<void>)[] = [];
  const procs = new Map<string, { proc: Proc; entry: string; env: Record<string, string>; port: number }>();
  const bases: string[] = [];

  let databaseUrl: string | undefined;
  // Webhook receivers of the tests listen on 127.0.0.1: allowed, as under `pnpm dev` (a test may turn it off).
  let shared: Record<string, string> = { ...keys, HOST: '127.0.0.1', SERVICE_RUN_LEASE_MS: '2000', SERVICE_WEBHOOK_ALLOW_PRIVATE: 'on', ...opts.env };
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
    const ns = freshNamespace(infra.natsUrl);
    cleanups.push(ns.drop);
    shared = { ...shared, DATABASE_URL: db.url, NATS_URL: infra.natsUrl, SERVICE_BUS_PREFIX: ns.prefix };
  }

  const launch = (name: string, entry: string, env: Record<string, string>, p: number) => {
    const proc = startService(name, entry, { ...env, PORT: String(p) });
    procs.set(name, { proc, entry, env, port: p });
    return proc;
  };
  /**
   * Launch on a port picked now and wait until ready; the port is free when
   * picked but another test file's process may take it first (ours then exits
   * with EADDRINUSE): then again on another port.
   */
  const start = async (name: string, entry: string, envOf: (p: number) => Record<string, string>): Promise<number> => {
    for (let attempt = 1; ; attempt++) {
      const p = await freePort();
      const proc = launch(name, entry, envOf(p), p);
      try {
        await waitReady(`http://127.0.0.1:${p}`, proc);
        return p;
      } catch (err) {
        if (attempt >= 3 || !proc.output().includes('EADDRINUSE')) throw err;
      }
    }
  };
  const stopAll = async () => {
    // Gateway first, like a rolling shutdown; then the rest.
    const order = ['gateway', 'dev', ...SERVICES];
    const rank = (name: string) => order.indexOf(name.replace(/-\d+$/, ''));
    for (const name of [...procs.keys()].sort((a, b) => rank(a) - rank(b))) await procs.get(name)?.proc.kill('SIGTERM');
    for (const c of cleanups.reverse()) await c();
  };
  try {
    if (mode === 'fleet') {
      const invokerUrls: string[] = [];
      for (const s of SERVICES) {
        for (let i = 0; i < (opts.replicas?.[s] ?? 1); i++) {
          // The gateway hands GET /v1/connect to the invoker processes.
          const envOf = (p: number) =>
            s === 'gateway'
              ? { ...shared, SERVICE_INVOKER_URL: invokerUrls.join(',') }
              : // Each scheduler replica takes checkpoints on its own port (ctx.checkpointUrl), as the chart and compose set it.
                s === 'scheduler' && opts.directCheckpoints !== false
                ? { ...shared, SERVICE_SCHEDULER_URL: opts.schedulerUrl ?? `http://127.0.0.1:${p}` }
                : shared;
          const p = await start(i === 0 ? s : `${s}-${i}`, `services/${s}/src/bin.ts`, envOf);
          if (s === 'invoker') invokerUrls.push(`http://127.0.0.1:${p}`);
          if (s === 'gateway') bases.push(`http://127.0.0.1:${p}`);
        }
      }
    } else {
      bases.push(`http://127.0.0.1:${await start('dev', 'apps/fleet/src/dev.ts', () => shared)}`);
    }
  } catch (err) {
    await stopAll();
    throw err;
  }

  const base = bases[0]!;
  return {
    mode,
    base,
    bases,
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
    async crash(name) {
      const p = procs.get(name);
      if (!p) throw new Error(`no process ${name}`);
      await p.proc.kill('SIGKILL');
      procs.delete(name);
    },
    async restart(name) {
      const p = procs.get(name);
      if (!p) throw new Error(`no process ${name}`);
      const stopped = await p.proc.kill('SIGTERM', 30_000);
      const proc = launch(name, p.entry, p.env, p.port);
      await waitReady(`http://127.0.0.1:${p.port}`, proc);
      return stopped;
    },
    databaseUrl,
    pids: () => [...procs.values()].map((p) => p.proc.child.pid).filter((x): x is number => x !== undefined),
    ports: () => Object.fromEntries([...procs.entries()].map(([name, p]) => [name, p.port])),
    stop: stopAll,
  };
}
