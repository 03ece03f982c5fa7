/**
 * `pnpm bench [workloads] [modes] [reps]`: W1-W7 of ../shared/BENCH.md
 * against `pnpm dev` (embedded) and the fleet on Postgres + NATS (six
 * processes), each figure the median of `reps` repetitions with min-max
 * (W5 and W7 run once: they are long and start their own deployment).
 * Every mode asked for is up for the whole run, and each repetition runs
 * the modes in turn, so a drift of the machine's speed hits them alike.
 * Before the first repetition each mode runs BENCH_WARMUP_RUNS (default
 * 5,000) W2 runs that are not recorded: the figures are a warm service's.
 * The fleet's nats-server is the bench's own, started with GOMAXPROCS=1 as
 * docs/deploy.md advises on a 2-core machine (BENCH_NATS_GOMAXPROCS=0 for
 * Go's default; TEST_NATS_URL or NATS_URL to use a running one). Services
 * run with the production run lease (15 s; BENCH_RUN_LEASE_MS to change it).
 * Prints a table and writes bench/results/<utc>.json.
 *
 *   pnpm bench                      # w1,w2,w2spec,w3,w4,w4spec,w5,w7 on embedded,fleet, 3 reps
 *   pnpm bench w1,w4 fleet 1
 *   pnpm bench w2,w6 fleet,embedded 1   # W6: W2 with 100,000 runs asleep (started through the API the first time)
 *   pnpm bench w2,w8 fleet 1        # W8: W2 with 100,000 runs queued behind another workflow's concurrency limit (BENCH_BACKLOG)
 *   pnpm bench soak fleet 1         # W2 for SOAK_MINUTES (default 10) after SOAK_WARMUP_MINUTES (0), RSS per service first vs last third
 *   pnpm bench idle fleet,embedded,restate 1   # CPU with nothing to do (polls, heartbeats), IDLE_SECONDS (default 20) after IDLE_SETTLE_SECONDS (20)
 *   pnpm bench w1,w2,w3,w4 fleet,restate 3   # the fleet and Restate side by side in one run (issue 14's ratios)
 *   pnpm bench w2,w2ws,w4,w4ws fleet,restate 3   # W2 and W4 with each run's end read off one workspace stream, too
 *   pnpm bench w2,w2wait fleet,restate 3   # W2 with each run awaited by GET /v1/runs/{id}/wait, too
 *
 * `restate` runs W1-W4 on a real restate-server (the version pinned in
 * peers/restate.ts, installed from npm into bench/.peers/ on first use, its
 * durability settings left at their defaults), the workflows served by
 * Restate's TypeScript SDK from this process as our runner is; the other
 * workloads are reported as skipped for it. It needs neither Postgres nor NATS.
 *
 * The SDK checkpoints each step (one pass per run); `w2spec` and `w4spec` run
 * the same workflows on a runner with checkpoints off, i.e. one that speaks
 * only SPEC.md's protocol (one new step per pass, the full memo each time).
 * `w4ra` is W4 with the SDK's run-ahead budget (several steps per pass, no
 * checkpoints). W2 and W4 follow each run on its own stream (every frame
 * reaches the client); `w2ws` and `w4ws` learn each run's end from the one
 * workspace stream (GET /v1/runs/stream), as a client that needs only
 * outcomes would: what Restate's client gets (the result), so Restate runs
 * its W2 and W4 for them.
 */
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { request } from 'undici';
import { createRunner, RECOMMENDED_STEP_BUDGET_MS, type StepTools } from '@dws/sdk';
import { api, eventually, startDeployment, startNatsServer, type Deployment, type Mode, type NatsServer } from '@dws/test-e2e';
import { WorkspaceRunEnds } from './run-ends.js';
import { vacuumDueNow, vacuumLikeAutovacuum } from './vacuum.js';
import { benchEnv, boundedLoad, fleetMalloc, metricsOf, runStreamsBegun, IDLE_SECONDS, IDLE_SETTLE_SECONDS, idleWindow, median, noopStep, oneByOne, w1Figures, w2Figures, w3Figures, pct, r1, stepGaps, warmUp, WARMUP_RUNS, type Figures, type Stamp } from './measure.js';
import { startRestate } from './peers/restate.js';
import { cpuNow, cpuSpent, logSplit, serviceName } from './machine-cpu.js';

const [wlArg, modeArg, repsArg] = process.argv.slice(2);
const WORKLOADS = (wlArg ?? 'w1,w2,w2spec,w3,w4,w4spec,w5,w7').split(',');
const MODES = (modeArg ?? 'embedded,fleet').split(',') as (Mode | 'restate')[];
const REPS = Number(repsArg ?? 3);
/** GOMAXPROCS of the nats-server the bench starts (BENCH_NATS_GOMAXPROCS; 0 leaves Go's default, one per core). */
const NATS_GOMAXPROCS = Number(process.env.BENCH_NATS_GOMAXPROCS ?? 1);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * BENCH_HEAP_SNAPSHOT=<dir>: each service writes a V8 heap snapshot there after
 * W2 (what its RSS holds); read one with `npx tsx bench/src/heap-top.ts <file>`.
 */
