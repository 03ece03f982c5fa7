/**
 * The process's metrics in Prometheus text format (`GET /metrics`): one
 * registry per process, so `pnpm dev` (six services in one process) has one
 * and each separately started service its own. Counters are cheap on the hot
 * path (a Map lookup and an add); gauges are read when scraped. Names:
 * docs/metrics.md.
 *
 * Not prom-client: its optional peer (@opentelemetry/api) makes pnpm resolve
 * a second drizzle-orm for the lib that depends on it, which splits the ORM's
 * types between services; the exposition format needs no more than this.
 */
import type { PoolStats } from '@dws/db';
import { gcMillis, heapLiveBytes } from './heap.js';

type Labels = Record<string, string>;

const NEEDS_ESCAPE = /[\\"\n]/;
const escaped = (v: string) => (NEEDS_ESCAPE.test(v) ? v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') : v);

/** The series' label text, names sorted: computed on every `inc`, so no array of parts and no replace for plain values. */
function key(labels: Labels): string {
  const names = Object.keys(labels);
  if (names.length > 1) names.sort();
  let out = '';
  for (const k of names) out += `${out === '' ? '' : ','}${k}="${escaped(String(labels[k]))}"`;
  return out;
}

interface Metric {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  samples(): Promise<Map<string, number>> | Map<string, number>;
  /** Exposition lines, for metrics whose samples are not `name{labels} value` (histograms). */
  lines?(): string[];
}

const metrics = new Map<string, Metric>();

export interface Counter {
  inc(labels?: Labels, by?: number): void;
}

/** A counter, the same one however often it is asked for (six services in one process share names). */
export function counter(name: string, help: string): Counter {
  const existing = metrics.get(name) as (Metric & Counter) | undefined;
  if (existing) return existing;
  const values = new Map<string, number>();
  const c: Metric & Counter = {
    name,
    help,
    type: 'counter',
    samples: () => values,
    inc(labels = {}, by = 1) {
      const k = key(labels);
      values.set(k, (values.get(k) ?? 0) + by);
    },
  };
  metrics.set(name, c);
  return c;
}

export interface Histogram {
  observe(value: number, labels?: Labels): void;
}

/** Latency buckets in seconds: 1 ms to 60 s. */
const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** A cumulative histogram (Prometheus `_bucket`, `_sum`, `_count`), shared like counters. */
export function histogram(name: string, help: string, buckets: number[] = SECONDS_BUCKETS): Histogram {
  const existing = metrics.get(name) as (Metric & Histogram) | undefined;
  if (existing) return existing;
  const series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  const h: Metric & Histogram = {
    name,
    help,
    type: 'histogram',
    samples: () => new Map(),
    observe(value, labels = {}) {
      const k = key(labels);
      let s = series.get(k);
      if (!s) series.set(k, (s = { labels, counts: buckets.map(() => 0), sum: 0, count: 0 }));
      for (let i = 0; i < buckets.length; i++) if (value <= buckets[i]!) s.counts[i]!++;
      s.sum += value;
      s.count++;
    },
    lines() {
      const out: string[] = [];
      for (const s of series.values()) {
        const with_ = (extra: Labels) => `{${key({ ...s.labels, ...extra })}}`;
        buckets.forEach((b, i) => out.push(`${name}_bucket${with_({ le: String(b) })} ${s.counts[i]}`));
        out.push(`${name}_bucket${with_({ le: '+Inf' })} ${s.count}`);
        const plain = key(s.labels);
        out.push(`${name}_sum${plain ? `{${plain}}` : ''} ${s.sum}`, `${name}_count${plain ? `{${plain}}` : ''} ${s.count}`);
      }
      return out;
    },
  };
  metrics.set(name, h);
  return h;
}

/** A gauge read when scraped: `read` returns its value, or its values by label set. */
export function gauge(name: string, help: string, read: () => number | { labels: Labels; value: number }[] | Promise<number | { labels: Labels; value: number }[]>): void {
  if (metrics.has(name)) return;
  metrics.set(name, {
    name,
    help,
    type: 'gauge',
    async samples() {
      const v = await read();
      return new Map(typeof v === 'number' ? [['', v]] : v.map((s) => [key(s.labels), s.value] as [string, number]));
    },
  });
}

const started = Date.now();
let lastLag = 0;
// Event-loop lag: how late a 500 ms timer fires (a busy loop delays every message it owes).
{
  let expected = Date.now() + 500;
  setInterval(() => {
    const now = Date.now();
    lastLag = Math.max(0, now - expected);
    expected = now + 500;
  }, 500).unref();
}
gauge('dws_process_gc_seconds_total', 'Time the garbage collector held the main thread (V8 gc entries), since start.', () => gcMillis() / 1000);
gauge('dws_process_heap_live_bytes', "What V8's last full collection kept, its old generation in use just after (0 before the first): what the process keeps alive.", heapLiveBytes);
gauge('dws_process_cpu_seconds_total', 'User and system CPU time of the process.', () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
});
gauge('dws_process_resident_memory_bytes', 'Resident memory of the process.', () => process.memoryUsage().rss);
gauge('dws_process_heap_used_bytes', 'V8 heap in use.', () => process.memoryUsage().heapUsed);
// Committed: what the heap holds of RSS, garbage and free pages included (used is only what is live).
gauge('dws_process_heap_total_bytes', 'V8 heap committed (live objects, garbage and free space).', () => process.memoryUsage().heapTotal);
// Outside the V8 heap: buffers, and WebAssembly memory (embedded PGlite's whole Postgres lives there).
gauge('dws_process_external_memory_bytes', 'Memory outside the V8 heap held by JavaScript objects: buffers and WebAssembly memories.', () => process.memoryUsage().external);
gauge('dws_process_uptime_seconds', 'Seconds since the process loaded its metrics.', () => (Date.now() - started) / 1000);
gauge('dws_process_event_loop_lag_seconds', 'How late the last 500 ms timer fired.', () => lastLag / 1000);

interface BusBacklog {
  stream: string;
  durable: string;
  pending: number;
  ackPending: number;
}

/**
 * Health of the process's own storage and bus, read when scraped (1 up, 0
 * down), its Postgres pool, and the lag of each durable consumer the process
 * is part of (one consumer info call per durable per scrape).
 */
export function infraGauges(infra: {
  db: { healthy(): Promise<boolean>; pool?(): PoolStats };
  bus: { healthy(): Promise<boolean>; backlog(): Promise<BusBacklog[]> };
}): void {
  gauge('dws_db_up', 'The database answers (1) or not (0).', async () => ((await infra.db.healthy().catch(() => false)) ? 1 : 0));
  const db = infra.db;
  if (db.pool) {
    const pool = () => db.pool!();
    gauge('dws_db_pool_size', 'Most connections the database pool opens.', () => pool().size);
    gauge('dws_db_pool_connections', 'Connections of the database pool by state: in_use (a statement, a transaction, or being opened) or idle.', () => {
      const p = pool();
      return [
        { labels: { state: 'in_use' }, value: p.inUse },
        { labels: { state: 'idle' }, value: p.idle },
      ];
    });
    // Saturation: statements that found every connection in use. The rate of the seconds is how many wait on average.
    gauge('dws_db_pool_waiting', 'Statements waiting for a free connection of the pool right now.', () => pool().waiting);
    gauge('dws_db_pool_waits_total', 'Statements that found every connection of the pool in use and waited for one, since start.', () => pool().waits);
    gauge('dws_db_pool_wait_seconds_total', 'Time statements spent waiting for a connection of the pool, summed, since start.', () => pool().waitedMs / 1000);
  }
  gauge('dws_bus_up', 'The bus answers (1) or not (0).', async () => ((await infra.bus.healthy().catch(() => false)) ? 1 : 0));
  // One read serves both gauges of a scrape (they are read one after the other).
  let read: { at: number; rows: Promise<BusBacklog[]> } | undefined;
  const backlog = () => {
    if (!read || Date.now() - read.at > 1000) read = { at: Date.now(), rows: infra.bus.backlog().catch(() => []) };
    return read.rows;
  };
  const by = (pick: (b: BusBacklog) => number) => async () =>
    (await backlog()).map((b) => ({ labels: { stream: b.stream, durable: b.durable }, value: pick(b) }));
  gauge('dws_bus_consumer_pending', 'Messages stored for a durable consumer and not yet delivered: its lag.', by((b) => b.pending));
  gauge('dws_bus_consumer_ack_pending', 'Messages a durable consumer has been given and not yet acknowledged.', by((b) => b.ackPending));
}

/** Content type of the exposition. */
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** Every metric of this process in the Prometheus text format. */
export async function metricsText(): Promise<string> {
  const out: string[] = [];
  for (const m of metrics.values()) {
    out.push(`# HELP ${m.name} ${m.help}`, `# TYPE ${m.name} ${m.type}`);
    if (m.lines) {
      out.push(...m.lines());
      continue;
    }
    for (const [labels, value] of await m.samples()) out.push(`${m.name}${labels ? `{${labels}}` : ''} ${Number.isFinite(value) ? value : 0}`);
  }
  return `${out.join('\n')}\n`;
}
