/**
 * `pnpm bench <workloads> restate <reps>`: W1-W4 of ../shared/BENCH.md on a
 * real Restate beside our fleet (issue 14 counts our figures as ratios against
 * Restate measured in the same run on the same machine).
 *
 * - The server: the prebuilt `restate-server` binary of the npm package
 *   `@restatedev/restate-server` (RESTATE_SERVER_VERSION), installed on first
 *   use into bench/.peers/ (gitignored) with `npm install --prefix`. It is
 *   not a workspace dependency. The binary is spawned directly (not through
 *   the package's node wrapper), one node with every role, on a fresh temp
 *   data dir (removed after) and free loopback ports for ingress, admin and
 *   the node-to-node fabric, TCP only.
 * - Durability: Restate's defaults, untouched (`restate-server --dump-config`
 *   of 1.7.12): the journal goes to Bifrost's `replicated` loglet with
 *   replication 1 on this node's own log-server, whose RocksDB WAL is fsynced
 *   on every write batch (`log-server.rocksdb-disable-wal-fsync = false`);
 *   the partition store (worker.storage) is a RocksDB that is rebuilt from
 *   that log. The SDK's `ctx.run` resolves once the server has acknowledged
 *   the step's result, so each step is in the fsynced log before the next
 *   starts, as ours is in Postgres (fsync on, synchronous_commit on).
 * - The workflows: the official TypeScript SDK (`@restatedev/restate-sdk`)
 *   serving a plain Restate Service over HTTP/2 from this process (as
 *   bench.ts runs our runner in-process), registered through the admin API
 *   (POST /deployments). A Service invocation has its own durable journal
 *   and a fresh invocation id per call, which is what a run is for us.
 * - The client: the ingress's request-response call (POST /bench/<handler>),
 *   which answers when the invocation ends, through undici as bench.ts does.
 *
 * Logging: the server at `warn` (RESTATE_LOG_FILTER), the SDK's logger at warn
 * (ours run with LOG_LEVEL=warn); telemetry off (RESTATE_DISABLE_TELEMETRY).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as restate from '@restatedev/restate-sdk';
import { request } from 'undici';
import { freePort } from '@dws/test-e2e';
import { boundedLoad, cpuMs, IDLE_SECONDS, IDLE_SETTLE_SECONDS, idleWindow, warmUp, median, noopStep, oneByOne, w1Figures, w2Figures, w3Figures, pct, r1, stepGaps, type Figures, type Stamp } from '../measure.js';
import { addCounters, procCounters, zeroCounters } from '../proc-counters.js';

/** The restate-server release measured (1.x; `npm view @restatedev/restate-server versions`). */
export const RESTATE_SERVER_VERSION = '1.7.12';
// The SDK (1.12 to 1.16 at least) calls Promise.withResolvers, which Node has from 22 on; this repo runs on Node 20.
// The spec's own definition, installed only where it is missing (it is called at invocation time, not at import).
if (typeof (Promise as { withResolvers?: unknown }).withResolvers !== 'function') {
  Object.defineProperty(Promise, 'withResolvers', {
    configurable: true,
    writable: true,
    value: function withResolvers<T>() {
      let resolve!: (v: T | PromiseLike<T>) => void;
      let reject!: (e?: unknown) => void;
      const promise = new Promise<T>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      return { promise, resolve, reject };
    },
  });
}

const BENCH_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SDK_VERSION = (createRequire(import.meta.url)('@restatedev/restate-sdk/package.json') as { version: string }).version;

/** The restate-server binary of the pinned version, installed into bench/.peers/ on first use. */
async function ensureServer(): Promise<string> {
  const prefix = path.join(BENCH_DIR, '.peers', `restate-server-${RESTATE_SERVER_VERSION}`);
  const bin = path.join(prefix, 'node_modules', '@restatedev', `restate-server-${os.platform()}-${os.arch()}`, 'bin', 'restate-server');
  if (!existsSync(bin)) {
    mkdirSync(prefix, { recursive: true });
    process.stderr.write(
      `restate: installing @restatedev/restate-server@${RESTATE_SERVER_VERSION} into ${path.relative(process.cwd(), prefix)}\n`,
    );
    // --ignore-scripts: the binary ships in the platform package; no install script is needed (one would only report the install).
    await run(
      'npm',
      [
        'install',
        '--prefix',
        prefix,
        '--no-audit',
        '--no-fund',
        '--ignore-scripts',
        '--no-package-lock',
        `@restatedev/restate-server@${RESTATE_SERVER_VERSION}`,
      ],
      {
        cwd: prefix,
        timeout: 10 * 60_000,
        env: { ...process.env, SCARF_ANALYTICS: 'false' },
      },
    );
    if (!existsSync(bin)) throw new Error(`restate-server binary missing after install: ${bin}`);
  }
  const version = (await run(bin, ['--version'], { timeout: 30_000 })).trim();
  if (!version.includes(RESTATE_SERVER_VERSION)) throw new Error(`${bin} says "${version}", expected ${RESTATE_SERVER_VERSION}`);
  return bin;
}

