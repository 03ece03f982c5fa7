import { describe, expect, it } from '@jest/globals';
import { FreshRead } from './fresh-read.js';

const tick = () => new Promise((r) => setImmediate(r));

describe('FreshRead', () => {
  it('never answers a call with a query that started before it', async () => {
    let value = 0;
    const started: number[] = [];
    const releases: (() => void)[] = [];
    const fresh = new FreshRead(async () => {
      started.push(value);
      const seen = value;
      await new Promise<void>((r) => releases.push(r));
      return seen;
    });
    const a = fresh.read('k');
    value = 1; // a write commits while the first query runs
    const b = fresh.read('k');
    const c = fresh.read('k');
    releases.shift()!();
    expect(await a).toBe(0);
    await tick();
    expect(started).toEqual([0, 1]); // b and c share one later query
    releases.shift()!();
    expect(await b).toBe(1);
    expect(await c).toBe(1);
  });

  it('keys are independent, and a failed query does not poison the next call', async () => {
    let fail = true;
    const fresh = new FreshRead(async (k: string) => {
      if (fail) throw new Error('down');
      return k.length;
    });
    await expect(fresh.read('abc')).rejects.toThrow('down');
    fail = false;
    expect(await fresh.read('abc')).toBe(3);
    expect(await fresh.read('a')).toBe(1);
  });
});