async function heapSnapshots(dep: Deployment): Promise<void> {
  const dir = process.env.BENCH_HEAP_SNAPSHOT;
  if (!dir) return;
  const before = new Set(readdirSync(dir));
  const pids = dep.pids?.() ?? [];
  for (const pid of pids) process.kill(pid, 'SIGUSR2');
  // Written while the process is paused, over seconds: done when every file has stopped growing.
  const sizes = () => readdirSync(dir).filter((f) => !before.has(f)).map((f) => statSync(path.join(dir, f)).size).join();
  let last = '';
  for (let i = 0; i < 120; i++) {
    await new Promise((r) => setTimeout(r, 500));
    const now = sizes();
    if (now === last && now.split(',').length === pids.length) break;
    last = now;
  }
  process.stderr.write(`  heap snapshots in ${dir}\n`);
}

type ProcessGauges = { heapBytes: number; heapLiveBytes: number; heapTotalBytes: number; externalBytes: number; gcSeconds: number; cpuSeconds: number };

/** Some process gauges of each service, from its /metrics. */
async function processGauges(dep: Deployment): Promise<Record<string, ProcessGauges>> {
  const out: Record<string, ProcessGauges> = {};
  for (const [name, port] of Object.entries(dep.ports?.() ?? {})) {
    try {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const read = (g: string) => Number(new RegExp(`^${g} (\\S+)`, 'm').exec(text)?.[1] ?? NaN);
      out[name] = { heapBytes: read('dws_process_heap_used_bytes'), heapLiveBytes: read('dws_process_heap_live_bytes'), heapTotalBytes: read('dws_process_heap_total_bytes'), externalBytes: read('dws_process_external_memory_bytes'), gcSeconds: read('dws_process_gc_seconds_total'), cpuSeconds: read('dws_process_cpu_seconds_total') };
    } catch {
      // not serving metrics (or gone)
    }
  }
  return out;
}

/**
 * Resident memory (MiB) of each service process right now (BENCH/issue: <= 150 MB a service under W2, <= 300 MB embedded),
 * and what it holds: anonymous pages (heaps) and file-backed ones (the node binary's code and data, shared by all six).
 */
function rssByService(dep: Deployment): Record<string, { total: number; anon: number; file: number }> {
  const out: Record<string, { total: number; anon: number; file: number }> = {};
  for (const pid of dep.pids?.() ?? []) {
    try {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      const mib = (field: string) => Math.round(Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN) / 1024);
      out[serviceName(pid)] = { total: mib('VmRSS'), anon: mib('RssAnon'), file: mib('RssFile') };
    } catch {
      // exited
    }
  }
  return out;
}

/** Wait for the run to end by following its SSE stream (how a client observes it). */
async function awaitRunEnd(dep: Deployment, runId: string): Promise<string> {
  for (let tries = 0; ; tries++) {
    const res = await request(`${dep.base}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${dep.secretKey}`, accept: 'text/event-stream' } });
    if (res.statusCode === 404 && tries < 200) {
      await res.body.dump();
      await new Promise((r) => setTimeout(r, 2));
      continue;
    }
    let buf = '';
    let status = '';
    // The gateway ends the stream after the terminal frame, in the same write: read to that end, as a
    // client does (breaking off mid-body aborts the request: an error built, with its stack, per run).
    for await (const chunk of res.body) {
      buf += (chunk as Buffer).toString();
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const frame = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (!frame.includes('event: run_status')) continue;
        const data = frame.split('\n').find((l) => l.startsWith('data: '));
        const s = data ? (JSON.parse(data.slice(6)) as { status: string }).status : '';
        if (s === 'succeeded' || s === 'failed' || s === 'cancelled') status = s;
      }
    }
    return status;
  }
}

/** Wait for the run to end with GET /v1/runs/{id}/wait (the gateway holds the call until then): what the SDK's `runs.wait` does. */
async function waitRunEnd(dep: Deployment, runId: string): Promise<string> {
  for (;;) {
    const res = await request(`${dep.base}/v1/runs/${runId}/wait?timeoutMs=60000`, { headers: { authorization: `Bearer ${dep.secretKey}` } });
    const body = (await res.body.json()) as { status?: string };
    if (res.statusCode !== 200) throw new Error(`GET /v1/runs/${runId}/wait: ${res.statusCode} ${JSON.stringify(body)}`);
    if (body.status === 'succeeded' || body.status === 'failed' || body.status === 'cancelled') return body.status;
  }
}

