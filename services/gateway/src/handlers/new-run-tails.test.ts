import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { announcedRunIds, NewRunTails, type Listen } from './new-run-tails.js';

const enc = new TextEncoder();

/** Listeners by subject, as LiveHub keeps them. */
class Subjects implements Listen {
  readonly fns = new Map<string, Set<(data: Uint8Array) => void>>();
  listen(subject: string, fn: (data: Uint8Array) => void): () => void {
    const set = this.fns.get(subject) ?? new Set();
    set.add(fn);
    this.fns.set(subject, set);
    return () => {
      set.delete(fn);
      if (set.size === 0) this.fns.delete(subject);
    };
  }
  emit(subject: string, frame: unknown): void {
    for (const fn of this.fns.get(subject) ?? []) fn(enc.encode(JSON.stringify(frame)));
  }
}

const subject = (ws: string, run: string) => `tl.${ws}.${run}`;
const frame = (seq: number) => ({ kind: 'run_status', seq, status: 'running' });

describe('announcedRunIds', () => {
  it('reads the runs of one result or of a batch, up to the cap', () => {
    const one = { runId: 'run_a', woke: 0, triggered: [{ workflow: 'w', app: 'a', runId: 'run_a' }, { workflow: 'v', app: 'a', runId: 'run_b' }] };
    expect(announcedRunIds(JSON.stringify(one), 16)).toEqual(['run_a', 'run_b']);
    const batch = { results: [one, { error: { code: 'invalid_event' } }, { triggered: [{ runId: 'run_c' }] }] };
    expect(announcedRunIds(JSON.stringify(batch), 16)).toEqual(['run_a', 'run_b', 'run_c']);
    expect(announcedRunIds(JSON.stringify(batch), 2)).toEqual(['run_a', 'run_b']);
  });

  it('finds nothing in a body without runs', () => {
    for (const body of [undefined, '', 'not json', 'null', '[]', '{"triggered":[]}', '{"triggered":"x"}', '{"triggered":[{"runId":""},{"runId":7},null]}', '{"results":null}']) {
      expect(announcedRunIds(body, 16)).toEqual([]);
    }
  });
});

describe('NewRunTails', () => {
  let hub: Subjects;
  beforeEach(() => {
    jest.useFakeTimers();
    hub = new Subjects();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('holds the frames of an announced run for its stream, then hands the later ones to it', () => {
    const tails = new NewRunTails(hub, subject);
    tails.announced('ws', ['run_a']);
    hub.emit(subject('ws', 'run_a'), frame(1));
    hub.emit(subject('ws', 'run_a'), 'not a frame');
    const later: unknown[] = [];
    const taken = tails.take('ws', 'run_a', (f) => later.push(f));
    expect(taken?.frames).toEqual([frame(1)]);
    hub.emit(subject('ws', 'run_a'), frame(2));
    expect(later).toEqual([frame(2)]);
    // Taken once; the subscription is now the stream's to end.
    expect(tails.take('ws', 'run_a', () => undefined)).toBeUndefined();
    expect(tails.size).toBe(0);
    taken!.unlisten();
    expect(hub.fns.size).toBe(0);
  });

  it('is taken only by the workspace that announced the run', () => {
    const tails = new NewRunTails(hub, subject);
    tails.announced('ws', ['run_a']);
    expect(tails.take('ws_other', 'run_a', () => undefined)).toBeUndefined();
    expect(tails.take('ws', 'run_a', () => undefined)).toBeDefined();
  });

  it('lets a tail nobody takes go after holdMs, and keeps at most maxFrames and max tails', () => {
    const tails = new NewRunTails(hub, subject, { holdMs: 100, max: 2, maxFrames: 3 });
    tails.announced('ws', ['run_a', 'run_b', 'run_c']);
    expect(tails.size).toBe(2);
    for (let seq = 1; seq <= 5; seq++) hub.emit(subject('ws', 'run_a'), frame(seq));
    expect(tails.take('ws', 'run_a', () => undefined)?.frames.map((f) => f.seq)).toEqual([1, 2, 3]);
    jest.advanceTimersByTime(100);
    expect(tails.size).toBe(0);
    expect(hub.fns.has(subject('ws', 'run_b'))).toBe(false);
    expect(tails.take('ws', 'run_b', () => undefined)).toBeUndefined();
  });

  it('follows one announcement in 32 once few tails are taken, and all again once they are', () => {
    const tails = new NewRunTails(hub, subject, { holdMs: 10 });
    let n = 0;
    const announce = (k: number) => {
      const ids = Array.from({ length: k }, () => `run_${++n}`);
      tails.announced('ws', ids);
      return ids;
    };
    // Nobody follows: the share taken decays below a tenth.
    for (let i = 0; i < 60; i++) {
      announce(1);
      jest.advanceTimersByTime(10);
    }
    const sampled = announce(64).filter((id) => tails.take('ws', id, () => undefined) !== undefined);
    expect(sampled).toHaveLength(2);
    // Both sampled tails were taken: clients follow again, and so does the gateway.
    announce(8);
    expect(tails.size).toBe(8);
  });

  it('clear() lets every tail go', () => {
    const tails = new NewRunTails(hub, subject);
    tails.announced('ws', ['run_a', 'run_b']);
    tails.clear();
    expect(tails.size).toBe(0);
    expect(hub.fns.size).toBe(0);
  });
});
