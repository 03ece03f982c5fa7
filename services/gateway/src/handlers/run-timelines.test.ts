import { describe, expect, it } from '@jest/globals';
import { RunTimelines } from './run-timelines.js';
import { FakeSubjects as Subjects } from './subjects.fake.js';

const subject = (ws: string, run: string) => `tl.${ws}.${run}`;
const frame = (seq: number, status = 'running') => ({ kind: 'run_status', seq, status });
const seqs = (frames: { seq: number }[] | undefined) => frames?.map((f) => f.seq);

describe('RunTimelines', () => {
  it("knows nothing of a run until a read gives its beginning; then the read's frames and every live one since", () => {
    const hub = new Subjects();
    const tl = new RunTimelines(hub, subject);
    const live: unknown[] = [];
    const a = tl.follow('ws', 'run_a', (f) => live.push(f));
    expect(a.known()).toBeUndefined();
    // Live before the read came back: held until the beginning is known.
    hub.emit(subject('ws', 'run_a'), frame(3));
    hub.emit(subject('ws', 'run_a'), 'not a frame');
    expect(live).toEqual([frame(3)]);
    expect(tl.follow('ws', 'run_a', () => undefined).known()).toBeUndefined();
    tl.stored('ws', 'run_a', [frame(1), frame(2)], false);
    hub.emit(subject('ws', 'run_a'), frame(4));
    expect(seqs(tl.follow('ws', 'run_a', () => undefined).known())).toEqual([1, 2, 3, 4]);
  });

  it('tells whether a frame was heard, and hands a read from the beginning in flight to the streams that come meanwhile', async () => {
    const hub = new Subjects();
    const tl = new RunTimelines(hub, subject);
    const a = tl.follow('ws', 'run_a', () => undefined);
    expect(a.heard()).toBe(false);
    expect(a.pendingRead()).toBeUndefined();
    let answer!: (frames: { kind: string; seq: number }[]) => void;
    const read = new Promise<{ kind: string; seq: number }[]>((r) => (answer = r)).then((frames) => tl.stored('ws', 'run_a', frames, false));
    a.reading(read);
    hub.emit(subject('ws', 'run_a'), frame(2));
    const b = tl.follow('ws', 'run_a', () => undefined);
    expect(b.heard()).toBe(true);
    const pending = b.pendingRead();
    expect(pending).toBeDefined();
    answer([frame(1)]);
    await pending;
    expect(seqs(b.known())).toEqual([1, 2]);
    expect(b.pendingRead()).toBeUndefined();
    // A failed read leaves nothing pending either.
    const c = tl.follow('ws', 'run_c', () => undefined);
    c.reading(Promise.reject(new Error('no such run')));
    await c.pendingRead();
    expect(c.pendingRead()).toBeUndefined();
  });

  it('a read that starts mid-run (a stream resuming with from) does not make the beginning known', () => {
    const tl = new RunTimelines(new Subjects(), subject);
    tl.follow('ws', 'run_a', () => undefined);
    tl.stored('ws', 'run_a', [frame(5), frame(6)], false);
    expect(tl.follow('ws', 'run_a', () => undefined).known()).toBeUndefined();
  });

  it('knows nothing at a gap (a frame lost on the bus) until a read fills it', () => {
    const hub = new Subjects();
    const tl = new RunTimelines(hub, subject);
    tl.follow('ws', 'run_a', () => undefined);
    tl.stored('ws', 'run_a', [frame(1)], false);
    hub.emit(subject('ws', 'run_a'), frame(3));
    // 3 came live before this follower, and 2 is missing: it must read.
    expect(tl.follow('ws', 'run_a', () => undefined).known()).toBeUndefined();
    tl.stored('ws', 'run_a', [frame(2), frame(3)], false);
    expect(seqs(tl.follow('ws', 'run_a', () => undefined).known())).toEqual([1, 2, 3]);
  });

  it('knows nothing while storage has pages its streams have not read yet', () => {
    const tl = new RunTimelines(new Subjects(), subject);
    tl.follow('ws', 'run_a', () => undefined);
    tl.stored('ws', 'run_a', [frame(1), frame(2)], true);
    expect(tl.follow('ws', 'run_a', () => undefined).known()).toBeUndefined();
    tl.stored('ws', 'run_a', [frame(3)], false);
    expect(seqs(tl.follow('ws', 'run_a', () => undefined).known())).toEqual([1, 2, 3]);
  });

  it('keeps runs apart by workspace, and lets a run go with its last stream', () => {
    const hub = new Subjects();
    const tl = new RunTimelines(hub, subject);
    const a = tl.follow('ws', 'run_a', () => undefined);
    tl.stored('ws', 'run_a', [frame(1)], false);
    const other = tl.follow('ws_other', 'run_a', () => undefined);
    expect(other.known()).toBeUndefined();
    const b = tl.follow('ws', 'run_a', () => undefined);
    expect(seqs(b.known())).toEqual([1]);
    a.stop();
    b.stop();
    other.stop();
    expect(tl.size).toBe(0);
    expect(hub.fns.size).toBe(0);
    // Followed again from nothing: what was known went with it.
    expect(tl.follow('ws', 'run_a', () => undefined).known()).toBeUndefined();
  });

  it('past maxFrames, or with too many live frames before the beginning is known, keeps nothing more', () => {
    const hub = new Subjects();
    const tl = new RunTimelines(hub, subject, { maxFrames: 3 });
    tl.follow('ws', 'run_a', () => undefined);
    tl.stored('ws', 'run_a', [frame(1), frame(2), frame(3)], false);
    expect(seqs(tl.follow('ws', 'run_a', () => undefined).known())).toEqual([1, 2, 3]);
    hub.emit(subject('ws', 'run_a'), frame(4));
    expect(tl.follow('ws', 'run_a', () => undefined).known()).toBeUndefined();
    hub.emit(subject('ws', 'run_a'), frame(5));
    tl.stored('ws', 'run_a', [frame(6)], false);
    expect(tl.follow('ws', 'run_a', () => undefined).known()).toBeUndefined();

    const live: number[] = [];
    tl.follow('ws', 'run_b', (f) => live.push(f.seq));
    for (let seq = 2; seq <= 6; seq++) hub.emit(subject('ws', 'run_b'), frame(seq));
    tl.stored('ws', 'run_b', [frame(1)], false);
    expect(tl.follow('ws', 'run_b', () => undefined).known()).toBeUndefined();
    // Streams still get every live frame.
    expect(live).toEqual([2, 3, 4, 5, 6]);
  });
});