function run(file: string, args: string[], opts: { cwd?: string; timeout: number; env?: NodeJS.ProcessEnv }): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(file, args, { ...opts, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${file} ${args.join(' ')}: ${err.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
}

/** The pid and its descendants (restate-server starts none today; counted if it ever does). */
function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    try {
      for (const tid of readdirSync(`/proc/${out[i]}/task`)) {
        const kids = readFileSync(`/proc/${out[i]}/task/${tid}/children`, 'utf8').trim();
        if (kids) out.push(...kids.split(/\s+/).map(Number));
      }
    } catch {
      // exited meanwhile
    }
  }
  return out;
}
function rssMib(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  let kb = 0;
  for (const p of processTree(pid)) {
    try {
      kb += Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      // exited
    }
  }
  return Math.round(kb / 1024);
}

/** The bench's workflows as one Restate Service, each step returning what bench.ts's noop returns. */
function benchService(stamps: Map<string, Stamp[]>) {
  const noop = noopStep(stamps);
  return restate.service({
    name: 'bench',
    handlers: {
      w1: async (ctx: restate.Context) => ctx.run('only', () => noop('', 0)),
      w2: async (ctx: restate.Context) => {
        let last = 0;
        for (let i = 0; i < 10; i++) last = (await ctx.run(`s${i}`, () => noop('', i))).i;
        return { last };
      },
      // The SDK docs: combine ctx.run promises with RestatePromise.all (not Promise.all) so the combination is journaled.
      w3: async (ctx: restate.Context) => {
        const all = await restate.RestatePromise.all(Array.from({ length: 100 }, (_, i) => ctx.run(`p${i}`, () => noop('', i))));
        return { n: all.length };
      },
      // Stamps keyed by the invocation id (our runId), which the result hands back to the client.
      w4: async (ctx: restate.Context) => {
        const runId = ctx.request().id;
        let last = 0;
        for (let i = 0; i < 500; i++) last = (await ctx.run(`s${i}`, () => noop(runId, i))).i;
        return { last, runId };
      },
    },
  });
}

export interface RestatePeer {
  readonly versions: Record<string, string>;
  run(workload: string): Promise<Figures>;
  /** The bench's warm-up (measure.ts): W2's runs, nothing recorded; the seconds it took. */
  warm(): Promise<number>;
  stop(): Promise<void>;
}

