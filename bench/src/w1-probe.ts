/**
 * `npx tsx bench/src/w1-probe.ts [fleet|embedded] [runs]`: where W1's time goes.
 * For each 1-step run: the 202, then each frame of the run stream as the client
 * receives it, against the ts the scheduler stamped it with. Prints medians,
 * and what one run cost each process (CPU, read and write system calls,
 * wake-ups; Postgres and nats-server included) over the measured runs.
 * W1_WARMUP_RUNS (default 3,000) runs go first, unrecorded.
 * `W1_SPANS=1` also collects the services' OpenTelemetry spans (a receiver in
 * this process) and prints when each span starts and ends, from the POST.
 */
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { createRunner } from '@dws/sdk';
import { api, eventually, startDeployment, type Mode } from '@dws/test-e2e';
import postgres from 'postgres';
import { cpuNow, cpuSpent, logSplit } from './machine-cpu.js';
import { benchEnv, boundedLoad, runStreamsBegun } from './measure.js';
import { vacuumDueNow, vacuumLikeAutovacuum } from './vacuum.js';

const mode = (process.argv[2] ?? 'fleet') as Mode;
const RUNS = Number(process.argv[3] ?? 100);
// Runs before the measured ones, 10 at a time, nothing recorded: a fresh Node service is still compiling
// its hot paths for its first thousands of messages (bench/src/measure.ts WARMUP_RUNS).
const WARMUP = Number(process.env.W1_WARMUP_RUNS ?? 3000);
process.env.TEST_DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test';
process.env.TEST_NATS_URL ??= 'nats://127.0.0.1:4222';

// Spans by trace id; the probe maps each run to its trace (runTraceId) and to its POST's time.
const spans = new Map<string, { name: string; service: string; start: number; end: number }[]>();
const collector = createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    type Otlp = { resourceSpans?: { resource?: { attributes?: { key: string; value: { stringValue?: string } }[] }; scopeSpans?: { spans?: { traceId: string; name: string; startTimeUnixNano: string; endTimeUnixNano: string }[] }[] }[] };
    for (const rs of (JSON.parse(body || '{}') as Otlp).resourceSpans ?? []) {
      const service = rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue ?? '?';
      for (const ss of rs.scopeSpans ?? [])
        for (const sp of ss.spans ?? []) {
          const list = spans.get(sp.traceId) ?? [];
          list.push({ name: sp.name, service, start: Number(BigInt(sp.startTimeUnixNano) / 1000n) / 1000, end: Number(BigInt(sp.endTimeUnixNano) / 1000n) / 1000 });
          spans.set(sp.traceId, list);
        }
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
const traced = process.env.W1_SPANS === '1';
if (traced) await new Promise<void>((r) => collector.listen(0, '127.0.0.1', () => r()));
const otel: Record<string, string> = traced ? { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(collector.address() as AddressInfo).port}`, OTEL_BSP_SCHEDULE_DELAY: '200' } : {};
const dep = await startDeployment(mode, { env: { ...benchEnv(mode), ...otel } });
const stopVacuum = dep.databaseUrl ? await vacuumLikeAutovacuum(dep.databaseUrl, (l) => process.stderr.write(l)) : async () => {};
const postedAt = new Map<string, number>();
// libs/telemetry's runTraceId: a run's trace id is the first 16 bytes of SHA-256(run id).
const runTraceId = (runId: string) => createHash('sha256').update(runId).digest('hex').slice(0, 32);
let stepAt = 0;
let handler: (req: never, res: never) => void = () => undefined;
const server = createServer((req, res) => handler(req as never, res as never));
await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
const runner = createRunner({ app: 'probe', url: `${dep.base}/v1`, apiKey: dep.secretKey, signingKey: dep.signingKey, publicUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/invoke` });
runner.workflow('w1', async ({ step }) => step.run('only', () => ((stepAt = performance.timeOrigin + performance.now()), { ok: true })));
const serve = runner.serve();
handler = (req, res) => void serve(req, res);
await runner.register();
// A serve runner unseen for 90 s leaves routing (SPEC Limits): a probe longer than that needs the heartbeat.
runner.startHeartbeat();

const marks: Record<string, number[]> = {};
const mark = (k: string, v: number) => (marks[k] ??= []).push(v);
const now = () => performance.timeOrigin + performance.now();

