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

type Labels = Record<string, string>;

const key = (labels: Labels) =>
  Object.keys(labels)
    .sort()
    .map((k) => `${k}="${String(labels[k]).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`)
    .join(',');

interface Metric {
  name: string;
  help: string;
  type: 'counter' | 'gauge';
  samples(): Promise<Map<string, number>> | Map<string, number>;
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
gauge('dws_process_cpu_seconds_total', 'User and system CPU time of the process.', () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
});
gauge('dws_process_resident_memory_bytes', 'Resident memory of the process.', () => process.memoryUsage().rss);
gauge('dws_process_heap_used_bytes', 'V8 heap in use.', () => process.memoryUsage().heapUsed);
gauge('dws_process_uptime_seconds', 'Seconds since the process loaded its metrics.', () => (Date.now() - started) / 1000);
gauge('dws_process_event_loop_lag_seconds', 'How late the last 500 ms timer fired.', () => lastLag / 1000);

/** Content type of the exposition. */
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** Every metric of this process in the Prometheus text format. */
export async function metricsText(): Promise<string> {
  const out: string[] = [];
  for (const m of metrics.values()) {
    out.push(`# HELP ${m.name} ${m.help}`, `# TYPE ${m.name} ${m.type}`);
    for (const [labels, value] of await m.samples()) out.push(`${m.name}${labels ? `{${labels}}` : ''} ${Number.isFinite(value) ? value : 0}`);
  }
  return `${out.join('\n')}\n`;
}
