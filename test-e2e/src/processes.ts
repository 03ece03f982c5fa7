import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const tsxLoader = createRequire(path.join(ROOT, 'package.json')).resolve('tsx');

export interface Proc {
  readonly name: string;
  readonly child: ChildProcess;
  /** Everything the process printed, for failure messages. */
  output(): string;
  /**
   * Send `signal` and wait for the exit; SIGKILL after `graceMs`. Says how
   * long the exit took, whether it had to be forced, and the exit code.
   */
  kill(signal?: NodeJS.Signals, graceMs?: number): Promise<{ ms: number; forced: boolean; code: number | null }>;
}

/**
 * The bundle scripts/build.mjs makes of an entry point: dist/ mirrors the
 * source path without `src/` (services/scheduler/src/bin.ts ->
 * dist/services/scheduler/bin.js, apps/fleet/src/dev.ts -> dist/apps/fleet/dev.js).
 */
export function bundleOf(entry: string): string {
  return path.join('dist', entry.replace('/src/', '/').replace(/\.ts$/, '.js'));
}

/**
 * Builds dist/ unless this process or its parent already did (DWS_BUILT=1,
 * set here and by the jest e2e global setup, which builds once per test
 * session): the first service a process starts is never stale code, and the
 * rest start without a build.
 */
export function ensureBuilt(): void {
  if (process.env.DWS_BUILT === '1') return;
  const res = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'build.mjs'), '--if-stale', '--quiet'], {
    cwd: ROOT,
    stdio: 'inherit',
  });
  if (res.status !== 0) throw new Error(`node scripts/build.mjs failed (${res.status ?? res.signal})`);
  process.env.DWS_BUILT = '1';
}

/** Run a TypeScript entry point through tsx (examples, runners) with its own env. */
export function startTs(name: string, entry: string, env: Record<string, string>, args: string[] = []): Proc {
  return startNode(name, [...nodeFlagsOf(entry), '--import', tsxLoader, path.join(ROOT, entry), ...args], env);
}

/**
 * The node options package.json's scripts give an entry's bundle (`pnpm dev`
 * runs `node --v8-pool-size=1 --max-semi-space-size=8 dist/apps/fleet/dev.js`): the harness and the
 * bench start each process with what users' command starts it with.
 */
export function nodeFlagsOf(entry: string): string[] {
  const bundle = bundleOf(entry).replaceAll('.', '\\.');
  const scripts = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  for (const command of Object.values(scripts)) {
    const m = new RegExp(`(?:^|&& )node ((?:--\\S+ )*)${bundle}(?: |$)`).exec(command);
    if (m) return m[1]!.split(' ').filter(Boolean);
  }
  return [];
}

/**
 * Run a service's or the embedded fleet's entry point (`services/<x>/src/bin.ts`,
 * `apps/fleet/src/dev.ts`) as `pnpm start:<x>` / `pnpm dev` do: its bundle on
 * plain node, built first if need be (ensureBuilt). DWS_RUN_TS=1 runs the
 * TypeScript through tsx instead (to compare the two).
 */
export function startService(name: string, entry: string, env: Record<string, string>): Proc {
  if (process.env.DWS_RUN_TS === '1') return startTs(name, entry, env);
  ensureBuilt();
  // As in the image, without --enable-source-maps (mapping a stack costs memory the first time);
  // NODE_OPTIONS=--enable-source-maps reaches the child and maps its stack traces to the sources.
  return startNode(name, [...nodeFlagsOf(entry), path.join(ROOT, bundleOf(entry))], env);
}

function startNode(name: string, args: string[], env: Record<string, string>): Proc {
  // DWS_CPU_PROF=<dir>: each process writes a V8 CPU profile there when it exits (benchmark profiling;
  // bench/src/profile-top.ts maps bundle frames back to sources through the source maps).
  // One directory per process: V8 writes one profile per thread (tsx's loader thread has its own).
  const prof = process.env.DWS_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${path.join(process.env.DWS_CPU_PROF, name)}`] : [];
  // DWS_ALLOC_PROF=<dir>: each process samples what it allocates (garbage included) into <dir>/<name>/ (scripts/alloc-prof.cjs).
  const alloc = process.env.DWS_ALLOC_PROF ? ['--require', path.join(ROOT, 'scripts', 'alloc-prof.cjs')] : [];
  const allocDir = process.env.DWS_ALLOC_PROF ? { DWS_ALLOC_PROF_DIR: path.join(process.env.DWS_ALLOC_PROF, name) } : {};
  const child = spawn(process.execPath, [...prof, ...alloc, ...args], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: process.env.DWS_E2E_LOG_LEVEL ?? 'warn', ...allocDir, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  // DWS_E2E_LOG_DIR=<dir>: everything each process prints is also kept whole in <dir>/<name>-<pid>.log
  // (to read after a chaos run that stranded runs; output() keeps only the last 100-200 kB), at
  // DWS_E2E_LOG_LEVEL (default warn).
  const file = process.env.DWS_E2E_LOG_DIR
    ? createWriteStream(path.join(process.env.DWS_E2E_LOG_DIR, `${name}-${child.pid}.log`))
    : undefined;
  const keep = (b: Buffer) => {
    file?.write(b);
    out += b.toString();
    if (out.length > 200_000) out = out.slice(-100_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  if (file) void exited.then(() => file.end());
  return {
    name,
    child,
    output: () => out,
    async kill(signal: NodeJS.Signals = 'SIGTERM', graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return { ms: 0, forced: false, code: child.exitCode };
      const t0 = Date.now();
      let forced = false;
      child.kill(signal);
      const timer = setTimeout(() => {
        forced = true;
        child.kill('SIGKILL');
      }, graceMs);
      await exited;
      clearTimeout(timer);
      return { ms: Date.now() - t0, forced, code: child.exitCode };
    },
  };
}

/**
 * Poll GET {base}/readyz until our process answers 200, or it dies. A port
 * picked before the process starts can be taken meanwhile by a process of
 * another test file (which answers /readyz too, and ours then exits with
 * EADDRINUSE): a 200 counts only once `proc` itself listens on the port.
 */
export async function waitReady(base: string, proc: Proc, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const port = Number(new URL(base).port);
  while (Date.now() < deadline) {
    if (proc.child.exitCode !== null) throw new Error(`${proc.name} exited (${proc.child.exitCode}):\n${proc.output()}`);
    try {
      const res = await request(`${base}/readyz`);
      await res.body.dump();
      if (res.statusCode === 200 && listensOn(proc.child.pid, port) !== false) return;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${proc.name} not ready within ${timeoutMs} ms:\n${proc.output()}`);
}

/**
 * Whether process `pid` holds a socket listening on `port` (Linux: the
 * socket's inode in /proc/net/tcp or tcp6 among the process's descriptors);
 * undefined where /proc cannot tell.
 */
export function listensOn(pid: number | undefined, port: number): boolean | undefined {
  if (pid === undefined) return undefined;
  let table: string;
  try {
    table = readFileSync('/proc/net/tcp', 'utf8') + readFileSync('/proc/net/tcp6', 'utf8');
  } catch {
    return undefined;
  }
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  // Columns: sl, local address (hex ip:port), remote, state (0A = LISTEN), ..., inode (10th).
  const inodes = new Set<string>();
  for (const line of table.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f[1]?.endsWith(`:${hexPort}`) && f[3] === '0A' && f[9]) inodes.add(`socket:[${f[9]}]`);
  }
  try {
    return readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        return inodes.has(readlinkSync(`/proc/${pid}/fd/${fd}`));
      } catch {
        return false;
      }
    });
  } catch {
    return undefined;
  }
}