/** A serve runner of the bench's workflows on its own HTTP server, registered with the deployment. */
async function benchRunner(dep: Deployment, app: string, checkpoints: boolean, define: (r: ReturnType<typeof createRunner>) => void) {
  let handler: (req: never, res: never) => void = () => undefined;
  const server = createServer((req, res) => handler(req as never, res as never));
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/invoke`;
  const runner = createRunner({ app, url: `${dep.base}/v1`, apiKey: dep.secretKey, signingKey: dep.signingKey, publicUrl: url, checkpoints });
  define(runner);
  const serve = runner.serve();
  handler = (req, res) => void serve(req, res);
  await runner.register();
  // Runners heartbeat (SPEC: live for 90 s after the last one); a benchmark outlives that.
  runner.startHeartbeat();
  return () => {
    runner.stop();
    return new Promise<void>((r) => server.close(() => r()));
  };
}

async function setup(dep: Deployment) {
  const stamps = new Map<string, Stamp[]>();
  // W6: runs that reached their hour-long sleep, and how fast they were started.
  const sleepers: Sleepers = { asleep: new Set<string>(), perS: 0 };
  const backlog = { queued: false };
  const noop = noopStep(stamps);
  const w2 = async ({ step }: { step: StepTools }) => {
    let last = 0;
    for (let i = 0; i < 10; i++) last = (await step.run(`s${i}`, () => noop('', i))).i;
    return { last };
  };
  const w4 = async ({ step, ctx }: { step: StepTools; ctx: { runId: string } }) => {
    let last = 0;
    for (let i = 0; i < 500; i++) last = (await step.run(`s${i}`, () => noop(ctx.runId, i))).i;
    return { last };
  };
  const closeSdk = await benchRunner(dep, 'bench', true, (runner) => {
    runner.workflow('w1', async ({ step }) => step.run('only', () => noop('', 0)));
    runner.workflow('w2', w2);
    runner.workflow('w3', async ({ step }) => {
      const all = await Promise.all(Array.from({ length: 100 }, (_, i) => step.run(`p${i}`, () => noop('', i))));
      return { n: all.length };
    });
    runner.workflow('w4', w4);
    // The same run with the SDK's run-ahead budget: several steps per pass.
    runner.workflow('w4ra', { stepBudgetMs: RECOMMENDED_STEP_BUDGET_MS }, w4);
    runner.workflow('sleeper', async ({ step, ctx }) => {
      sleepers.asleep.add(ctx.runId);
      await step.sleep('nap', '1h');
    });

  });
  // SPEC.md's protocol only: one new step per pass, the whole memo sent every time.
  const closeSpec = await benchRunner(dep, 'bench-spec', false, (runner) => {
    runner.workflow('w2spec', w2);
    runner.workflow('w4spec', w4);
  });
  // W8's backlog, its own app (its runs counted by the app's stats): one run at a time, each a second inside its step (a slow downstream).
  const closeBacklog = await benchRunner(dep, 'bench-backlog', true, (runner) => {
    runner.workflow('backlogged', { concurrency: { limit: 1 } }, async ({ step }) => {
      await step.run('slow', () => new Promise<boolean>((r) => setTimeout(() => r(true), 1000)));
    });
  });
  await eventually('trigger index', async () => {
    const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'w1', data: {} } });
    return r.body?.runId ? awaitRunEnd(dep, r.body.runId as string) : undefined;
  });
  return {
    stamps,
    sleepers,
    backlog,
    close: async () => {
      await closeSdk();
      await closeSpec();
      await closeBacklog();
    },
  };
}

/** W5 and W7 are scripts of their own (they start their own deployment); run one and read its RESULT line. */
function script(file: string, args: string[]): Promise<Figures> {
  return new Promise((resolve) => {
    // Bounded: a script that hangs is reported as failed, and the other workloads' figures are still written.
    execFile(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/src', file), ...args], { cwd: ROOT, maxBuffer: 64 * 1024 * 1024, timeout: 15 * 60_000 }, (err, stdout, stderr) => {
      const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
      if (err || !line) {
        process.stderr.write(`${file} failed: ${err?.message ?? 'no RESULT line'}\n${stderr.slice(-2000)}\n`);
        return resolve({ failed: 1 });
      }
      resolve(JSON.parse(line.slice('RESULT '.length)) as Figures);
    });
  });
}

async function start(dep: Deployment, workflow: string): Promise<string> {
  const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: workflow, data: {} } });
  if (r.status !== 202 || !r.body.runId) throw new Error(`event not accepted: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.runId as string;
}

async function w1(dep: Deployment): Promise<Figures> {
  const figures = w1Figures(await oneByOne(200, async () => awaitRunEnd(dep, await start(dep, 'w1'))));
  await logRunStreams(dep);
  return figures;
}