export async function startRestate(): Promise<RestatePeer> {
  const bin = await ensureServer();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dws-bench-restate-'));
  const [ingressPort, adminPort, nodePort] = [await freePort(), await freePort(), await freePort()];
  let tail = '';
  const keep = (b: Buffer) => {
    tail = (tail + b.toString()).slice(-8000);
  };
  const env = {
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RESTATE_'))),
    RESTATE_BASE_DIR: dataDir,
    // Its invoker makes a directory per partition under the temp dir and leaves them: in dataDir, they go with it.
    TMPDIR: dataDir,
    RESTATE_NODE_NAME: 'bench',
    RESTATE_LISTEN_MODE: 'tcp',
    RESTATE_INGRESS__BIND_ADDRESS: `127.0.0.1:${ingressPort}`,
    RESTATE_ADMIN__BIND_ADDRESS: `127.0.0.1:${adminPort}`,
    RESTATE_BIND_ADDRESS: `127.0.0.1:${nodePort}`,
    RESTATE_ADVERTISED_ADDRESS: `http://127.0.0.1:${nodePort}/`,
    RESTATE_LOG_FILTER: 'warn',
    RESTATE_LOG_DISABLE_ANSI_CODES: 'true',
    RESTATE_DISABLE_TELEMETRY: 'true',
    DO_NOT_TRACK: '1',
  };
  process.stderr.write(
    `restate: durability settings (defaults): ${durability(await run(bin, ['--dump-config'], { cwd: dataDir, env, timeout: 30_000 }))}\n`,
  );
  const child: ChildProcess = spawn(bin, ['--no-logo'], { cwd: dataDir, stdio: ['ignore', 'pipe', 'pipe'], env });
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  let exited: string | undefined;
  const exit = new Promise<void>((r) =>
    child.once('exit', (code, signal) => {
      exited = `restate-server exited (code ${code}, signal ${signal})`;
      r();
    }),
  );
  // If the bench dies without stop(), take the server and its data with it.
  const onExit = () => {
    child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  };
  process.once('exit', onExit);

  const stamps = new Map<string, Stamp[]>();
  const sessions = new Set<http2.ServerHttp2Session>();
  const logger: restate.LoggerTransport = (meta, message, ...rest) => {
    if (['warn', 'error'].includes(String(meta.level)))
      process.stderr.write(`restate sdk ${meta.level}: ${String(message)} ${rest.map(String).join(' ')}\n`);
  };
  const endpoint = http2.createServer(restate.createEndpointHandler({ services: [benchService(stamps)], logger }));
  endpoint.on('session', (s) => {
    sessions.add(s);
    s.once('close', () => sessions.delete(s));
  });
  await new Promise<void>((r) => endpoint.listen(0, '127.0.0.1', () => r()));
  const endpointUrl = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}`;
  const ingress = `http://127.0.0.1:${ingressPort}`;
  const admin = `http://127.0.0.1:${adminPort}`;

  const stop = async () => {
    for (const s of sessions) s.destroy();
    await new Promise<void>((r) => endpoint.close(() => r()));
    if (!exited) {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exit;
      clearTimeout(killer);
    }
    process.removeListener('exit', onExit);
    rmSync(dataDir, { recursive: true, force: true });
  };

  try {
    await until(
      'restate-server ready',
      60_000,
      () => exited,
      async () => (await get(`${admin}/health`)) && (await get(`${ingress}/restate/health`)),
    );
    const reg = await request(`${admin}/deployments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ uri: endpointUrl }),
      headersTimeout: 60_000,
      bodyTimeout: 60_000,
    });
    const regBody = await reg.body.text();
    if (reg.statusCode >= 300) throw new Error(`registering ${endpointUrl}: ${reg.statusCode} ${regBody}`);
    // Ready once the ingress knows the service and an invocation goes through (as bench.ts's setup waits for a w1 run).
    await until(
      'bench service invocable',
      30_000,
      () => exited,
      async () => (await call(ingress, 'w1', false)) !== undefined,
    );
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}\n--- restate-server output ---\n${tail}`);
  }

  const serverPid = child.pid!;
  const cpu = () => ({
    server: processTree(serverPid).reduce((a, p) => a + cpuMs(p), 0),
    self: (({ user, system }) => (user + system) / 1000)(process.cpuUsage()),
    serverCounters: processTree(serverPid).map(procCounters).reduce(addCounters, zeroCounters()),
    selfCounters: procCounters(process.pid),
  });
  const spent = (a: ReturnType<typeof cpu>, b: ReturnType<typeof cpu>, steps: number, unit = 'step') => {
    const server = b.server - a.server;
    const self = b.self - a.self;
    process.stderr.write(`  cpu ms per ${unit}: restate-server ${r1(server / steps)}, bench (endpoint + client) ${r1(self / steps)}\n`);
    // The same speed-independent counters as the fleet's (proc-counters.ts).
    for (const [k, label] of [['syscalls', `syscalls per ${unit} (read + write)`], ['wakeups', `wake-ups per ${unit} (voluntary context switches)`]] as const) {
      const sv = b.serverCounters[k] - a.serverCounters[k];
      const me = b.selfCounters[k] - a.selfCounters[k];
      process.stderr.write(`  ${label}: ${r1((sv + me) / steps)} = restate-server ${r1(sv / steps)}, bench (endpoint + client) ${r1(me / steps)}\n`);
    }
    return { server, machine: server + self };
  };
  const invoke = async (handler: string) => {
    const out = await call(ingress, handler, true);
    if (exited) throw new Error(`${exited}\n${tail}`);
    return out!;
  };

  const w1 = async (): Promise<Figures> => w1Figures(await oneByOne(200, () => invoke('w1')));

  const w2 = async (): Promise<Figures> => {
    const RUNS = 1000;
    const INFLIGHT = 50;
    const cpu0 = cpu();
    const { lat, wallS: wall } = await boundedLoad(RUNS, INFLIGHT, () => invoke('w2'));
    const steps = RUNS * 10;
    const c = spent(cpu0, cpu(), steps);
    const rss = rssMib(serverPid, 'VmRSS');
    process.stderr.write(
      `  rss MiB after W2: restate-server ${rss} (peak ${rssMib(serverPid, 'VmHWM')}), bench process ${Math.round(process.memoryUsage().rss / 1048576)}\n`,
    );
    return w2Figures({ runs: RUNS, steps, wallS: wall, lat, cpu: { system: c.server, machine: c.machine }, rssMib: rss });
  };

  const w3 = async (): Promise<Figures> => w3Figures(await oneByOne(10, () => invoke('w3')));

  const w4 = async (): Promise<Figures> => {
    const cpu0 = cpu();
    const t0 = performance.now();
    const { runId } = (await invoke('w4')) as { runId: string };
    const wall = performance.now() - t0;
    const c = spent(cpu0, cpu(), 500);
    // Time between consecutive steps' first executions, as the step functions saw them.
    const gaps = stepGaps(stamps.get(runId) ?? []);
    stamps.delete(runId);
    if (gaps.stamped !== 500) throw new Error(`w4: ${gaps.stamped} of 500 steps stamped for ${runId}`);
    return {
      wall_ms: r1(wall),
      ms_per_step_first50: gaps.first50,
      ms_per_step_last50: gaps.last50,
      machine_cpu_ms_per_step: r1(c.machine / 500),
    };
  };

  /** Its CPU with nothing to do, as the fleet's `idle` (bench.ts). */
  const idle = async (): Promise<Figures> => {
    const [settling, a, b] = await idleWindow(cpu);
    process.stderr.write(`  the first ${IDLE_SETTLE_SECONDS} s after the warm-up (not counted):\n`);
    spent(settling, a, IDLE_SETTLE_SECONDS, 'second');
    process.stderr.write(`  then ${IDLE_SECONDS} s at rest:\n`);
    const c = spent(a, b, IDLE_SECONDS, 'second');
    return { machine_cpu_ms_per_s: r1(c.machine / IDLE_SECONDS), service_cpu_ms_per_s: r1(c.server / IDLE_SECONDS) };
  };

  return {
    versions: { 'restate-server': RESTATE_SERVER_VERSION, '@restatedev/restate-sdk': SDK_VERSION },
    warm: () => warmUp(() => invoke('w2')),
    run: async (workload) => {
      switch (workload) {
        case 'w1':
          return w1();
        case 'w2':
        case 'w2ws': // its client gets only the result either way
        case 'w2wait':
          return w2();
        case 'w3':
          return w3();
        case 'w4':
        case 'w4ws': // likewise
          return w4();
        case 'idle':
          return idle();
        case 'w2spec':
        case 'w4spec':
        case 'w4ra':
        case 'w5':
        case 'w6':
        case 'w7':
        case 'soak':
          return { skipped: 1 };
        default:
          throw new Error(`unknown workload ${workload}`);
      }
    },
    stop,
  };
}

