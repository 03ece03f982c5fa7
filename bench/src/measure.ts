/**
 * The measurement rules every mode of `pnpm bench` shares (bench.ts for our
 * deployments, peers/*.ts for the systems we compare with): percentiles,
 * rounding, CPU time read from /proc, and the no-op step with its stamps.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { Deployment } from '@dws/test-e2e';

/** One workload's figures in one repetition (name -> number). */
export type Figures = Record<string, number>;

export const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
export const median = (xs: number[]) => pct(xs, 50);
export const r1 = (x: number) => Math.round(x * 100) / 100;

/** CPU ms used so far by a process (utime + stime from /proc); 0 once it is gone. */
export function cpuMs(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // clock ticks at 100 Hz
  } catch {
    return 0;
  }
}

/** When step `i` of a run ran, as the step function saw it. */
export interface Stamp {
  i: number;
  t: number;
}

/**
 * The no-op step every workload runs (BENCH.md: it returns a small JSON
 * object); given a run id it also stamps when it ran, for W4's ms per step.
 */
export function noopStep(stamps: Map<string, Stamp[]>) {
  return (runId: string, i: number) => {
    const t = performance.now();
    if (runId) {
      let s = stamps.get(runId);
      if (!s) stamps.set(runId, (s = []));
      s.push({ i, t });
    }
    return { ok: true, i, t: Date.now() };
  };
}

/** W4's ms per step over steps 1-50 and 451-500, from the times each step first ran (a retried step counts once). */
export function stepGaps(stamps: Stamp[]): { first50: number; last50: number; stamped: number } {
  const first = new Map<number, number>();
  for (const s of stamps) if (!first.has(s.i)) first.set(s.i, s.t);
  const gap = (from: number, to: number) => ((first.get(to) ?? 0) - (first.get(from) ?? 0)) / (to - from);
  return { first50: r1(gap(0, 50)), last50: r1(gap(449, 499)), stamped: first.size };
}

/**
 * Runs before the first measured repetition, W2's shape (BENCH_WARMUP_RUNS, default 5,000; 0 for none).
 * A freshly started Node service runs its code in V8's baseline tiers and keeps TurboFan busy for
 * its first tens of thousands of messages: on the fleet, W2's service CPU per step falls over
 * consecutive 1,000-run batches 1.33, 0.96, 0.84, 0.75, then holds at 0.68-0.74 (docs/profiles.md
 * "2026-11-27 evening"); after 1,000 runs, TurboFan's compiles were still 14-27% of each service's
 * CPU. The targets are about services that have been up for a while, so every mode is warmed alike.
 */
export const WARMUP_RUNS = Number(process.env.BENCH_WARMUP_RUNS ?? 5000);

/** Seconds `idle` measures (IDLE_SECONDS), after IDLE_SETTLE_SECONDS for the last workload's tail to settle. */
export const IDLE_SECONDS = Number(process.env.IDLE_SECONDS ?? 20);

/**
 * How long after the warm-up `idle` starts measuring. nats-server keeps busy
 * for 10-15 s after a load (~150 wake-ups a second against ~30 at rest, its
 * runtime's timers: docs/profiles.md "2026-11-29 late morning"); a 5 s
 * settle counted most of that as rest.
 */
export const IDLE_SETTLE_SECONDS = Number(process.env.IDLE_SETTLE_SECONDS ?? 20);

/**
 * `idle`'s window, the same for every mode: sample, IDLE_SETTLE_SECONDS of
 * settling, sample, IDLE_SECONDS with nothing to do, sample.
 */
export async function idleWindow<T>(sample: () => T | Promise<T>): Promise<[T, T, T]> {
  const settling = await sample();
  await new Promise((r) => setTimeout(r, IDLE_SETTLE_SECONDS * 1000));
  const a = await sample();
  await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
  return [settling, a, await sample()];
}

/**
 * What every bench deployment runs with: quiet logs and the production run
 * lease (libs/config's default, 15 s), not the 2 s test deployments use for
 * quick failover, which renews every held run's lease every 666 ms.
 */
// BENCH_NODE_OPTIONS: node options for the services only (not this process), e.g. V8 heap settings to compare;
// BENCH_HEAP_SNAPSHOT: SIGUSR2 makes each service write a heap snapshot there (bench.ts heapSnapshots).
const nodeOptions = [
  process.env.BENCH_NODE_OPTIONS,
  process.env.BENCH_HEAP_SNAPSHOT && `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${process.env.BENCH_HEAP_SNAPSHOT}`,
].filter(Boolean);
const BENCH_ENV: Record<string, string> = {
  LOG_LEVEL: 'warn',
  SERVICE_RUN_LEASE_MS: process.env.BENCH_RUN_LEASE_MS ?? '15000',
  ...(nodeOptions.length > 0 && { NODE_OPTIONS: nodeOptions.join(' ') }),
};

/**
 * The allocator the image preloads (the Dockerfile's LD_PRELOAD, libjemalloc2), where this
 * machine has it; BENCH_MALLOC=glibc runs the fleet on glibc's malloc instead (to compare).
 */