/** The scheduler's group commit histograms (checkpoints, passes) as means, and checkpoints by path (fleet: its own port; embedded: the one process). */
async function groupCommits(dep: Deployment): Promise<{ mean: number; statements: number; passMean: number; paths: string } | undefined> {
  const text = await metricsOf(dep, 'scheduler');
  if (text === undefined) return undefined;
  const read = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN);
  const count = read('dws_scheduler_checkpoint_batch_size_count');
  const passMean = read('dws_scheduler_pass_batch_size_sum') / read('dws_scheduler_pass_batch_size_count');
  // Which way the checkpoints came (socket, direct HTTP, bus): the bench runner should use the socket.
  const paths = [...text.matchAll(/^dws_scheduler_checkpoints_total\{outcome="stored",path="(\w+)"\} (\S+)/gm)].map((m) => `${m[1]} ${m[2]}`).join(', ');
  return count > 0 ? { mean: read('dws_scheduler_checkpoint_batch_size_sum') / count, statements: count, passMean, paths } : undefined;
}

/** Print how the gateway's run streams began (a tail followed since the POST, or a backlog read), from its metrics. */
async function logRunStreams(dep: Deployment): Promise<void> {
  const found = Object.entries(await runStreamsBegun(dep)).map(([k, v]) => `${k} ${v}`);
  if (found.length) process.stderr.write(`  run streams since start, by how each began: ${found.join(', ')}\n`);
}

/**
 * `idle`: what a deployment costs the machine with nothing to do (its polls,
 * heartbeats and timers), in ms of CPU per second: 10 is 1% of a core. Every
 * other workload's CPU per step carries it too.
 */
async function idle(dep: Deployment): Promise<Figures> {
  const sql = dep.databaseUrl ? postgres(dep.databaseUrl, { max: 1, onnotice: () => {} }) : undefined;
  const [settling, a, b] = await idleWindow(() => cpuNow(dep, sql));
  await sql?.end();
  process.stderr.write(`  the first ${IDLE_SETTLE_SECONDS} s after the warm-up (not counted):\n`);
  logSplit(cpuSpent(settling, a), IDLE_SETTLE_SECONDS, 'second');
  process.stderr.write(`  then ${IDLE_SECONDS} s at rest:\n`);
  const cpu = cpuSpent(a, b);
  logSplit(cpu, IDLE_SECONDS, 'second');
  const wakeups = Object.values(cpu.counters).reduce((a, c) => a + c.wakeups, 0);
  return { machine_cpu_ms_per_s: r1(cpu.machine / IDLE_SECONDS), service_cpu_ms_per_s: r1(cpu.services / IDLE_SECONDS), wakeups_per_s: r1(wakeups / IDLE_SECONDS) };
}

/**
 * W2; `w2ws` is W2 with each run's end read off the workspace's run stream
 * (run-ends.ts) instead of a stream per run, `w2wait` with each run awaited
 * by GET /v1/runs/{id}/wait (the SDK's `runs.wait`). `diagnostics: false` (the soak)
 * skips what W2 reads off the services' /metrics besides the figures.
 */
