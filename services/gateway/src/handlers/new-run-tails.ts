import type { Frame } from '../domain/timeline.js';

/** The part of LiveHub a tail needs: one listener on one subject, and its removal. */
export interface Listen {
  listen(subject: string, fn: (data: Uint8Array) => void): () => void;
}

export interface NewRunTailOptions {
  /** How long a tail waits for its run's stream to take it over. @default 2000 */
  holdMs?: number;
  /** Tails held at once; announcements past it are not followed. @default 1000 */
  max?: number;
  /** Frames a tail keeps before its stream takes it (past it, the stream rereads storage). @default 64 */
  maxFrames?: number;
}

interface Tail {
  frames: Frame[];
  sink: ((frame: Frame) => void) | undefined;
  unlisten: () => void;
  timer: NodeJS.Timeout | undefined;
}

/** Below this share of tails taken over, most announcements are not followed... */
const FOLLOWED_SHARE_FLOOR = 0.1;
/** ...only one in this many, enough to notice when clients follow their runs again. */
const SAMPLE_EVERY = 32;
/** Weight of the latest tail in the moving share of tails taken over. */
const SHARE_WEIGHT = 0.05;

const dec = new TextDecoder();

/** A timeline frame off the bus, or undefined for anything else. */
export function parseFrame(data: Uint8Array): Frame | undefined {
  try {
    const f = JSON.parse(dec.decode(data)) as Frame;
    return f !== null && typeof f === 'object' && typeof f.kind === 'string' ? f : undefined;
  } catch {
    return undefined;
  }
}

/** The runs a POST /events reply announces (one result or a batch's `results`), at most `max`. */
export function announcedRunIds(bodyJson: string | undefined, max: number): string[] {
  // Most replies start no run (W5 one at a time): not parsed a second time for nothing.
  if (!bodyJson?.includes('"runId"')) return [];
  let body: unknown;
  try {
    body = JSON.parse(bodyJson);
  } catch {
    return [];
  }
  const results = body !== null && typeof body === 'object' && Array.isArray((body as { results?: unknown }).results) ? (body as { results: unknown[] }).results : [body];
  const out: string[] = [];
  for (const r of results) {
    const triggered = r !== null && typeof r === 'object' ? (r as { triggered?: unknown }).triggered : undefined;
    if (!Array.isArray(triggered)) continue;
    for (const t of triggered) {
      const id = t !== null && typeof t === 'object' ? (t as { runId?: unknown }).runId : undefined;
      if (typeof id === 'string' && id !== '') out.push(id);
      if (out.length >= max) return out;
    }
  }
  return out;
}

/**
 * Live tails of the runs a POST /events reply just announced, held a moment
 * for the run stream a client usually opens next (W1: POST, then follow the
 * run). A stream that takes a tail over and finds the run's first frame
 * (seq 1) in it needs no backlog read: the tail was listening before
 * anything of the run went live, so it has every frame since, or sees a gap
 * and rereads storage as any stream does. That read is a request to the
 * scheduler and a statement there, on the path of every run a client follows.
 *
 * A tail nobody takes costs a subscription and its frames for `holdMs`; when
 * few are taken (clients that start runs without following them) only one
 * announcement in SAMPLE_EVERY is followed.
 */
export class NewRunTails {
  private readonly tails = new Map<string, Tail>();
  private readonly o: Required<NewRunTailOptions>;
  private takenShare = 1;
  private passedOver = 0;

  constructor(
    private readonly hub: Listen,
    private readonly subjectOf: (workspaceId: string, runId: string) => string,
    opts: NewRunTailOptions = {},
  ) {
    this.o = { holdMs: opts.holdMs ?? 2000, max: opts.max ?? 1000, maxFrames: opts.maxFrames ?? 64 };
  }

  /** Follow runs this workspace's POST /events just started. */
  announced(workspaceId: string, runIds: string[]): void {
    for (const runId of runIds) {
      const key = `${workspaceId}/${runId}`;
      if (this.tails.size >= this.o.max) return;
      if (this.tails.has(key)) continue;
      if (this.takenShare < FOLLOWED_SHARE_FLOOR && ++this.passedOver % SAMPLE_EVERY !== 0) continue;
      const tail: Tail = { frames: [], sink: undefined, unlisten: () => undefined, timer: undefined };
      tail.unlisten = this.hub.listen(this.subjectOf(workspaceId, runId), (data) => {
        const frame = parseFrame(data);
        if (!frame) return;
        if (tail.sink) tail.sink(frame);
        else if (tail.frames.length < this.o.maxFrames) tail.frames.push(frame);
      });
      tail.timer = setTimeout(() => {
        this.tails.delete(key);
        tail.unlisten();
        this.settled(false);
      }, this.o.holdMs);
      tail.timer.unref();
      this.tails.set(key, tail);
    }
  }

  /**
   * The stream of an announced run takes its tail over: the frames so far,
   * and every later one goes to `sink`; undefined when no tail is held.
   */
  take(workspaceId: string, runId: string, sink: (frame: Frame) => void): { frames: Frame[]; unlisten: () => void } | undefined {
    const key = `${workspaceId}/${runId}`;
    const tail = this.tails.get(key);
    if (!tail) return undefined;
    this.tails.delete(key);
    clearTimeout(tail.timer);
    tail.sink = sink;
    this.settled(true);
    return { frames: tail.frames.splice(0), unlisten: tail.unlisten };
  }

  /** Let every tail go (shutdown). */
  clear(): void {
    for (const tail of this.tails.values()) {
      clearTimeout(tail.timer);
      tail.unlisten();
    }
    this.tails.clear();
  }

  get size(): number {
    return this.tails.size;
  }

  private settled(taken: boolean): void {
    this.takenShare = this.takenShare * (1 - SHARE_WEIGHT) + (taken ? SHARE_WEIGHT : 0);
  }
}
