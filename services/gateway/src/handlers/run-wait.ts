import type { ServerResponse } from 'node:http';
import type { ApiResponse } from '@dws/runtime';
import { isTerminalFrame, isTerminalStatus, type Frame } from '../domain/timeline.js';
import { awaitNewRun } from './new-run.js';
import type { Followed } from './run-timelines.js';

export interface RunWaitDeps {
  runId: string;
  /** Follow the run's live frames (run-timelines.ts): shared with its streams and the tail its 202 started. */
  follow(fn: (frame: Frame) => void): Followed;
  /** POST /events announced the run moments ago on this gateway (its tail is taken over). */
  announced: boolean;
  /** GET /runs/{id} from the scheduler. */
  read(): Promise<ApiResponse>;
  /** Settles when the gateway drains or the client goes: answer (or give up) now. */
  stop: Promise<void>;
  /** The client went: nobody to answer. */
  gone(): boolean;
}

export interface RunWaitOptions {
  /** A run announced here waits this long for its first live frame before it is read. */
  firstFrameWaitMs: number;
  /** How long a read of a run announced moments ago waits for its StartRun before the 404. */
  newRunWaitMs: number;
  /** With no end frame heard, the run is read again this often (the live tail is best-effort). */
  resyncMs: number;
}

/**
 * GET /runs/{id}/wait: the run once it has ended, or as it is after
 * `timeoutMs`. The end comes off the run's live frames (the subscription is
 * in place before any read, so an end committed after the read is heard),
 * then one read for the run with its result; a run this gateway has followed
 * from its first frame (the usual case right after its POST /events) is not
 * read before that. A quiet run is read every `resyncMs` in case its end
 * frame was lost. Undefined when the client went before the answer.
 */
export async function waitForRunEnd(d: RunWaitDeps, timeoutMs: number, o: RunWaitOptions): Promise<ApiResponse | undefined> {
  const deadline = Date.now() + timeoutMs;
  let stopped = false;
  void d.stop.then(() => (stopped = true));
  let heardEnd!: () => void;
  const ended = new Promise<void>((r) => (heardEnd = r));
  let firstFrame!: () => void;
  const stored = new Promise<void>((r) => (firstFrame = r));
  const followed = d.follow((frame) => {
    firstFrame();
    if (isTerminalFrame(frame)) heardEnd();
  });
  try {
    if (d.announced && !followed.known()) await race(stored, delay(o.firstFrameWaitMs), d.stop);
    if (followed.heard()) firstFrame();
    const known = followed.known();
    // Known from seq 1 and not ended: nothing to read until it ends.
    if (!known || known.some(isTerminalFrame)) {
      const first = await awaitNewRun(d.runId, d.read, { waitMs: o.newRunWaitMs, stored: () => stored });
      if (d.gone()) return undefined;
      if (isEnded(first) || Date.now() >= deadline) return first;
    }
    let endFrame = ended;
    for (;;) {
      await race(endFrame, delay(Math.min(o.resyncMs, deadline - Date.now())), d.stop);
      if (d.gone()) return undefined;
      const now = await d.read();
      if (d.gone()) return undefined;
      if (isEnded(now) || stopped || Date.now() >= deadline) return now;
      // Heard an end that storage does not show (cannot happen: frames go live after their commit): no busy loop of reads.
      endFrame = new Promise<void>(() => undefined);
    }
  } finally {
    followed.stop();
  }
}

/** The read names a run that has ended. */
function isEnded(res: ApiResponse): boolean {
  if (res.bodyJson === undefined) return true;
  return isTerminalStatus((JSON.parse(res.bodyJson) as { status?: unknown } | null)?.status);
}

const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)).unref());
const race = (...ps: Promise<void>[]) => Promise.race(ps);

/** Aborted when the response closes: before the answer, that is the client going away. */
export function closeSignal(res: ServerResponse): AbortSignal {
  const ac = new AbortController();
  res.once('close', () => ac.abort());
  return ac.signal;
}