async function w2(dep: Deployment, wl = 'w2', diagnostics = true): Promise<Figures> {
  const RUNS = 1000;
  const INFLIGHT = 50;
  const sql = dep.databaseUrl ? postgres(dep.databaseUrl, { max: 1, onnotice: () => {} }) : undefined;
  const ends = wl === 'w2ws' ? await WorkspaceRunEnds.open(dep.base, dep.secretKey) : undefined;
  const workflow = wl === 'w2spec' ? 'w2spec' : 'w2';
  const g0: Record<string, ProcessGauges> = diagnostics ? await processGauges(dep) : {};
  const cpu0 = await cpuNow(dep, sql);
  const { lat, wallS: wall } = await boundedLoad(RUNS, INFLIGHT, async () => {
    const runId = await start(dep, workflow);
    return ends ? ends.wait(runId) : wl === 'w2wait' ? waitRunEnd(dep, runId) : awaitRunEnd(dep, runId);
  });
  const cpu = cpuSpent(cpu0, await cpuNow(dep, sql));
  ends?.close();
  await sql?.end();
  const steps = RUNS * 10;
  logSplit(cpu, steps);
  const rss = rssByService(dep);
  const figures = w2Figures({
    runs: RUNS,
    steps,
    wallS: wall,
    lat,
    cpu: { system: cpu.services, machine: cpu.machine },
    rssMib: Math.max(0, ...Object.values(rss).map((r) => r.total)),
  });
  if (!diagnostics) return figures;
  process.stderr.write(`  rss MiB after W2: ${Object.entries(rss).map(([k, v]) => `${k} ${v.total}`).join(', ')}\n`);
  process.stderr.write(`  of which anonymous / file-backed MiB: ${Object.entries(rss).map(([k, v]) => `${k} ${v.anon} / ${v.file}`).join(', ')}\n`);
  const g1 = await processGauges(dep);
  process.stderr.write(`  V8 heap committed MiB after W2: ${Object.entries(g1).map(([k, v]) => `${k} ${Math.round(v.heapTotalBytes / 1048576)}`).join(', ')}\n`);
  process.stderr.write(`  V8 heap used / external (buffers, WebAssembly) MiB after W2: ${Object.entries(g1).map(([k, v]) => `${k} ${Math.round(v.heapBytes / 1048576)} / ${Math.round(v.externalBytes / 1048576)}`).join(', ')}\n`);
  // The garbage collector's share of each service's CPU over W2: what a smaller heap (RSS) would cost.
  const gcShare = Object.entries(g1).map(([k, v]) => `${k} ${Math.round((100 * (v.gcSeconds - (g0[k]?.gcSeconds ?? 0))) / (v.cpuSeconds - (g0[k]?.cpuSeconds ?? 0)))}%`);
  process.stderr.write(`  GC share of CPU over W2: ${gcShare.join(', ')}\n`);
  await heapSnapshots(dep);
  await logRunStreams(dep);
  const batch = await groupCommits(dep);
  if (batch) process.stderr.write(`  checkpoints per statement (group commit, since start): mean ${r1(batch.mean)} over ${batch.statements} statements; stored by path: ${batch.paths}; passes per statement: mean ${r1(batch.passMean)}\n`);
  return figures;
}

async function w3(dep: Deployment): Promise<Figures> {
  return w3Figures(await oneByOne(10, async () => awaitRunEnd(dep, await start(dep, 'w3'))));
}

/** W4; `w4ws` is W4 with the run's end read off the workspace's run stream, not every frame off its own. */
async function w4(dep: Deployment, stamps: Map<string, Stamp[]>, wl = 'w4'): Promise<Figures> {
  const sql = dep.databaseUrl ? postgres(dep.databaseUrl, { max: 1, onnotice: () => {} }) : undefined;
  const ends = wl === 'w4ws' ? await WorkspaceRunEnds.open(dep.base, dep.secretKey) : undefined;
  const cpu0 = await cpuNow(dep, sql);
  const t0 = performance.now();
  const id = await start(dep, wl === 'w4ws' ? 'w4' : wl);
  await (ends ? ends.wait(id) : awaitRunEnd(dep, id));
  const wall = performance.now() - t0;
  // One run of 500 steps: what a step costs the machine with the per-run work spread thin.
  const cpu = cpuSpent(cpu0, await cpuNow(dep, sql));
  ends?.close();
  await sql?.end();
  logSplit(cpu, 500);
  // Time between consecutive steps' first executions, as the runner saw them.
  const gaps = stepGaps(stamps.get(id) ?? []);
  return { wall_ms: r1(wall), ms_per_step_first50: gaps.first50, ms_per_step_last50: gaps.last50, machine_cpu_ms_per_step: r1(cpu.machine / 500) };
}

/**
 * Soak: W2 back to back for SOAK_MINUTES (env, default 10), each service's
 * RSS sampled after every round. Growth is the last third's mean RSS over
 * the first third's, per service (BENCH.md: no growth over a 10-minute W2).
 * Beside it, what each service kept alive: its V8 heap right after its
 * last full collection, before the first round and after the last. RSS
 * also holds garbage that awaits a full collection, which a quiet service
 * can gather for minutes; the live heap grows only with what is kept.
 * The services' /metrics are read every SOAK_SCRAPE_S (default 15 s, a
 * common Prometheus scrape interval), not every round (~2 s): a read makes
 * garbage of its own, and in the two quiet services that was most of what
 * their RSS gathered between full collections.
 * SOAK_WARMUP_MINUTES (default 0) of W2 come first, sampled and printed but
 * not counted: a service just started climbs for its first ~11 minutes as
 * it compiles its hot code and its allocator and heap reach their working
 * size, and a reading from cold counts that climb as growth.
 */
