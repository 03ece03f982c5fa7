/**
 * BENCH.md W7: many SSE clients tailing run streams on one gateway while
 * runs execute. Starts a deployment, registers a runner whose workflow runs
 * STEPS sequential steps of STEP_MS each, starts RUNS runs, and opens
 * CLIENTS streams spread over them (at once, right after POST /events).
 * Reports frames/s delivered, lag (receive time minus the frame's ts, for
 * frames published after the client connected), whether every client got
 * every frame once and an end, the gateway process's RSS, and how far this
 * process's own event loop fell behind while it opened the streams (its share
 * of the lag while connecting: the runner and every client live here).
 * BENCH.md has the streams tailed "while W2 runs": with load=w2 (the
 * default) W2's runs (10 steps each, 50 in flight, each end read off the
 * workspace's run stream) go on from before the streams open until they
 * end, and their steps/s is reported; load=none measures the streams alone.
 *
 *   npx tsx bench/src/w7-streams.ts [clients=1000] [runs=200] [mode=fleet|embedded|dev-real] [steps=20] [stepMs=200] [load=w2|none]
 *
 * fleet and dev-real need Postgres and NATS (DATABASE_URL / NATS_URL or the local defaults).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { api, eventually } from '../../test-e2e/src/api.js';
import { startDeployment, type Mode } from '../../test-e2e/src/deployment.js';
import { startRunner } from '../../test-e2e/src/runner.js';
import { sse } from '@dws/testing';
import postgres from 'postgres';
import { cpuNow, cpuSpent, logSplit } from './machine-cpu.js';
import { benchEnv, pct, runStreamsBegun } from './measure.js';
import { WorkspaceRunEnds } from './run-ends.js';

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
    // This process (the runner and the 1,000 clients) lags too while it opens them: its share of the lag.
    const loopDelay = monitorEventLoopDelay({ resolution: 5 });
    loopDelay.enable();
    const begunBefore = await runStreamsBegun(dep);
    // The machine's CPU while the 1,000 open (W2's load included), per stream opened, by process.
    const sql = dep.databaseUrl ? postgres(dep.databaseUrl, { max: 1, onnotice: () => {} }) : undefined;
    const cpu0 = await cpuNow(dep, sql);
    const t0 = Date.now();
    const lags: number[] = [];
    const steady: number[] = [];
    const clients = await Promise.all(
      Array.from({ length: CLIENTS }, async (_, i) => {
        const runId = runIds[i % RUNS]!;
        const s = await sse(dep.base, `/v1/runs/${runId}/stream`, { key: dep.publicKey });
        return { s, runId };
      }),
    );
    const opened = Date.now() - t0;
    loopDelay.disable();
    const clientDelayMax = Math.round(loopDelay.max / 1e6);
    const allOpenAt = Date.now();
    logSplit(cpuSpent(cpu0, await cpuNow(dep, sql)), CLIENTS, 'stream opened');
    await sql?.end();
    const begun = Object.entries(await runStreamsBegun(dep)).map(([k, v]) => `${k} ${v - (begunBefore[k] ?? 0)}`);
    let peakRss = Math.max(rssIdle, rssOfPort(port));
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssOfPort(port))), 500);
    const statuses = clients.map((c) => c.s.status);
    // unref: a pending 5-minute timer per client kept this process alive for 5 minutes after the work.
    await Promise.all(clients.map((c) => Promise.race([c.s.ended, new Promise((r) => setTimeout(r, 300_000).unref())])));
    const wall = Date.now() - t0;
    clearInterval(sampler);
    loading = false;
    await Promise.all(load);
    ends?.close();
    const loadStepsPerS = Math.round((loadRuns * 10) / ((Date.now() - loadFrom) / 1000));

    let frames = 0;
    let ok = 0;
    for (const c of clients) {
      const seqs = c.s.events.map((e) => Number(e.id));
      frames += seqs.length;
      // Tail lag: frames stamped after the client's stream was flowing (its first event), i.e. the live path;
      // backlog frames are old by design and the connect storm is reported as 'open all'.
      const flowing = c.s.receivedAt[0] ?? Infinity;
      c.s.events.forEach((e, i) => {
        const ts = Date.parse((JSON.parse(e.data!) as { ts: string }).ts);
        const at = c.s.receivedAt[i];
        if (ts > flowing && at !== undefined) (ts > allOpenAt ? steady : lags).push(at - ts);
      });
      const inOrder = seqs.every((s, i) => s === i + 1);
      const last = c.s.events[c.s.events.length - 1];
      const ended = last?.event === 'run_status' && /"status":"(succeeded|failed|cancelled)"/.test(last.data ?? '');
      if (inOrder && ended) ok++;
    }
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
      "clients' own event-loop delay, max ms while connecting": clientDelayMax,
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
