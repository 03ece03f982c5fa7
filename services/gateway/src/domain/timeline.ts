/** A timeline frame as stored and as sent: kind, a gap-free per-run seq, then the kind's fields. */
export interface Frame {
  kind: string;
  seq: number;
  [field: string]: unknown;
}

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);

/** succeeded, failed or cancelled: the run has ended. */
export const isTerminalStatus = (status: unknown): boolean => TERMINAL.has(status as string);

/** A run_status frame with a terminal status: the last frame a run stream sends. */
export const isTerminalFrame = (f: Frame): boolean => f.kind === 'run_status' && isTerminalStatus(f.status);

/**
 * Merges the stored backlog of a run with its live frames into one ordered,
 * duplicate-free sequence (DESIGN "Lossless SSE"). Frames are released only
 * in seq order starting after `last`; live frames that run ahead are held;
 * a held frame beyond the next expected seq means a frame was lost on the
 * ephemeral bus (or is late), and the caller refetches from storage, which
 * holds every frame before any live one is published. Pure: no I/O.
 */
export class TimelineMerge {
  private readonly held = new Map<number, Frame>();
  private ended = false;

  /** @param last the highest seq the client already has (`from`, or Last-Event-ID). */
  constructor(private lastSeq: number) {}

  get last(): number {
    return this.lastSeq;
  }

  /** True once a terminal run_status frame was released. */
  get done(): boolean {
    return this.ended;
  }

  /** True when held live frames wait for a seq that only storage can supply. */
  get gap(): boolean {
    return this.held.size > 0 && !this.held.has(this.lastSeq + 1);
  }

  /** Frames read from storage (ascending seq): returns those to send, in order. */
  stored(frames: Frame[]): Frame[] {
    const out: Frame[] = [];
    for (const f of frames) this.accept(f, out);
    this.drain(out);
    return out;
  }

  /** One live frame: returns what is now sendable (possibly nothing while it is held). */
  live(frame: Frame): Frame[] {
    const out: Frame[] = [];
    if (this.ended || !Number.isSafeInteger(frame.seq) || frame.seq <= this.lastSeq) return out;
    // Bound what a stalled stream holds: past the limit, storage is the better source anyway.
    if (this.held.size < 10_000) this.held.set(frame.seq, frame);
    this.drain(out);
    return out;
  }

  private accept(f: Frame, out: Frame[]): void {
    if (this.ended || f.seq !== this.lastSeq + 1) return;
    out.push(f);
    this.lastSeq = f.seq;
    this.held.delete(f.seq);
    if (isTerminalFrame(f)) this.ended = true;
  }

  private drain(out: Frame[]): void {
    for (const seq of [...this.held.keys()]) if (seq <= this.lastSeq) this.held.delete(seq);
    for (let next = this.held.get(this.lastSeq + 1); next && !this.ended; next = this.held.get(this.lastSeq + 1)) this.accept(next, out);
  }
}

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

/**
 * The creation time embedded in a time-ordered id (`run_<ulid>`), or
 * undefined. Lets the run stream wait briefly for a run that POST /events
 * just announced but the scheduler has not stored yet.
 */
export function idTimeMs(id: string): number | undefined {
  const m = /^[a-z]+_([0-9a-hjkmnp-tv-z]{10})[0-9a-hjkmnp-tv-z]{16}$/i.exec(id);
  if (!m) return undefined;
  let t = 0;
  for (const c of m[1]!.toLowerCase()) t = t * 32 + CROCKFORD.indexOf(c);
  return t;
}