async function soak(dep: Deployment): Promise<Figures> {
  const minutes = Number(process.env.SOAK_MINUTES ?? 10);
  const warmupMinutes = Number(process.env.SOAK_WARMUP_MINUTES ?? 0);
  const scrapeMs = Number(process.env.SOAK_SCRAPE_S ?? 15) * 1000;
  let scrapedAt = performance.now();
  const warmUntil = performance.now() + warmupMinutes * 60_000;
  const until = warmUntil + minutes * 60_000;
  // Per round and service: RSS, and of it the anonymous pages (heaps, malloc) and the file-backed ones (the node binary's code, paged in as it first runs).
  const samples: Record<string, { total: number; anon: number; file: number }>[] = [];
  const mib = (b: number) => r1(b / 1048576);
  const liveHeaps = async () => Object.fromEntries(Object.entries(await processGauges(dep)).map(([k, v]) => [k, mib(v.heapLiveBytes)]));
  // The measured minutes begin with the first round past the warm-up: the live heaps then, and the clock for steps/s.
  let liveFirst: Record<string, number> | undefined;
  let measuredFrom = 0;
  let steps = 0;
  const t0 = performance.now();
  while (performance.now() < until) {
    const warming = performance.now() < warmUntil;
    if (!warming && liveFirst === undefined) {
      liveFirst = await liveHeaps();
      measuredFrom = performance.now();
    }
    const f = await w2(dep, 'w2', false);
    const sample = rssByService(dep);
    if (!warming) {
      steps += 10_000;
      samples.push(sample);
    }
    let heaps = '';
    if (performance.now() - scrapedAt >= scrapeMs) {
      scrapedAt = performance.now();
      // What grows, when something does: V8's live heap, or what it holds outside it (buffers, PGlite's WebAssembly memory).
      const g = Object.entries(await processGauges(dep)).map(([k, v]) => `${k} ${[v.heapBytes, v.heapLiveBytes, v.heapTotalBytes, v.externalBytes].map((b) => Math.round(mib(b))).join(' / ')}`);
      heaps = `, heap used / live after the last full collection / committed / external MiB ${g.join(', ')}`;
    }
    const rss = Object.entries(sample).map(([k, v]) => `${k} ${v.total} (${v.anon} / ${v.file})`);
    process.stderr.write(`  soak ${((performance.now() - t0) / 60_000).toFixed(1)} min${warming ? ' (warm-up)' : ''}: ${f.steps_per_s} steps/s, rss (anonymous / file-backed) MiB ${rss.join(', ')}${heaps}\n`);
  }
  const liveLast = await liveHeaps();
  liveFirst ??= liveLast;
  const third = Math.max(1, Math.floor(samples.length / 3));
  const mean = (xs: typeof samples, k: string, part: 'total' | 'anon' | 'file') => xs.reduce((a, x) => a + (x[k]?.[part] ?? 0), 0) / xs.length;
  const out: Figures = { minutes, warmup_minutes: warmupMinutes, rounds: samples.length, steps_per_s: r1(steps / ((performance.now() - measuredFrom) / 1000)) };
  for (const k of Object.keys(samples[0] ?? {})) {
    for (const [part, name] of [['total', 'rss'], ['anon', 'rss_anon'], ['file', 'rss_file']] as const) {
      out[`${k}_${name}_first_mib`] = r1(mean(samples.slice(0, third), k, part));
      out[`${k}_${name}_last_mib`] = r1(mean(samples.slice(-third), k, part));
    }
    if (liveFirst[k] !== undefined) out[`${k}_live_heap_first_mib`] = liveFirst[k];
    if (liveLast[k] !== undefined) out[`${k}_live_heap_last_mib`] = liveLast[k];
  }
  return out;
}

/** W6's parked runs. */
const SLEEPERS = 100_000;
interface Sleepers {
  asleep: Set<string>;
  perS: number;
}

/** Start `total` runs of a workflow as users do: POST /v1/events in batches of 100, eight requests at a time. */
async function startMany(dep: Deployment, name: string, total: number, wl: string): Promise<void> {
  let sent = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (sent < total) {
        const n = Math.min(100, total - sent);
        sent += n;
        const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: Array.from({ length: n }, () => ({ name, data: {} })) });
        if (r.status !== 202) throw new Error(`${wl}: POST /v1/events answered ${r.status} ${JSON.stringify(r.body)}`);
      }
    }),
  );
}

/** W8's runs queued behind one concurrency slot. */
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 100_000);

/**
 * W8 (ours, not BENCH.md's): W2 again while 100,000 runs of another workflow
 * wait queued behind its `concurrency: { limit: 1 }`, one admitted a second:
 * the queue a fan-out to a slow downstream leaves. Started through the API
 * (batches of 100) the first time W8 runs on a deployment, then a vacuum
 * round and W2's warm-up, unrecorded. What the scheduler's admission costs
 * while runs wait for a slot (it is asked every round, and before each claim)
 * is what the machine spends at rest beside the backlog (`backlog_*_cpu_ms_per_s`,
 * as `idle` measures it) and what W2 loses.
 */
