/**
 * BENCH.md W5 (ingest): POST /v1/events for SECONDS per phase, in batches of
 * 1 and of 100, with no matching workflow and with one matching workflow;
 * CLIENTS requests in flight. Reports events/s accepted, request p50/p99 and
 * the whole machine's CPU per event (each process's share on stderr).
 * Then event-to-run-start latency: the runner stamps when a run's first
 * step executes, minus the client's send time carried in the event (one
 * machine, one clock), for 200 events sent one after another (idle) and
 * for the runs of the matching phases (under load, includes the backlog).
 * Measured warm: first W5_WARMUP_SECONDS (default 20) of the same phases,
 * their runs drained and the tables analyzed (0 skips it).
 *
 *   npx tsx bench/src/w5-ingest.ts [mode=fleet|embedded|dev-real] [seconds=20] [clients=32]
 *
 * fleet and dev-real need Postgres and NATS (DATABASE_URL / NATS_URL or the local defaults).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import postgres from 'postgres';
import { Pool } from 'undici';
import { createRunner } from '@dws/sdk';
import { eventually, startDeployment, type Mode } from '@dws/test-e2e';
import { cpuNow, cpuSpent, logSplit } from './machine-cpu.js';
import { benchEnv, ingestBatches } from './measure.js';
import { vacuumDueNow, vacuumLikeAutovacuum } from './vacuum.js';

const [modeArg, secondsArg, clientsArg] = process.argv.slice(2);
const MODE = (modeArg ?? 'fleet') as Mode;
const SECONDS = Number(secondsArg ?? 20);
const CLIENTS = Number(clientsArg ?? 32);
const WARMUP_SECONDS = Number(process.env.W5_WARMUP_SECONDS ?? 20);
const PHASES = [
  ['batch 1, no match', 'w5.nothing', 1],
  ['batch 100, no match', 'w5.nothing', 100],
  ['batch 1, one match', 'w5.go', 1],
  ['batch 100, one match', 'w5.go', 100],
] as const;

const pct = (xs: number[], p: number) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]! : NaN);
const r1 = (x: number) => Math.round(x * 10) / 10;

async function main(): Promise<void> {
  process.env.TEST_DATABASE_URL ??= process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  process.env.TEST_NATS_URL ??= process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  const dep = await startDeployment(MODE, { env: benchEnv(MODE) });
  const stopVacuum = dep.databaseUrl ? await vacuumLikeAutovacuum(dep.databaseUrl, (line) => process.stderr.write(line)) : async () => {};
  // Runner: one workflow whose only step stamps how long after the client sent the event it ran.
  const startLag = new Map<string, number>();
  let handler: (req: never, res: never) => void = () => undefined;
  const server = createServer((req, res) => handler(req as never, res as never));
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const publicUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/invoke`;
  const runner = createRunner({ app: 'w5', url: `${dep.base}/v1`, apiKey: dep.secretKey, signingKey: dep.signingKey, publicUrl });
  runner.workflow('w5', { triggers: [{ event: 'w5.go' }] }, async ({ event, step, ctx }) =>
    step.run('first', () => {
      const t0 = (event.data as { t0?: number } | null)?.t0;
      if (typeof t0 === 'number' && !startLag.has(ctx.runId)) startLag.set(ctx.runId, Date.now() - t0);
      return { ok: true };
    }),
  );
  const serve = runner.serve();
  handler = (req, res) => void serve(req, res);
  await runner.register();
  // Runs outlive the 90 s liveness TTL while the backlog drains: keep the runner registered.
  runner.startHeartbeat();
  const pool = new Pool(dep.base, { connections: CLIENTS, pipelining: 1 });
  // The deployment's own Postgres backends, for the machine's CPU per event (none embedded: PGlite is in the process).
  const sql = dep.databaseUrl ? postgres(dep.databaseUrl, { max: 1, onnotice: () => {} }) : undefined;
  const post = async (body: unknown) => {
    const res = await pool.request({
      path: '/v1/events',
      method: 'POST',
      headers: { authorization: `Bearer ${dep.secretKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await res.body.text();
    if (res.statusCode !== 202) throw new Error(`POST /v1/events answered ${res.statusCode}: ${text.slice(0, 200)}`);
    return JSON.parse(text) as { runId?: string; results?: { runId?: string }[] };
  };
  try {
    await eventually('trigger index', async () => ((await post({ name: 'w5.go', data: {} })).runId ? true : undefined));
    const rows: Record<string, unknown>[] = [];

    const accepted: string[] = [];
    // W5_PHASES="batch 1, no match" (labels, ';'-separated): run only those phases (profiling one of them).
    const only = process.env.W5_PHASES?.split(';').map((x) => x.trim());
    const phase = async (label: string, name: string, batch: number, seconds = SECONDS, record = true) => {
      if (only && !only.includes(label)) return;
      const lat: number[] = [];
      let events = 0;
      const until = performance.now() + seconds * 1000;
      const cpu0 = await cpuNow(dep, sql);
      const batches0 = await ingestBatches(dep);
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: CLIENTS }, async () => {
          while (performance.now() < until) {
            const t = Date.now();
            const one = { name, data: { t0: t, pad: 'x'.repeat(64) } };
            const s = performance.now();
            const r = await post(batch === 1 ? one : Array.from({ length: batch }, () => one));
            for (const id of r.results?.map((x) => x.runId) ?? [r.runId]) if (id) accepted.push(id);
            lat.push(performance.now() - s);
            events += batch;
          }
        }),
      );
      if (!record) return;
      const wall = (performance.now() - t0) / 1000;
      // CPU per event does not move with the VM's speed as events/s does: compare it across commits.
      const cpu = cpuSpent(cpu0, await cpuNow(dep, sql));
      logSplit(cpu, events, 'event');
      const batches = await ingestBatches(dep);
      const requests = batches.requests - batches0.requests;
      if (requests > 0) process.stderr.write(`  POSTs per bus request to ingest (the gateway's batches): ${r1((batches.calls - batches0.calls) / requests)}\n`);
      const row = {
        phase: label, events_per_s: Math.round(events / wall), requests: lat.length, p50_ms: r1(pct(lat, 50)), p99_ms: r1(pct(lat, 99)),
        machine_cpu_us_per_event: Math.round((cpu.machine / events) * 1000),
      };
      rows.push(row);
      process.stderr.write(`${JSON.stringify(row)}\n`);
    };

    // Warm, as `pnpm bench` warms its other workloads: services fresh from start spend much of their CPU
    // compiling (docs/profiles.md, 2026-11-27 evening), and Postgres plans tables it has not analyzed as empty.
    // A quarter of W5_WARMUP_SECONDS in each phase, the runs it started drained, then autovacuum's round.
    if (WARMUP_SECONDS > 0) {
      const t = performance.now();
      for (const [label, name, batch] of PHASES) await phase(label, name, batch, WARMUP_SECONDS / PHASES.length, false);
      await eventually('warm-up runs started', async () => (accepted.every((id) => startLag.has(id)) ? true : undefined), 900_000);
      if (dep.databaseUrl) await vacuumDueNow(dep.databaseUrl);
      process.stderr.write(`  warmed up for ${r1((performance.now() - t) / 1000)} s (${accepted.length} runs)\n`);
      accepted.length = 0;
    }
    await phase(...PHASES[0]);
    await phase(...PHASES[1]);
    accepted.length = 0;
    await phase(...PHASES[2]);
    await phase(...PHASES[3]);
    // Runs accepted under load start as the scheduler drains the backlog: wait for all of them (bounded).
    const drainStart = performance.now();
    await eventually('backlog drained', async () => (accepted.every((id) => startLag.has(id)) ? true : undefined), 900_000);
    const drainS = (performance.now() - drainStart) / 1000;
    const loaded = accepted.map((id) => startLag.get(id)!);

    // Idle: one event at a time, each waited for until its run started.
    const idle: number[] = [];
    for (let i = 0; i < 200; i++) {
      const r = await post({ name: 'w5.go', data: { t0: Date.now() } });
      const id = r.runId!;
      await eventually('run started', async () => (startLag.has(id) ? true : undefined), 120_000);
      idle.push(startLag.get(id)!);
    }
    const lagRow = {
      idle_start_p50_ms: r1(pct(idle, 50)), idle_start_p99_ms: r1(pct(idle, 99)),
      under_load_runs: loaded.length, backlog_drain_s: r1(drainS), under_load_start_p50_ms: r1(pct(loaded, 50)), under_load_start_p99_ms: r1(pct(loaded, 99)),
    };
    process.stderr.write(`${JSON.stringify(lagRow)}\n`);
    const cpu = os.cpus();
    process.stdout.write(`\nW5 ingest, mode ${MODE}, ${SECONDS}s per phase, ${CLIENTS} clients; ${cpu.length} x ${cpu[0]?.model ?? '?'}, Node ${process.version}\n`);
    console.table(rows);
    console.table([lagRow]);
    // One machine-readable line for `pnpm bench` (bench.ts runs this script as W5).
    const key = (label: string) => label.replace(/[^a-z0-9]+/g, '_');
    const figures: Record<string, number> = { ...lagRow };
    for (const r of rows) {
      figures[`${key(String(r.phase))}_events_per_s`] = r.events_per_s as number;
      figures[`${key(String(r.phase))}_p99_ms`] = r.p99_ms as number;
      figures[`${key(String(r.phase))}_machine_cpu_us_per_event`] = r.machine_cpu_us_per_event as number;
    }
    process.stdout.write(`RESULT ${JSON.stringify(figures)}\n`);
  } finally {
    runner.stop();
    await pool.close();
    await sql?.end();
    await new Promise<void>((r) => server.close(() => r()));
    await stopVacuum();
    await dep.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
