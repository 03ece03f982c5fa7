/**
 * What a workload costs the whole machine (BENCH.md: CPU per step counts
 * postgres and nats-server too): CPU of each service process, of this
 * process (runner and client), of the deployment's Postgres backends and
 * Postgres' background processes, and of nats-server, sampled before and
 * after; plus system calls and wake-ups per process (proc-counters.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import type postgres from 'postgres';
import type { Deployment } from '@dws/test-e2e';
import { cpuMs, r1 } from './measure.js';
import { addCounters, procCounters, zeroCounters, type ProcCounters } from './proc-counters.js';

/** Pids of the nats-server processes on this machine (shared with anything else using it). */
function natsPids(): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/comm`, 'utf8').trim() === 'nats-server') out.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/**
 * The machine's work for one deployment: its service processes, this process
 * (runner + client), and for the Postgres + NATS modes the deployment's own
 * Postgres backends, Postgres' background processes and nats-server (BENCH.md:
 * CPU per step counts the whole machine).
 */
export interface CpuSample {
  services: number;
  /** Per service (from its command line), to see where the machine's time goes. */
  byService: Map<string, number>;
  self: number;
  /** Per pid, so backends that come and go count only their time inside the window. */
  infra: Map<number, number>;
  /** System calls and wake-ups per process (see proc-counters.ts), by service as byService. */
  counters: Map<string, ProcCounters>;
  /** Of each infra pid, like `infra`. */
  infraCounters: Map<number, ProcCounters>;
}
export async function cpuNow(dep: Deployment, sql: postgres.Sql | undefined): Promise<CpuSample> {
  const u = process.cpuUsage();
  const infra = new Map<number, number>();
  const infraCounters = new Map<number, ProcCounters>();
  if (sql) {
    const rows = await sql<{ pid: number }[]>`select pid from pg_stat_activity where datname = current_database() or backend_type <> 'client backend'`;
    for (const pid of [...rows.map((r) => r.pid), ...natsPids()]) {
      infra.set(pid, cpuMs(pid));
      infraCounters.set(pid, procCounters(pid));
    }
  }
  const byService = new Map<string, number>();
  const counters = new Map<string, ProcCounters>();
  const count = (name: string, c: ProcCounters) => counters.set(name, addCounters(counters.get(name) ?? zeroCounters(), c));
  for (const pid of dep.pids?.() ?? []) {
    const name = serviceName(pid);
    byService.set(name, (byService.get(name) ?? 0) + cpuMs(pid));
    count(name, procCounters(pid));
  }
  count('bench (runner + client)', procCounters(process.pid));
  const pgPids = new Set(infra.keys());
  for (const pid of natsPids()) pgPids.delete(pid);
  byService.set('postgres', [...pgPids].reduce((a, p) => a + (infra.get(p) ?? 0), 0));
  byService.set('nats-server', natsPids().reduce((a, p) => a + (infra.get(p) ?? 0), 0));
  byService.set('bench (runner + client)', (u.user + u.system) / 1000);
  return { services: (dep.pids?.() ?? []).reduce((a, p) => a + cpuMs(p), 0), self: (u.user + u.system) / 1000, infra, byService, counters, infraCounters };
}
export function serviceName(pid: number): string {
  try {
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return /services\/([a-z-]+)\//.exec(cmd)?.[1] ?? (cmd.includes('apps/fleet') ? 'dev (all services)' : `pid ${pid}`);
  } catch {
    return `pid ${pid}`;
  }
}
export interface CpuSpent {
  services: number;
  machine: number;
  byService: Record<string, number>;
  counters: Record<string, ProcCounters>;
}
export function cpuSpent(a: CpuSample, b: CpuSample): CpuSpent {
  let infra = 0;
  for (const [pid, ms] of b.infra) infra += ms - (a.infra.get(pid) ?? 0);
  const services = b.services - a.services;
  const byService: Record<string, number> = {};
  for (const [name, ms] of b.byService) byService[name] = ms - (a.byService.get(name) ?? 0);
  const delta = (x: ProcCounters, y: ProcCounters | undefined): ProcCounters => ({ syscalls: x.syscalls - (y?.syscalls ?? 0), wakeups: x.wakeups - (y?.wakeups ?? 0) });
  const counters: Record<string, ProcCounters> = {};
  for (const [name, c] of b.counters) counters[name] = delta(c, a.counters.get(name));
  // Postgres backends and nats-server by pid, like their CPU (a backend born inside the window counts from zero).
  for (const [pid, c] of b.infraCounters) {
    const name = natsPids().includes(pid) ? 'nats-server' : 'postgres';
    counters[name] = addCounters(counters[name] ?? zeroCounters(), delta(c, a.infraCounters.get(pid)));
  }
  return { services, machine: services + (b.self - a.self) + infra, byService, counters };
}

/** Each process's CPU, system calls and wake-ups per unit of work (a step, an event). */
export function logSplit(cpu: CpuSpent, steps: number, unit = 'step'): void {
  process.stderr.write(`  cpu ms per ${unit}: ${Object.entries(cpu.byService).map(([k, v]) => `${k} ${r1(v / steps)}`).join(', ')}\n`);
  // Speed-independent: compare these across days and commits when the VM's speed moves.
  const per = (f: (c: ProcCounters) => number) => Object.entries(cpu.counters).map(([k, c]) => `${k} ${r1(f(c) / steps)}`).join(', ');
  const total = Object.values(cpu.counters).reduce(addCounters, zeroCounters());
  process.stderr.write(`  syscalls per ${unit} (read + write): ${r1(total.syscalls / steps)} = ${per((c) => c.syscalls)}\n`);
  process.stderr.write(`  wake-ups per ${unit} (voluntary context switches): ${r1(total.wakeups / steps)} = ${per((c) => c.wakeups)}\n`);
}
