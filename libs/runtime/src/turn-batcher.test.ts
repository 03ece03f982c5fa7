import { describe, expect, it } from '@jest/globals';
import { TurnBatcher } from './turn-batcher.js';

/** A send that records each call and answers when told (or at once). */
function recorder(auto = true) {
  const calls: { key: string; items: number[]; answer: (r?: number[]) => void; fail: (e: Error) => void }[] = [];
  const send = (key: string, items: number[]) =>
    new Promise<number[]>((resolve, reject) => {
      const call = { key, items, answer: (r?: number[]) => resolve(r ?? items.map((x) => x * 10)), fail: reject };
      calls.push(call);
      if (auto) call.answer();
    });
  return { calls, send };
}

const turn = () => new Promise((r) => setImmediate(r));

describe('TurnBatcher', () => {
  it('sends an item of a quiet moment at once, alone, with what the caller adds in the same synchronous part', async () => {
    const { calls, send } = recorder();
    const b = new TurnBatcher(send, { maxItems: 10 });
    const out = Promise.all([b.add('k', 1), b.add('k', 2)]);
    await Promise.resolve();
    // Before the turn ends: the call has gone.
    expect(calls.map((c) => c.items)).toEqual([[1, 2]]);
    expect(await out).toEqual([10, 20]);
  });

  it('gathers the items of one busy turn, each from a callback of its own, into one call', async () => {
    const { calls, send } = recorder();
    const b = new TurnBatcher(send, { maxItems: 100 });
    await b.add('k', 0); // a call has just left: not a quiet moment
    const out = await new Promise<number[]>((resolve) => {
      const all: Promise<number>[] = [];
      for (let i = 1; i <= 20; i++) {
        setImmediate(() => {
          all.push(b.add('k', i));
          if (all.length === 20) resolve(Promise.all(all));
        });
      }
    });
    expect(out).toEqual(Array.from({ length: 20 }, (_, i) => (i + 1) * 10));
    expect(calls.slice(1).map((c) => c.items.length).reduce((a, n) => a + n, 0)).toBe(20);
    expect(calls.length - 1).toBeLessThanOrEqual(2);
  });

  it('takes a call answered a moment ago as busy, however long ago it left (one process, answers worked out on the same thread)', async () => {
    const sizes: number[] = [];
    const b = new TurnBatcher<number, number>(
      async (_k, items) => {
        sizes.push(items.length);
        // The answer worked out synchronously, as an in-process service on an embedded database does.
        const t = performance.now();
        while (performance.now() - t < 3);
        return items;
      },
      { maxItems: 100 },
    );
    await b.add('k', 0);
    sizes.length = 0;
    await new Promise<unknown>((resolve) => {
      const all: Promise<number>[] = [];
      for (let i = 1; i <= 6; i++) {
        setImmediate(() => {
          all.push(b.add('k', i));
          if (all.length === 6) resolve(Promise.all(all));
        });
      }
    });
    expect(sizes.reduce((a, n) => a + n, 0)).toBe(6);
    expect(sizes.length).toBeLessThanOrEqual(2);
  });

  it('keeps at most maxInFlight calls per key out; what arrives meanwhile goes in the next call', async () => {
    const { calls, send } = recorder(false);
    const b = new TurnBatcher(send, { maxItems: 100, maxInFlight: 2, slowCallMs: 60_000 });
    const first = b.add('k', 1);
    await turn();
    const second = b.add('k', 2);
    await turn();
    const held = [b.add('k', 3), b.add('k', 4), b.add('k', 5)];
    // Another key has slots of its own.
    const other = b.add('j', 9);
    await turn();
    expect(calls.map((c) => [c.key, c.items])).toEqual([['k', [1]], ['k', [2]], ['j', [9]]]);
    calls[0]!.answer();
    expect(await first).toBe(10);
    await turn();
    expect(calls[3]!.items).toEqual([3, 4, 5]);
    for (const c of calls.slice(1)) c.answer();
    expect(await Promise.all([second, ...held, other])).toEqual([20, 30, 40, 50, 90]);
  });

  it('lets the items behind a slow call go once slowCallMs has passed', async () => {
    const { calls, send } = recorder(false);
    const b = new TurnBatcher(send, { maxItems: 100, maxInFlight: 1, slowCallMs: 20 });
    void b.add('k', 1);
    await turn();
    const behind = b.add('k', 2);
    await turn();
    expect(calls).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 40));
    expect(calls.map((c) => c.items)).toEqual([[1], [2]]);
    calls[1]!.answer();
    expect(await behind).toBe(20);
    calls[0]!.answer();
  });

  it('splits at maxItems and maxWeight, and sends an item heavier than maxWeight alone', async () => {
    const { calls, send } = recorder();
    const b = new TurnBatcher(send, { maxItems: 3, maxWeight: 10, weigh: (x: number) => x, maxInFlight: 10 });
    await Promise.all([4, 4, 1, 1, 1, 1, 25, 2].map((x) => b.add('k', x)));
    expect(calls.map((c) => c.items)).toEqual([[4, 4, 1], [1, 1, 1], [25], [2]]);
  });

  it('fails the items of a call that fails, and only those', async () => {
    let n = 0;
    const b = new TurnBatcher<number, number>(
      async (_k, items) => {
        if (n++ === 0) throw new Error('down');
        return items;
      },
      { maxItems: 10 },
    );
    const failed = Promise.allSettled([b.add('k', 1), b.add('k', 2)]);
    await turn();
    const ok = b.add('k', 3);
    expect((await failed).map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(await ok).toBe(3);
  });
});