async function w8(dep: Deployment, backlog: { queued: boolean }): Promise<Figures> {
  if (!backlog.queued) {
    await startMany(dep, 'backlogged', BACKLOG, 'W8');
    const queued = async () => (await api(dep.base, 'GET', '/v1/runs/stats?app=bench-backlog', { key: dep.secretKey })).body?.active as number;
    await eventually('W8 backlog stored', async () => ((await queued()) >= BACKLOG - 100 ? true : undefined), 900_000);
    backlog.queued = true;
    if (dep.databaseUrl) await vacuumDueNow(dep.databaseUrl);
    await warmUp(async () => awaitRunEnd(dep, await start(dep, 'w2')));
  }
  // The machine at rest but for the backlog (one run a second), then W2 beside it.
  const rest = await idle(dep);
  return { ...(await w2(dep)), backlog: BACKLOG, backlog_machine_cpu_ms_per_s: rest.machine_cpu_ms_per_s ?? 0, backlog_service_cpu_ms_per_s: rest.service_cpu_ms_per_s ?? 0 };
}

/**
 * W6: W2 again with 100,000 runs asleep for an hour. They are started as
 * users start runs (POST /v1/events in batches of 100, the first time W6 runs
 * on a deployment) and each goes to sleep in its first pass, so the
 * scheduler holds them as it holds any sleeping run; then a vacuum round and
 * W2's warm-up, unrecorded. Sleeping runs should cost nothing.
 */
async function w6(dep: Deployment, sleepers: Sleepers): Promise<Figures> {
  const { asleep } = sleepers;
  if (asleep.size < SLEEPERS) {
    const t0 = performance.now();
    await startMany(dep, 'sleeper', SLEEPERS, 'W6');
    // Asleep once each run's first pass reached the sleep (the runner saw it), plus its reply's write.
    await eventually('W6 sleepers asleep', async () => (asleep.size >= SLEEPERS ? true : undefined), 900_000);
    await new Promise((r) => setTimeout(r, 2000));
    sleepers.perS = r1(SLEEPERS / ((performance.now() - t0) / 1000));
    // W6 is what sleeping runs cost, not the wake of starting 100,000 in a minute: let it settle
    // (autovacuum's round on the tables the burst wrote, then W2's warm-up), as a server that gathered them over time would be.
    if (dep.databaseUrl) await vacuumDueNow(dep.databaseUrl);
    await warmUp(async () => awaitRunEnd(dep, await start(dep, 'w2')));
  }
  const size = dep.databaseUrl ? await dbSize(dep.databaseUrl) : undefined;
  return { ...(await w2(dep)), sleepers_per_s: sleepers.perS, ...(size !== undefined && { db_mb: size }) };
}

async function dbSize(url: string): Promise<number> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const rows = await sql`select pg_database_size(current_database()) as b`;
    return r1(Number(rows[0]!.b) / 1024 / 1024);
  } finally {
    await sql.end();
  }
}

/** One system under measurement, up and ready: a deployment of ours with the bench's runners, or Restate. */
interface Target {
  mode: Mode | 'restate';
  run(wl: string): Promise<Figures>;
  /** W2's runs before the first repetition, nothing recorded (measure.ts warmUp); the seconds it took. */
  warm(): Promise<number>;
  stop(): Promise<void>;
  versions?: Record<string, string>;
}

async function open(mode: Mode | 'restate'): Promise<Target> {
  if (mode === 'restate') {
    // Restate beside us (issue 14): a real restate-server and the Restate SDK, the same workloads and rules (peers/restate.ts).
    const peer = await startRestate();
    return { mode, run: (wl) => peer.run(wl), warm: () => peer.warm(), stop: () => peer.stop(), versions: peer.versions };
  }
  // BENCH_DIRECT_CHECKPOINTS=off: the runner's checkpoints go through the gateway, as without SERVICE_SCHEDULER_URL.
  const dep = await startDeployment(mode, { env: benchEnv(mode), directCheckpoints: process.env.BENCH_DIRECT_CHECKPOINTS !== 'off' });
  const stopVacuum = dep.databaseUrl ? await vacuumLikeAutovacuum(dep.databaseUrl, (l) => process.stderr.write(l)) : async () => {};
  const rig = await setup(dep);
  const run = async (wl: string): Promise<Figures> => {
    switch (wl) {
      case 'w1':
        return w1(dep);
      case 'w2':
      case 'w2ws':
      case 'w2wait':
      case 'w2spec':
        return w2(dep, wl);
      case 'w3':
        return w3(dep);
      case 'w4':
      case 'w4ws':
      case 'w4ra':
      case 'w4spec':
        return w4(dep, rig.stamps, wl);
      case 'w6':
        return w6(dep, rig.sleepers);
      case 'w8':
        return w8(dep, rig.backlog);
      case 'soak':
        return soak(dep);
      case 'idle':
        return idle(dep);
      case 'w5':
        return script('w5-ingest.ts', [mode, '10', '32']);
      case 'w7':
        return script('w7-streams.ts', ['1000', '200', mode]);
      default:
        throw new Error(`unknown workload ${wl}`);
    }
  };
  return {
    mode,
    run,
    warm: async () => {
      const s = await warmUp(async () => awaitRunEnd(dep, await start(dep, 'w2')));
      // And analyzed, as autovacuum would have done by now on a server up for a while: until a table's
      // first ANALYZE, Postgres plans it as empty, and the prepared statements planned during the
      // warm-up scan `runs` whole (a third of the pass statements did, until the first round 60 s in).
      if (dep.databaseUrl) await vacuumDueNow(dep.databaseUrl);
      return s;
    },
    stop: async () => {
      await rig.close();
      await stopVacuum();
      await dep.stop();
    },
  };
}