const JEMALLOC =
  process.env.BENCH_MALLOC === 'glibc'
    ? undefined
    : ['/usr/lib/x86_64-linux-gnu/libjemalloc.so.2', '/usr/lib/aarch64-linux-gnu/libjemalloc.so.2'].find((f) => existsSync(f));

/** Which malloc the fleet's services run with (the bench prints it with the machine). */
export const fleetMalloc = JEMALLOC ? 'jemalloc (as the image)' : 'glibc malloc (libjemalloc2 not installed here, or BENCH_MALLOC=glibc)';

/**
 * The environment of a bench deployment's processes: BENCH_ENV, and for the
 * fleet what its image sets too (the Dockerfile's MALLOC_ARENA_MAX, and
 * jemalloc preloaded with MALLOC_CONF), so the six processes run as deployed;
 * `pnpm dev` runs with the user's environment. BENCH_MALLOC_CONF replaces the
 * image's MALLOC_CONF (to measure jemalloc's options).
 */
export function benchEnv(mode: string): Record<string, string> {
  if (mode !== 'fleet') return BENCH_ENV;
  return { ...BENCH_ENV, MALLOC_ARENA_MAX: '2', ...(JEMALLOC && { LD_PRELOAD: JEMALLOC, MALLOC_CONF: process.env.BENCH_MALLOC_CONF ?? 'narenas:2' }) };
}

/** The warm-up: WARMUP_RUNS runs of `oneRun`, 50 in flight, nothing recorded. Returns the seconds it took. */
export async function warmUp(oneRun: () => Promise<unknown>): Promise<number> {
  if (WARMUP_RUNS <= 0) return 0;
  return (await boundedLoad(WARMUP_RUNS, 50, oneRun)).wallS;
}

/** W2's load: `runs` runs, `inflight` at a time, each started as the one before it in its lane ends. Latencies in ms and the wall in s. */
export async function boundedLoad(runs: number, inflight: number, oneRun: () => Promise<unknown>): Promise<{ lat: number[]; wallS: number }> {
  const lat: number[] = [];
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: inflight }, async () => {
      while (next < runs) {
        next++;
        const s = performance.now();
        await oneRun();
        lat.push(performance.now() - s);
      }
    }),
  );
  return { lat, wallS: (performance.now() - t0) / 1000 };
}

/** `n` runs one after another, each one's ms from start to end (W1, W3). */
export async function oneByOne(n: number, oneRun: () => Promise<unknown>): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await oneRun();
    ms.push(performance.now() - t0);
  }
  return ms;
}

/** W1's figures from its latencies, W3's from its walls. */
export const w1Figures = (lat: number[]): Figures => ({ p50_ms: r1(pct(lat, 50)), p99_ms: r1(pct(lat, 99)) });
export const w3Figures = (walls: number[]): Figures => ({ median_wall_ms: r1(median(walls)) });
/** W2's figures, the same for every system: `cpu` in ms over the load (the system's own processes, the whole machine). */
export const w2Figures = (o: { runs: number; steps: number; wallS: number; lat: number[]; cpu: { system: number; machine: number }; rssMib: number }): Figures => ({
  runs_per_s: r1(o.runs / o.wallS),
  steps_per_s: r1(o.steps / o.wallS),
  p50_ms: r1(pct(o.lat, 50)),
  p99_ms: r1(pct(o.lat, 99)),
  service_cpu_ms_per_step: r1(o.cpu.system / o.steps),
  machine_cpu_ms_per_step: r1(o.cpu.machine / o.steps),
  max_service_rss_mib: o.rssMib,
});

/** One service's /metrics text (embedded: the one process's), or undefined without a port. */
export async function metricsOf(dep: Deployment, service: string): Promise<string | undefined> {
  const ports = dep.ports?.() ?? {};
  const port = ports[service] ?? ports.dev;
  return port ? (await fetch(`http://127.0.0.1:${port}/metrics`)).text() : undefined;
}

/** The calls the gateway has forwarded to ingest in batches since it started, and the bus requests that carried them. */
export async function ingestBatches(dep: Deployment): Promise<{ calls: number; requests: number }> {
  const text = (await metricsOf(dep, 'gateway')) ?? '';
  const read = (part: string) => Number(new RegExp(`^dws_api_batch_calls_${part}\\{service="ingest"\\} (\\S+)`, 'm').exec(text)?.[1] ?? 0);
  return { calls: read('sum'), requests: read('count') };
}

/** The gateway's run streams since it started, by how each began (tail: followed since the POST; read: a backlog read). */
export async function runStreamsBegun(dep: Deployment): Promise<Record<string, number>> {
  const text = await metricsOf(dep, 'gateway');
  return Object.fromEntries([...(text ?? '').matchAll(/^dws_gateway_run_streams_total\{began="(\w+)"\} (\S+)/gm)].map((m) => [m[1]!, Number(m[2])]));
}