/** The settings that decide when a step counts as stored, from `restate-server --dump-config`. */
function durability(toml: string): string {
  const want = [
    'default-replication',
    'bifrost.default-provider',
    'log-server.rocksdb-disable-wal',
    'log-server.rocksdb-disable-wal-fsync',
    'worker.storage.rocksdb-disable-wal',
  ];
  const found = new Map<string, string>();
  let section = '';
  for (const line of toml.split('\n')) {
    const head = /^\[(.+)\]$/.exec(line.trim());
    if (head) section = head[1]!;
    const kv = /^([a-z0-9-]+) = (.+)$/.exec(line.trim());
    if (kv) found.set(section ? `${section}.${kv[1]}` : kv[1]!, kv[2]!);
  }
  return want.map((k) => `${k} = ${found.get(k) ?? '(unset)'}`).join(', ');
}

/** The ingress's request-response call: answers when the invocation has ended. */
async function call(ingress: string, handler: string, strict: boolean): Promise<unknown> {
  const res = await request(`${ingress}/bench/${handler}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
    headersTimeout: 120_000,
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) {
    if (strict) throw new Error(`restate ${handler}: ${res.statusCode} ${text}`);
    return undefined;
  }
  return JSON.parse(text) as unknown;
}

async function get(url: string): Promise<boolean> {
  try {
    const res = await request(url);
    await res.body.dump();
    return res.statusCode === 200;
  } catch {
    return false;
  }
}

async function until(what: string, ms: number, dead: () => string | undefined, ok: () => Promise<boolean>): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const gone = dead();
    if (gone) throw new Error(`${what}: ${gone}`);
    try {
      if (await ok()) return;
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what}: not after ${ms} ms`);
}
