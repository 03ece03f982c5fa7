import type { Frame } from '../domain/timeline.js';

export interface NewRunTailOptions {
  /** How long a tail waits for its run's stream to take it over. @default 2000 */
  holdMs?: number;
  /** Tails held at once; announcements past it are not followed. @default 1000 */
  max?: number;
}

/** The part of RunTimelines a tail needs: follow a run (and stop). */
export interface Follow {
  follow(workspaceId: string, runId: string, fn: (frame: Frame) => void): { stop(): void };
}

interface Tail {
  stop: () => void;
  timer: NodeJS.Timeout | undefined;
}

/** Below this share of tails taken over, most announcements are not followed... */
const FOLLOWED_SHARE_FLOOR = 0.1;
/** ...only one in this many, enough to notice when clients follow their runs again. */
const SAMPLE_EVERY = 32;
/** Weight of the latest tail in the moving share of tails taken over. */
const SHARE_WEIGHT = 0.05;

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
 * The runs a POST /events reply just announced, followed a moment for the
 * run stream a client usually opens next (W1: POST, then follow the run).
 * Following starts the run's memory (run-timelines.ts) before anything of
 * the run goes live, in most cases: then it holds the run's first frame
 * (seq 1) when the stream comes, and the stream needs no backlog read (a
 * request to the scheduler and a statement there, on the path of every run
 * a client follows); otherwise the stream reads as any stream does.
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
    private readonly timelines: Follow,
    opts: NewRunTailOptions = {},
  ) {
    this.o = { holdMs: opts.holdMs ?? 2000, max: opts.max ?? 1000 };
  }

  /** Follow runs this workspace's POST /events just started. */
  announced(workspaceId: string, runIds: string[]): void {
    for (const runId of runIds) {
      const key = `${workspaceId}/${runId}`;
      if (this.tails.size >= this.o.max) return;
      if (this.tails.has(key)) continue;
      if (this.takenShare < FOLLOWED_SHARE_FLOOR && ++this.passedOver % SAMPLE_EVERY !== 0) continue;
      const tail: Tail = { stop: this.timelines.follow(workspaceId, runId, () => undefined).stop, timer: undefined };
      tail.timer = setTimeout(() => {
        this.tails.delete(key);
        tail.stop();
        this.settled(false);
      }, this.o.holdMs);
      tail.timer.unref();
      this.tails.set(key, tail);
    }
  }

  /**
   * The stream of an announced run follows it now (call after its own
   * follow, so the run's memory lives on): the tail lets go. True when the
   * run was announced here and still followed.
   */
  take(workspaceId: string, runId: string): boolean {
    const key = `${workspaceId}/${runId}`;
    const tail = this.tails.get(key);
    if (!tail) return false;
    this.tails.delete(key);
    clearTimeout(tail.timer);
    tail.stop();
    this.settled(true);
    return true;
  }

  /** Let every tail go (shutdown). */
  clear(): void {
    for (const tail of this.tails.values()) {
      clearTimeout(tail.timer);
      tail.stop();
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