async function one(): Promise<boolean> {
  const t0 = now();
  const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'w1', data: {} } });
  const t202 = now();
  const runId = r.body?.runId as string | undefined;
  if (!runId) return false;
  lastRun = runId;
  postedAt.set(runTraceId(runId), t0);
  const res = await request(`${dep.base}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${dep.secretKey}`, accept: 'text/event-stream' } });
  const tOpen = now();
  let buf = '';
  const seen: Record<string, number> = {};
  outer: for await (const chunk of res.body) {
    buf += (chunk as Buffer).toString();
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = frame.split('\n').find((l) => l.startsWith('data: '));
      if (!data) continue;
      const f = JSON.parse(data.slice(6)) as { kind: string; status?: string; ts: string; seq: number };
      const key = `${f.kind}:${f.status ?? ''}#${f.seq}`;
      seen[key] = now();
      seen[`${key} (ts)`] = Date.parse(f.ts);
      if (f.kind === 'run_status' && f.status === 'succeeded') break outer;
    }
  }
  res.body.destroy();
  const tEnd = now();
  mark('a. 202', t202 - t0);
  mark('b. stream open (after 202)', tOpen - t0);
  mark('c. step ran', stepAt - t0);
  for (const [k, v] of Object.entries(seen)) mark(`d. ${k}`, v - t0);
  mark('z. total', tEnd - t0);
  return true;
}

let lastRun = '';
await eventually('trigger index', () => one());
if (WARMUP > 0) await boundedLoad(WARMUP, 10, one);
// Analyzed, as bench.ts does after its warm-up (a table never analyzed is planned as empty).
if (dep.databaseUrl) await vacuumDueNow(dep.databaseUrl);
for (const k of Object.keys(marks)) delete marks[k];
postedAt.clear();
const begunBefore = await runStreamsBegun(dep);
const sql = dep.databaseUrl ? postgres(dep.databaseUrl, { max: 1, onnotice: () => {} }) : undefined;
const cpu0 = await cpuNow(dep, sql);
for (let i = 0; i < RUNS; i++) await one();
// What one run cost each process, one run at a time (each hop wakes a process that slept).
logSplit(cpuSpent(cpu0, await cpuNow(dep, sql)), RUNS, 'run');
await sql?.end();
const begun = Object.entries(await runStreamsBegun(dep)).map(([k, v]) => `${k} ${v - (begunBefore[k] ?? 0)}`);
// The two reads the stream's open is made of, on a run that has ended: how long each takes alone.
for (let i = 0; i < RUNS; i++) {
  let t = now();
  await api(dep.base, 'GET', `/v1/runs/${lastRun}`, { key: dep.secretKey });
  mark('e. GET /runs/{id} of an ended run', now() - t);
  t = now();
  const res = await request(`${dep.base}/v1/runs/${lastRun}/stream`, { headers: { authorization: `Bearer ${dep.secretKey}`, accept: 'text/event-stream' } });
  mark('f. stream of an ended run: open', now() - t);
  await res.body.text();
  mark('f. stream of an ended run: all of it', now() - t);
}
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
for (const k of Object.keys(marks).sort()) process.stdout.write(`${k.padEnd(48)} ${med(marks[k]!).toFixed(2)} ms\n`);
if (begun.length) process.stdout.write(`run streams of the ${RUNS} runs, by how each began: ${begun.join(', ')}\n`);
if (traced) {
  await new Promise((r) => setTimeout(r, 1500)); // the batch span processors' last export
  const at: Record<string, { start: number[]; end: number[] }> = {};
  for (const [traceId, t0] of postedAt)
    for (const sp of spans.get(traceId) ?? []) {
      const k = `${sp.service} ${sp.name}`;
      (at[k] ??= { start: [], end: [] }).start.push(sp.start - t0);
      at[k].end.push(sp.end - t0);
    }
  process.stdout.write(`\nspans, ms from the POST (median start .. median end, count):\n`);
  for (const [k, v] of Object.entries(at).sort((a, b) => med(a[1].start) - med(b[1].start)))
    process.stdout.write(`  ${k.padEnd(40)} ${med(v.start).toFixed(2).padStart(7)} .. ${med(v.end).toFixed(2).padStart(7)}  (${v.start.length})\n`);
}
if (traced) collector.close();
runner.stop();
server.close();
await stopVacuum();
await dep.stop();
process.exit(0);
