import { describe, expect, it } from '@jest/globals';
import { GroupCommit } from './group-commit.js';

type Item = { key: string; v: number };

function recorder(fail?: (items: Item[]) => boolean) {
  const batches: number[][] = [];
  let release: (() => void) | undefined;
  let gate: Promise<void> | undefined;
  const write = async (items: Item[]) => {
    batches.push(items.map((i) => i.v));
    if (gate) await gate;
    if (fail?.(items)) throw new Error(`bad batch ${items.map((i) => i.v).join(',')}`);
    return items.map((i) => i.v * 10);
  };
  return {
    batches,
    write,
    hold() {
      gate = new Promise<void>((r) => (release = r));
    },
    release() {
      gate = undefined;
      release?.();
    },
  };
}

describe('GroupCommit', () => {
  it('writes the items of one event-loop turn together, and those that come during a write in the next, answering each in order', async () => {
    const r = recorder();
    const gc = new GroupCommit<Item, number>(r.write, (i) => i.key);
    r.hold();
    const first = [1, 2].map((v) => gc.submit({ key: `k${v}`, v }));
    expect(r.batches).toEqual([]);
    await new Promise((res) => setImmediate(res));
    expect(r.batches).toEqual([[1, 2]]);
    const rest = [3, 4].map((v) => gc.submit({ key: `k${v}`, v }));
    r.release();
    expect(await Promise.all(first)).toEqual([10, 20]);
    expect(await Promise.all(rest)).toEqual([30, 40]);
    expect(r.batches).toEqual([[1, 2], [3, 4]]);
  });

  it('puts at most one item of a key in a batch, and caps the batch size', async () => {
    const r = recorder();
    const gc = new GroupCommit<Item, number>(r.write, (i) => i.key, 2);
    r.hold();
    const all = [gc.submit({ key: 'a', v: 1 }), gc.submit({ key: 'a', v: 2 }), gc.submit({ key: 'b', v: 3 }), gc.submit({ key: 'c', v: 4 })];
    r.release();
    expect(await Promise.all(all)).toEqual([10, 20, 30, 40]);
    expect(r.batches).toEqual([[1, 3], [2, 4]]);
  });

  it('without a key, puts items alike in one batch (up to the cap)', async () => {
    const r = recorder();
    const gc = new GroupCommit<Item, number>(r.write, undefined, 3);
    r.hold();
    const all = [1, 2, 3, 4].map((v) => gc.submit({ key: 'same', v }));
    r.release();
    expect(await Promise.all(all)).toEqual([10, 20, 30, 40]);
    expect(r.batches).toEqual([[1, 2, 3], [4]]);
  });

  it('a failed batch is written item by item: only the bad item fails', async () => {
    const r = recorder((items) => items.some((i) => i.v === 3));
    const gc = new GroupCommit<Item, number>(r.write, (i) => i.key);
    r.hold();
    const all = [2, 3, 4].map((v) => gc.submit({ key: `k${v}`, v }).catch((e: Error) => e.message));
    r.release();
    expect(await Promise.all(all)).toEqual([20, 'bad batch 3', 40]);
    expect(r.batches).toEqual([[2, 3, 4], [2], [3], [4]]);
  });
});
