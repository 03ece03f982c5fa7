// `pnpm chaos [--minutes 2] [--seed N] [--invoker] [--infra-restarts] [--in-flight 20] [--settle 60] [--replicas 1] [--connect]`, and
// `pnpm test:chaos [minutes]` (= --infra-restarts: nats-server and Postgres crash once each too): the long chaos
// run on the six-process fleet (the CI test is test-e2e/test/chaos.e2e.test.ts). Needs real Postgres
// and NATS (TEST_DATABASE_URL | DATABASE_URL | postgres://postgres@127.0.0.1:5432/test, and
// TEST_NATS_URL | NATS_URL | nats://127.0.0.1:4222), or with --infra-restarts the machine's Postgres
// and nats-server binaries (it runs its own). Exits 1 when an invariant broke.
import { parseArgs } from 'node:util';
import { runChaos, violations } from './chaos.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    minutes: { type: 'string', default: '2' },
    seed: { type: 'string' },
    invoker: { type: 'boolean', default: false },
    'infra-restarts': { type: 'boolean', default: false },
    'in-flight': { type: 'string', default: '20' },
    settle: { type: 'string', default: '60' },
    replicas: { type: 'string', default: '1' },
    connect: { type: 'boolean', default: false },
  },
});
const num = (name: string, v: string | undefined): number | undefined => {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) {
    console.error(`--${name} must be a non-negative number, got ${v}`);
    process.exit(2);
  }
  return n;
};

// startDeployment finds the infra where the jest setup publishes it.
process.env.TEST_DATABASE_URL ||= process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
process.env.TEST_NATS_URL ||= process.env.NATS_URL || 'nats://127.0.0.1:4222';

const report = await runChaos({
  // `pnpm test:chaos 5`: the minutes may come as the one positional argument.
  loadMs: num('minutes', positionals[0] ?? values.minutes)! * 60_000,
  seed: num('seed', values.seed),
  forceInvoker: values.invoker,
  infraRestarts: values['infra-restarts'],
  inFlight: num('in-flight', values['in-flight']),
  settleMs: num('settle', values.settle)! * 1000,
  replicas: Math.max(1, num('replicas', values.replicas)!),
  connect: values.connect,
  log: (line) => console.log(line),
});
for (const r of report.slowest)
  console.log(`slowest: ${r.runId} ${r.workflow} ${r.key} ${r.status} took ${r.tookMs ?? '?'} ms (${r.createdAt} -> ${r.endedAt})${r.timeline ? `\n  ${r.timeline}` : ''}`);
for (const w of report.waitTimeouts) console.log(`wait timed out: ${w}`);
for (const l of report.lateEmits) console.log(`emit after its waiter timed out: ${l}`);
const broken = violations(report);
for (const v of broken) console.log(`VIOLATION ${v}`);
console.log(
  broken.length === 0 ? 'chaos: every invariant held' : `chaos: ${broken.length} violation(s); replay with --seed ${report.seed}`,
);
process.exit(broken.length === 0 ? 0 : 1);
