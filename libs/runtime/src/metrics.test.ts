import { describe, expect, it } from '@jest/globals';
import { runScenario } from '../test/scenario.js';
import { counter, gauge, histogram, metricsText } from './metrics.js';

const lines = async (prefix: string) => (await metricsText()).split('\n').filter((l) => l.startsWith(prefix));

describe('metrics exposition', () => {
  it('renders counters and gauges with their labels, and shares a counter by name', async () => {
    const c = counter('t_requests_total', 'Requests.');
    c.inc({ kind: 'a' });
    counter('t_requests_total', 'Requests.').inc({ kind: 'a' }, 2);
    gauge('t_depth', 'Depth.', () => [{ labels: { q: 'x"y' }, value: 3 }]);
    expect(await lines('t_requests_total')).toEqual(['t_requests_total{kind="a"} 3']);
    expect(await lines('t_depth')).toEqual(['t_depth{q="x\\"y"} 3']);
    // Label names in order whatever order they came in; backslashes, quotes and newlines escaped.
    const l = counter('t_labelled_total', 'Labelled.');
    l.inc({ z: 'p\\q', a: 'r\ns' });
    l.inc({ a: 'r\ns', z: 'p\\q' });
    expect(await lines('t_labelled_total')).toEqual(['t_labelled_total{a="r\\ns",z="p\\\\q"} 2']);
  });

  it('renders a histogram as cumulative buckets, sum and count per label set', async () => {
    const h = histogram('t_latency_seconds', 'Latency.', [0.01, 0.1, 1]);
    h.observe(0.005, { path: 'a' });
    h.observe(0.05, { path: 'a' });
    h.observe(5, { path: 'a' });
    expect(await lines('t_latency_seconds')).toEqual([
      't_latency_seconds_bucket{le="0.01",path="a"} 1',
      't_latency_seconds_bucket{le="0.1",path="a"} 2',
      't_latency_seconds_bucket{le="1",path="a"} 2',
      't_latency_seconds_bucket{le="+Inf",path="a"} 3',
      't_latency_seconds_sum{path="a"} 5.055',
      't_latency_seconds_count{path="a"} 3',
    ]);
    expect(await metricsText()).toContain('# TYPE t_latency_seconds histogram');
  });

  it('counts the time the garbage collector took', async () => {
    const gc = async () => Number(/^dws_process_gc_seconds_total (\S+)/m.exec(await metricsText())?.[1]);
    const before = await gc();
    // Enough short-lived garbage for several scavenges; gc entries arrive on a later turn.
    let keep = 0;
    for (let i = 0; i < 200_000; i++) keep += JSON.stringify({ i, pad: 'x'.repeat(100) }).length;
    expect(keep).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 50));
    expect(await gc()).toBeGreaterThan(before);
  });

  // Judged in a process of its own (why: test/scenario.ts).
  it('tells the heap kept alive after a full collection from the garbage that awaits one', async () => {
    const seen = await runScenario<{ base: number; withHeld: number; heldLength: number; released: number; junk: number; afterJunk: number }>('live-heap-process.ts');
    expect(seen.base).toBeGreaterThan(0);
    // 20 MB kept alive across a full collection: the live heap says so.
    expect(seen.withHeld).toBeGreaterThan(seen.base + 15e6);
    expect(seen.heldLength).toBe(2_500);
    // Let go: the next full collection finds it gone.
    expect(seen.released).toBeLessThan(seen.base + 5e6);
    // Garbage left lying about moves heap_used, not the live heap (no full collection has happened since).
    expect(seen.junk).toBeGreaterThan(0);
    expect(seen.afterJunk).toBe(seen.released);
  }, 60_000);
});
