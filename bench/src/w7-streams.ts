/**
 * BENCH.md W7: many SSE clients tailing run streams on one gateway while
 * runs execute. Starts a deployment, registers a runner whose workflow runs
 * STEPS sequential steps of STEP_MS each, starts RUNS runs, and opens
 * CLIENTS streams spread over them (at once, right after POST /events).
 * Reports frames/s delivered, lag (receive time minus the frame's ts, for
 * frames published after the client connected), whether every client got
 * every frame once and an end, the gateway process's RSS, and how far the
 * clients' event loops fell behind while they opened the streams (their share
 * of the lag while connecting), and this process's (the runner, W2's load).
 * The clients live in W7_CLIENT_PROCS (default 2) processes of their own
 * (w7-clients.ts), apart from the runner and W2's load; 0 keeps them in this
 * process, as until 2026-11-27 evening.
 * BENCH.md has the streams tailed "while W2 runs": with load=w2 (the
 * default) W2's runs (10 steps each, 50 in flight, each end read off the
 * workspace's run stream) go on from before the streams open until they
 * end, and their steps/s is reported; load=none measures the streams alone.
 *
 *   npx tsx bench/src/w7-streams.ts [clients=1000] [runs=200] [mode=fleet|embedded|dev-real] [steps=20] [stepMs=200] [load=w2|none]
 *
 * fleet and dev-real need Postgres and NATS (DATABASE_URL / NATS_URL or the local defaults).
 */