async function main(): Promise<void> {
  process.env.TEST_DATABASE_URL ??= process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  // The fleet's nats-server as docs/deploy.md has it for a small machine (GOMAXPROCS=1), unless one is named.
  let nats: NatsServer | undefined;
  let storeDir: string | undefined;
  if (!process.env.TEST_NATS_URL && !process.env.NATS_URL && MODES.some((m) => m !== 'embedded' && m !== 'restate')) {
    storeDir = mkdtempSync(path.join(os.tmpdir(), 'dws-bench-nats-'));
    nats = await startNatsServer({ storeDir, gomaxprocs: NATS_GOMAXPROCS });
    process.env.TEST_NATS_URL = nats.url;
  }
  process.env.TEST_NATS_URL ??= process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  const infra = { nats: nats ? `the bench's own nats-server, GOMAXPROCS=${NATS_GOMAXPROCS || 'unset'}` : process.env.TEST_NATS_URL };
  const results: { mode: Mode | 'restate'; workload: string; median: Figures; min: Figures; max: Figures }[] = [];
  const versions: Record<string, string> = {};
  // Every mode is up at once and each repetition runs them in turn: this VM's speed drifts by 2x
  // within minutes, and a ratio between modes means something only if the drift hits them alike.
  const targets: Target[] = [];
  try {
    for (const mode of MODES) {
      const t = await open(mode);
      targets.push(t);
      Object.assign(versions, t.versions);
    }
    // w5 and w7 start deployments of their own; every other workload runs on the warmed targets.
    if (WORKLOADS.some((wl) => !['w5', 'w7'].includes(wl))) {
      for (const t of targets) {
        const s = await t.warm();
        if (s > 0) process.stderr.write(`${t.mode}: warmed up with ${WARMUP_RUNS} W2 runs in ${r1(s)} s\n`);
      }
    }
    for (const wl of WORKLOADS) {
      const reps = new Map<Target, Figures[]>(targets.map((t) => [t, []]));
      for (let r = 0; r < (['w5', 'w7', 'soak'].includes(wl) ? 1 : REPS); r++) {
        for (const t of targets) {
          const done = reps.get(t)!;
          if (done[0]?.skipped) continue; // a workload this mode does not implement
          const f = await t.run(wl);
          done.push(f);
          process.stderr.write(`${t.mode} ${wl} rep ${r + 1}: ${JSON.stringify(f)}\n`);
        }
      }
      for (const [t, figs] of reps) {
        const keys = Object.keys(figs[0]!);
        const agg = (fn: (xs: number[]) => number) => Object.fromEntries(keys.map((k) => [k, fn(figs.map((x) => x[k]!))]));
        results.push({ mode: t.mode, workload: wl, median: agg(median), min: agg((xs) => Math.min(...xs)), max: agg((xs) => Math.max(...xs)) });
      }
    }
  } finally {
    for (const t of targets) await t.stop();
    await nats?.kill();
    if (storeDir) rmSync(storeDir, { recursive: true, force: true });
  }
  const machine = { cores: os.cpus().length, cpu: os.cpus()[0]?.model ?? 'unknown', node: process.version, fleetMalloc, at: new Date().toISOString() };
  const peers = Object.entries(versions)
    .map(([k, v]) => `, ${k} ${v}`)
    .join('');
  const lines = [`machine: ${machine.cores} x ${machine.cpu}, node ${machine.node}${peers}, the fleet on ${machine.fleetMalloc}, ${machine.at}`, '', '| mode | workload | figure | median | min-max |', '|---|---|---|---|---|'];
  for (const r of results) {
    for (const k of Object.keys(r.median)) lines.push(`| ${r.mode} | ${r.workload} | ${k} | ${r.median[k]} | ${r.min[k]}-${r.max[k]} |`);
  }
  process.stdout.write(lines.join('\n') + '\n');
  mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
  const file = path.join(ROOT, 'bench', 'results', `${machine.at.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify({ machine, versions, infra, reps: REPS, results }, null, 2));
  process.stdout.write(`\nwritten: ${path.relative(ROOT, file)}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
