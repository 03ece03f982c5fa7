import { describe, expect, it } from '@jest/globals';
import { ids } from '@dws/runtime';
import { idTimeMs, TimelineMerge, type Frame } from './timeline.js';

const f = (seq: number, extra: Partial<Frame> = {}): Frame => ({ kind: 'log', seq, ...extra });
const seqs = (frames: Frame[]) => frames.map((x) => x.seq);

describe('TimelineMerge', () => {
  it('sends the backlog after `from`, then live frames, each once', () => {
    const m = new TimelineMerge(2);
    expect(seqs(m.live(f(5)))).toEqual([]); // arrives before the backlog: held
    expect(seqs(m.stored([f(1), f(2), f(3), f(4)]))).toEqual([3, 4, 5]);
    expect(seqs(m.live(f(4)))).toEqual([]); // already sent
    expect(seqs(m.live(f(6)))).toEqual([6]);
    expect(m.last).toBe(6);
    expect(m.gap).toBe(false);
  });

  it('reports a gap when a live frame runs ahead, and fills it from storage', () => {
    const m = new TimelineMerge(0);
    expect(seqs(m.stored([f(1)]))).toEqual([1]);
    expect(seqs(m.live(f(3)))).toEqual([]);
    expect(m.gap).toBe(true);
    expect(seqs(m.stored([f(2), f(3)]))).toEqual([2, 3]);
    expect(m.gap).toBe(false);
    expect(seqs(m.live(f(2)))).toEqual([]);
  });

  it('releases reordered live frames in order', () => {
    const m = new TimelineMerge(0);
    expect(seqs(m.live(f(2)))).toEqual([]);
    expect(seqs(m.live(f(1)))).toEqual([1, 2]);
  });

  it('ends at the terminal run_status frame and sends nothing after it', () => {
    const m = new TimelineMerge(0);
    const out = m.stored([f(1, { kind: 'run_status', status: 'running' }), f(2, { kind: 'run_status', status: 'failed' }), f(3)]);
    expect(seqs(out)).toEqual([1, 2]);
    expect(m.done).toBe(true);
    expect(m.live(f(3))).toEqual([]);
  });

  it('ignores frames with a bad seq', () => {
    const m = new TimelineMerge(0);
    expect(m.live({ kind: 'log', seq: Number.NaN })).toEqual([]);
    expect(m.live({ kind: 'log', seq: -1 })).toEqual([]);
    expect(m.gap).toBe(false);
  });
});

describe('idTimeMs', () => {
  it('reads the time of a ulid-style id', () => {
    const before = Date.now();
    const t = idTimeMs(ids.run())!;
    expect(t).toBeGreaterThanOrEqual(before);
    expect(t).toBeLessThanOrEqual(Date.now());
    expect(idTimeMs('run_missing')).toBeUndefined();
    expect(idTimeMs('run_01ARZ3NDEKTSV4RRFFQ69G5FA')).toBeUndefined();
  });
});