import { execFileSync, fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { api, eventually } from '../../test-e2e/src/api.js';
import { startDeployment, type Mode } from '../../test-e2e/src/deployment.js';
import { startRunner } from '../../test-e2e/src/runner.js';
import postgres from 'postgres';
import { cpuNow, cpuSpent, logSplit } from './machine-cpu.js';
import { benchEnv, pct, runStreamsBegun } from './measure.js';
import { WorkspaceRunEnds } from './run-ends.js';
import { localClients, type Clients, type FromChild, type ToChild } from './w7-clients.js';

const [clientsArg, runsArg, modeArg, stepsArg, stepMsArg, loadArg] = process.argv.slice(2);
const CLIENTS = Number(clientsArg ?? 1000);
const RUNS = Number(runsArg ?? 200);
const MODE = (modeArg ?? 'fleet') as Mode;
const STEPS = Number(stepsArg ?? 20);
const STEP_MS = Number(stepMsArg ?? 200);
const LOAD = loadArg ?? 'w2';
if (LOAD !== 'w2' && LOAD !== 'none') throw new Error(`load is w2 or none, not ${LOAD}`);
/** W2's runs in flight meanwhile (BENCH.md W2). */
const W2_IN_FLIGHT = 50;
/** Processes holding the clients; 0: this one. */
const CLIENT_PROCS = Number(process.env.W7_CLIENT_PROCS ?? 2);

/** Resolves once every child is loaded and listening. */
async function clientsForked(base: string, key: string, procs: number): Promise<Clients> {
  const children = Array.from({ length: procs }, (_, p) => {
    const child = fork(new URL('./w7-clients.ts', import.meta.url), ['child']);
    const next = <T extends FromChild['type']>(type: T) =>
      new Promise<Extract<FromChild, { type: T }>>((resolve, reject) => {
        child.once('error', reject);
        child.once('exit', (code) => reject(new Error(`W7 client process exited (${code}) before its ${type}`)));
        child.once('message', (m: FromChild) =>
          m.type === type
            ? resolve(m as Extract<FromChild, { type: T }>)
            : reject(new Error(`W7 client process sent ${m.type}, not ${type}`)),
        );
      });
    return { child, next, share: (ids: string[]) => ids.filter((_, i) => i % procs === p) };
  });
  const send = (c: (typeof children)[number], m: ToChild) => c.child.send(m);
  await Promise.all(children.map((c) => c.next('ready')));
  return {
    async open(runIds) {
      const opened = await Promise.all(
        children.map((c) => {
          const o = c.next('opened');
          send(c, { type: 'open', base, key, runIds: c.share(runIds) });
          return o;
        }),
      );
      return { statuses: opened.flatMap((o) => o.statuses), loopDelayMaxMs: Math.max(...opened.map((o) => o.loopDelayMaxMs)) };
    },
    async finish(allOpenAt) {
      const reports = await Promise.all(
        children.map((c) => {
          const r = c.next('report');
          send(c, { type: 'allOpen', at: allOpenAt });
          return r;
        }),
      );
      return {
        ok: reports.reduce((n, r) => n + r.ok, 0),
        frames: reports.reduce((n, r) => n + r.frames, 0),
        connecting: reports.flatMap((r) => r.connecting),
        steady: reports.flatMap((r) => r.steady),
      };
    },
  };
}

/** RSS (MiB) of the process listening on `port` (the gateway in fleet mode, the one dev process otherwise). */
function rssOfPort(port: number): number {
  try {
    const out = execFileSync('ss', ['-ltnpH', `sport = :${port}`], { encoding: 'utf8' });
    const pid = /pid=(\d+)/.exec(out)?.[1];
    if (!pid) return NaN;
    const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb ? Math.round(Number(kb) / 1024) : NaN;
  } catch {
    return NaN;
  }
}

async function main(): Promise<void> {
  process.env.TEST_DATABASE_URL ??= process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  process.env.TEST_NATS_URL ??= process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  const dep = await startDeployment(MODE, { env: benchEnv(MODE) });
  const port = Number(new URL(dep.base).port);
  const runner = await startRunner(dep, (r) => {
    r.workflow('w7', { triggers: [{ event: 'w7.go' }] }, async ({ step }) => {
      for (let i = 0; i < STEPS; i++) {
        await step.run(`s${i}`, () => new Promise((res) => setTimeout(() => res({ ok: true, i, t: Date.now() }), STEP_MS)));
      }
      return { ok: true };
    });
    r.workflow('w7load', { triggers: [{ event: 'w7.load' }] }, async ({ step }) => {
      let last = 0;
      for (let i = 0; i < 10; i++) last = (await step.run(`s${i}`, () => ({ i }))).i;
      return { last };
    });
  });
  try {
    await eventually('trigger index', async () => {
      const r = await api(dep.base, 'GET', '/v1/workflows', { key: dep.secretKey });
      const names = new Set(r.body.map((w: { name: string }) => w.name));
      return names.has('w7') && names.has('w7load') ? true : undefined;
    });
    const rssIdle = rssOfPort(port);
    // The client processes are loaded before the runs start (it takes seconds), so the runs' frames are still ahead.
    const clients = CLIENT_PROCS > 0 ? await clientsForked(dep.base, dep.publicKey, CLIENT_PROCS) : localClients(dep.base, dep.publicKey);
    // Start the runs, then open every stream at once (most runs are not stored yet: the gateway waits for them).
    const runIds: string[] = [];
    for (let i = 0; i < RUNS; i++) {
      const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'w7.go', data: { i } } });
      runIds.push(r.body.runId);
    }
    // W2 meanwhile: 50 runs in flight, each replaced when its end shows on the workspace's run stream.
    let loadRuns = 0;
    let loading = LOAD === 'w2';
    const ends = loading ? await WorkspaceRunEnds.open(dep.base, dep.secretKey) : undefined;
    const loadFrom = Date.now();
    const load = Array.from({ length: loading ? W2_IN_FLIGHT : 0 }, async () => {
      while (loading) {
        const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'w7.load' } });
        // A POST that started no run would leave this worker waiting for nothing: fail instead.
        if (typeof r.body?.runId !== 'string') throw new Error(`POST /v1/events (w7.load): ${r.status} ${JSON.stringify(r.body)}`);
        await ends!.wait(r.body.runId);
        loadRuns++;
      }
    });
    // The clients' processes lag too while they open the streams: their share of the lag. This one (the runner, W2's load) as well.
    const loopDelay = monitorEventLoopDelay({ resolution: 5 });
    loopDelay.enable();
    const begunBefore = await runStreamsBegun(dep);
    // The machine's CPU while the 1,000 open (W2's load included), per stream opened, by process.
    const sql = dep.databaseUrl ? postgres(dep.databaseUrl, { max: 1, onnotice: () => {} }) : undefined;
    const clientRunIds = Array.from({ length: CLIENTS }, (_, i) => runIds[i % RUNS]!);
    const cpu0 = await cpuNow(dep, sql);
    const t0 = Date.now();
    const { statuses, loopDelayMaxMs: clientDelayMax } = await clients.open(clientRunIds);
    const opened = Date.now() - t0;
    loopDelay.disable();
    const runnerDelayMax = Math.round(loopDelay.max / 1e6);
    const allOpenAt = Date.now();
    logSplit(cpuSpent(cpu0, await cpuNow(dep, sql)), CLIENTS, 'stream opened');
    await sql?.end();
    const begun = Object.entries(await runStreamsBegun(dep)).map(([k, v]) => `${k} ${v - (begunBefore[k] ?? 0)}`);
    let peakRss = Math.max(rssIdle, rssOfPort(port));
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssOfPort(port))), 500);
    const { ok, frames, connecting: lags, steady } = await clients.finish(allOpenAt);
    const wall = Date.now() - t0;
    clearInterval(sampler);
    loading = false;
    await Promise.all(load);
    ends?.close();
    const loadStepsPerS = Math.round((loadRuns * 10) / ((Date.now() - loadFrom) / 1000));

    const show = (xs: number[]) => (xs.length ? `${pct(xs, 50)} / ${pct(xs, 99)} / ${Math.max(...xs)}  (${xs.length} frames)` : 'none');
    const rows = {
      mode: MODE,
      machine: `${os.cpus().length} x ${os.cpus()[0]?.model ?? '?'}, node ${process.version}`,
      clients: CLIENTS,
      runs: RUNS,
      'steps x stepMs': `${STEPS} x ${STEP_MS}`,
      'meanwhile (load)': LOAD === 'w2' ? `W2, ${W2_IN_FLIGHT} runs in flight: ${loadStepsPerS} steps/s` : 'nothing',
      'status 200': statuses.filter((s) => s === 200).length,
      'open all (ms)': opened,
      'streams began by (gateway)': begun.join(', ') || 'n/a',
      'complete + in order + ended': `${ok}/${CLIENTS}`,
      'frames delivered': frames,
      'frames/s': Math.round(frames / (wall / 1000)),
      'lag p50/p99/max ms, connecting': show(lags),
      'client processes': CLIENT_PROCS > 0 ? CLIENT_PROCS : 'this one (with the runner)',
      "clients' own event-loop delay, max ms while connecting": clientDelayMax,
      "runner's and W2 load's event-loop delay, max ms": runnerDelayMax,
      'lag p50/p99/max ms, all open': show(steady),
      'gateway RSS idle / peak (MiB)': `${rssIdle} / ${peakRss}`,
      'wall (s)': (wall / 1000).toFixed(1),
    };
    for (const [k, v] of Object.entries(rows)) console.log(`${k.padEnd(32)} ${String(v)}`);
    // One machine-readable line for `pnpm bench` (bench.ts runs this script as W7).
    const figures = {
      clients_complete: ok,
      frames_per_s: Math.round(frames / (wall / 1000)),
      lag_p99_ms: steady.length ? pct(steady, 99) : -1,
      lag_max_ms: steady.length ? Math.max(...steady) : -1,
      lag_max_ms_connecting: lags.length ? Math.max(...lags) : -1,
      client_loop_delay_max_ms_connecting: clientDelayMax,
      runner_loop_delay_max_ms_connecting: runnerDelayMax,
      gateway_peak_rss_mib: peakRss,
      ...(LOAD === 'w2' ? { w2_steps_per_s_meanwhile: loadStepsPerS } : {}),
    };
    process.stdout.write(`RESULT ${JSON.stringify(figures)}\n`);
  } finally {
    await runner.close();
    await dep.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
