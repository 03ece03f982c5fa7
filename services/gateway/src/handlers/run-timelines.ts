import { TimelineMerge, type Frame } from '../domain/timeline.js';

/** The part of LiveHub a run's followers need: one listener on one subject, and its removal. */
export interface Listen {
  listen(subject: string, fn: (data: Uint8Array) => void): () => void;
}

const dec = new TextDecoder();

/** A timeline frame off the bus, or undefined for anything else. */
function parseFrame(data: Uint8Array): Frame | undefined {
  try {
    const f = JSON.parse(dec.decode(data)) as Frame;
    return f !== null && typeof f === 'object' && typeof f.kind === 'string' ? f : undefined;
  } catch {
    return undefined;
  }
}

export interface RunTimelineOptions {
  /** Frames one run's memory keeps; past it, its later streams read storage as the first one did. @default 2000 */
  maxFrames?: number;
}

interface Topic {
  /** Released in order from seq 1: `frames` holds every frame up to `merge.last`. Undefined once past maxFrames. */
  merge: TimelineMerge | undefined;
  frames: Frame[];
  /** Live frames taken before seq 1 was known (held by the merge until a read supplies the beginning). */
  early: number;
  heard: boolean;
  /** The last seq of a storage page that said more follows: the memory is behind storage until past it. */
  pagedTo: number;
  /** A stream's read of the run from its beginning, in flight: what knows the beginning next. */
  reading: Promise<unknown> | undefined;
  fns: Set<(frame: Frame) => void>;
  unlisten: () => void;
}

/** A run followed (RunTimelines.follow). */
export interface Followed {
  /**
   * The run's frames from seq 1 up to the last one this gateway knows, or
   * undefined while it does not know them all: not its beginning, a frame
   * lost on the bus (a later one arrived first), or pages of storage still
   * to read. Frames past it reach the follower's callback; so may some before
   * it (they were live): the follower dedupes on seq.
   */
  known(): Frame[] | undefined;
  /** A live frame of the run has arrived since it was first followed here: the run is stored. */
  heard(): boolean;
  /** Settles when the read of the run from its beginning that another stream has in flight does. */
  pendingRead(): Promise<unknown> | undefined;
  /** This stream reads the run from its beginning: later streams may wait for it instead of reading too. */
  reading(read: Promise<unknown>): void;
  stop(): void;
}

/**
 * The run streams of one run on this gateway share one bus subscription,
 * one parse of each live frame, and a memory of the run's frames: the
 * frames storage gave its streams' backlog reads, then every live frame
 * since. A stream opened while the run has streams open starts from that
 * memory instead of a backlog read of its own (1,000 clients on 200 runs
 * made 822 reads from the scheduler at once: W7). The memory is sound
 * because the subscription was in place before the read that began it:
 * every later frame arrived live, or is a gap that the streams' own
 * gap handling rereads (and hands back here). Kept while a stream of the
 * run is open.
 */
export class RunTimelines {
  private readonly topics = new Map<string, Topic>();
  private readonly maxFrames: number;

  constructor(
    private readonly hub: Listen,
    private readonly subjectOf: (workspaceId: string, runId: string) => string,
    opts: RunTimelineOptions = {},
  ) {
    this.maxFrames = opts.maxFrames ?? 2000;
  }

  /** Follow a run: `fn` gets each live frame as it arrives (in arrival order, as the bus delivers); see Followed. */
  follow(workspaceId: string, runId: string, fn: (frame: Frame) => void): Followed {
    const subject = this.subjectOf(workspaceId, runId);
    let topic = this.topics.get(subject);
    if (!topic) {
      const t: Topic = { merge: new TimelineMerge(0), frames: [], early: 0, heard: false, pagedTo: 0, reading: undefined, fns: new Set(), unlisten: () => undefined };
      t.unlisten = this.hub.listen(subject, (data) => {
        const frame = parseFrame(data);
        if (!frame) return;
        t.heard = true;
        if (t.merge?.last === 0) t.early++;
        this.keep(t, t.merge?.live(frame));
        for (const f of t.fns) f(frame);
      });
      this.topics.set(subject, t);
      topic = t;
    }
    const t = topic;
    t.fns.add(fn);
    return {
      known: () => (t.merge && t.merge.last > t.pagedTo && !t.merge.gap ? t.frames.slice() : undefined),
      heard: () => t.heard,
      pendingRead: () => t.reading,
      reading: (read) => {
        if (t.reading) return;
        const settled = () => {
          if (t.reading === p) t.reading = undefined;
        };
        const p: Promise<unknown> = read.then(settled, settled);
        t.reading = p;
      },
      stop: () => {
        t.fns.delete(fn);
        if (t.fns.size === 0 && this.topics.get(subject) === t) {
          this.topics.delete(subject);
          t.unlisten();
        }
      },
    };
  }

  /** A page a stream of this run read from storage (ascending seq; `more` when storage holds frames past it): it fills the run's memory. */
  stored(workspaceId: string, runId: string, frames: Frame[], more: boolean): void {
    const t = this.topics.get(this.subjectOf(workspaceId, runId));
    if (!t) return;
    if (more && frames.length > 0) t.pagedTo = Math.max(t.pagedTo, frames[frames.length - 1]!.seq);
    this.keep(t, t.merge?.stored(frames));
  }

  /** Runs followed right now (for tests). */
  get size(): number {
    return this.topics.size;
  }

  private keep(t: Topic, released: Frame[] | undefined): void {
    if (!released) return;
    t.frames.push(...released);
    // Bounded: a long run, or one whose beginning no read supplies (streams resuming mid-run), stops being kept.
    if (t.frames.length > this.maxFrames || t.early > this.maxFrames) {
      t.merge = undefined;
      t.frames = [];
    }
  }
}
