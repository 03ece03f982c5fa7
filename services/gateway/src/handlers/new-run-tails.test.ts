import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { announcedRunIds, NewRunTails } from './new-run-tails.js';
import { RunTimelines } from './run-timelines.js';
import { FakeSubjects } from './subjects.fake.js';

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
  let hub: FakeSubjects;
  let timelines: RunTimelines;
  beforeEach(() => {
    jest.useFakeTimers();
    hub = new FakeSubjects();
    timelines = new RunTimelines(hub, subject);
  });
  afterEach(() => {
    jest.useRealTimers();
  });
  const known = (ws: string, run: string) => {
    const f = timelines.follow(ws, run, () => undefined);
    const seqs = f.known()?.map((x) => x.seq);
    f.stop();
    return seqs;
  };

  it('follows an announced run from before its first frame, so its stream knows every frame', () => {
    const tails = new NewRunTails(timelines);
    tails.announced('ws', ['run_a']);
    hub.emit(subject('ws', 'run_a'), frame(1));
    hub.emit(subject('ws', 'run_a'), frame(2));
    const stream = timelines.follow('ws', 'run_a', () => undefined);
    expect(tails.take('ws', 'run_a')).toBe(true);
    expect(stream.known()?.map((f) => f.seq)).toEqual([1, 2]);
    // Taken once; the run stays followed by its stream alone.
    expect(tails.take('ws', 'run_a')).toBe(false);
    expect(tails.size).toBe(0);
    expect(hub.fns.size).toBe(1);
    stream.stop();
    expect(hub.fns.size).toBe(0);
  });

  it('is taken only by the workspace that announced the run', () => {
    const tails = new NewRunTails(timelines);
    tails.announced('ws', ['run_a']);
    expect(tails.take('ws_other', 'run_a')).toBe(false);
    expect(tails.take('ws', 'run_a')).toBe(true);
  });

  it('lets a tail nobody takes go after holdMs, and holds at most max tails', () => {
    const tails = new NewRunTails(timelines, { holdMs: 100, max: 2 });
    tails.announced('ws', ['run_a', 'run_b', 'run_c']);
    expect(tails.size).toBe(2);
    hub.emit(subject('ws', 'run_a'), frame(1));
    expect(known('ws', 'run_a')).toEqual([1]);
    expect(known('ws', 'run_c')).toBeUndefined();
    jest.advanceTimersByTime(100);
    expect(tails.size).toBe(0);
    expect(hub.fns.size).toBe(0);
    expect(tails.take('ws', 'run_b')).toBe(false);
    expect(known('ws', 'run_a')).toBeUndefined();
  });

  it('follows one announcement in 32 once few tails are taken, and all again once they are', () => {
    const tails = new NewRunTails(timelines, { holdMs: 10 });
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
    const sampled = announce(64).filter((id) => tails.take('ws', id));
    expect(sampled).toHaveLength(2);
    // Both sampled tails were taken: clients follow again, and so does the gateway.
    announce(8);
    expect(tails.size).toBe(8);
  });

  it('clear() lets every tail go', () => {
    const tails = new NewRunTails(timelines);
    tails.announced('ws', ['run_a', 'run_b']);
    tails.clear();
    expect(tails.size).toBe(0);
    expect(hub.fns.size).toBe(0);
  });
});
