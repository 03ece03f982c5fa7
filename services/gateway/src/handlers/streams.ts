import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Bus, Subscription } from '@dws/bus';
import type { Logger } from '@dws/log';
import { isServiceError, notFound, ServiceError } from '@dws/protocol';
import { callApi, counter, subjects, type ApiResponse, type Caller } from '@dws/runtime';
import { contextOf, endSpan, linkTo, runContext, SpanKind, tracer, type Span } from '@dws/telemetry';
import { isTerminalFrame, TimelineMerge, type Frame } from '../domain/timeline.js';
import { NEW_RUN_WAIT_MS } from './forward.js';
import { awaitNewRun } from './new-run.js';
import { announcedRunIds, NewRunTails, type NewRunTailOptions } from './new-run-tails.js';
import { RunTimelines, type RunTimelineOptions } from './run-timelines.js';
import { waitForRunEnd } from './run-wait.js';

const dec = new TextDecoder();

const runStreams = counter(
  'dws_gateway_run_streams_total',
  'Run streams opened, by how each began: tail (it followed its run since the POST /events that started it: no backlog read), memory (the frames this gateway holds for the run\'s open streams: no backlog read) or read (the backlog read from the scheduler).',
);

/** GET /runs/{id}/wait without `timeoutMs`. */
const DEFAULT_RUN_WAIT_MS = 30_000;

/** Runs of one POST /events followed at most (a batch may start hundreds, rarely each followed at once). */
const MAX_ANNOUNCED = 16;

/** Live tail of ingested events; ingest emits each recorded event here after commit. */
export const liveEventsSubject = subjects.workspaceEvents;

/** Run ids go into a bus subject: only plain tokens, so no wildcard or separator can slip in. */
const SUBJECT_TOKEN = /^[A-Za-z0-9_-]{1,200}$/;

export interface StreamOptions {
  /** Comment line sent on every open stream so proxies keep it open. @default 15000 */
  heartbeatMs?: number;
  /** A run stream with no live frame for this long rereads storage (a lost terminal frame must not hang it). @default 5000 */
  resyncMs?: number;
  /** How long a run stream waits for a run announced moments ago (POST /events answers before the scheduler stores it). @default 5000 */
  pendingRunWaitMs?: number;
  /** A client this far behind (bytes buffered) is cut off; it resumes with Last-Event-ID. @default 8 MiB */
  maxBufferedBytes?: number;
  /** Runs POST /events announced, followed for the stream that usually comes next (new-run-tails.ts). */
  newRunTails?: NewRunTailOptions;
  /** How long the stream of an announced run waits for its first frame before it reads the backlog. @default 50 */
  firstFrameWaitMs?: number;
  /** What is kept of a run's frames while it has streams open (run-timelines.ts). */
  runTimelines?: RunTimelineOptions;
}

/**
 * One bus subscription per subject however many clients listen: every SSE
 * client of a run shares it, and the last one to leave unsubscribes.
 */
export class LiveHub {
  private readonly topics = new Map<string, { sub: Subscription; fns: Set<(data: Uint8Array) => void> }>();

  constructor(
    private readonly bus: Bus,
    private readonly log: Logger,
  ) {}

  /** Start receiving at once (the subscription is in place when this returns); call the result to stop. */
  listen(subject: string, fn: (data: Uint8Array) => void): () => void {
    let topic = this.topics.get(subject);
    if (!topic) {
      const fns = new Set<(data: Uint8Array) => void>();
      const sub = this.bus.subscribe(subject, (data) => {
        for (const f of fns) {
          try {
            f(data);
          } catch (err) {
            this.log.warn({ err, subject }, 'live listener failed');
          }
        }
      });
      topic = { sub, fns };
      this.topics.set(subject, topic);
    }
    const t = topic;
    t.fns.add(fn);
    return () => {
      t.fns.delete(fn);
      if (t.fns.size === 0 && this.topics.get(subject) === t) {
        this.topics.delete(subject);
        t.sub.stop().catch((err: unknown) => this.log.warn({ err, subject }, 'live unsubscribe failed'));
      }
    };
  }

  get size(): number {
    return this.topics.size;
  }
}

/** One open text/event-stream response. */
class SseConnection {
  private closed = false;
  /** Frames of this event-loop turn, written together (one socket write per turn, not per frame). */
  private pending = '';
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly onClose: (() => void)[] = [];

  constructor(
    private readonly res: ServerResponse,
    private readonly maxBuffered: number,
  ) {
    res.on('close', () => this.teardown());
  }

  open(heartbeatMs: number): void {
    this.res.statusCode = 200;
    this.res.setHeader('content-type', 'text/event-stream; charset=utf-8');
    this.res.setHeader('cache-control', 'no-cache, no-transform');
    this.res.setHeader('connection', 'keep-alive');
    // nginx and friends: do not buffer the stream.
    this.res.setHeader('x-accel-buffering', 'no');
    this.res.socket?.setNoDelay(true);
    this.res.socket?.setTimeout(0);
    // A reconnecting client waits 1s, then resumes with Last-Event-ID. The headers leave with
    // this first write (no flushHeaders): one socket write instead of two per stream opened.
    this.write('retry: 1000\n\n');
    this.every(heartbeatMs, () => this.write(': ping\n\n'));
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** One frame; `data` is a JSON text without newlines. */
  send(event: string, data: string, id?: number): void {
    this.write(`${id !== undefined ? `id: ${id}\n` : ''}event: ${event}\ndata: ${data}\n\n`);
  }

  every(ms: number, fn: () => void): void {
    const t = setInterval(fn, ms);
    t.unref();
    this.timers.push(t);
  }

  whenClosed(fn: () => void): void {
    if (this.closed) fn();
    else this.onClose.push(fn);
  }

  /**
   * End the response cleanly: the client sees the end of the stream, not a
   * reset. `hangUp` also closes the connection (shutdown), so the server's
   * close does not wait for a keep-alive socket.
   */
  close(hangUp = false): void {
    if (this.closed) return;
    const socket = this.res.socket;
    // The last frames and the end of the stream in one write.
    const last = this.pending;
    this.pending = '';
    this.res.end(last);
    if (hangUp) socket?.end();
    this.teardown();
  }

  private write(chunk: string): void {
    if (this.closed) return;
    if (this.pending === '') setImmediate(this.flush);
    this.pending += chunk;
  }

  private readonly flush = (): void => {
    if (this.closed || this.pending === '') return;
    this.res.write(this.pending);
    this.pending = '';
    // A client that does not read is cut off rather than buffered without bound.
    if (this.res.writableLength > this.maxBuffered) this.close();
  };

  private teardown(): void {
    if (this.closed && this.onClose.length === 0) return;
    this.closed = true;
    for (const t of this.timers.splice(0)) clearInterval(t);
    for (const fn of this.onClose.splice(0)) fn();
  }
}

interface TimelinePage {
  status: string;
  terminal: boolean;
  more: boolean;
  frames: Frame[];
}

/**
 * The SSE endpoints: a run's timeline (lossless: subscribe first, then read
 * the backlog, merge on seq, reread storage on a gap), and the best-effort
 * workspace tails of run status and ingested events.
 */
export class Streams {
  private readonly open = new Set<SseConnection>();
  /** What ends each GET /runs/{id}/wait in progress early (drain answers them with the run as it is). */
  private readonly waits = new Set<() => void>();
  private draining = false;
  private readonly o: Required<Omit<StreamOptions, 'newRunTails' | 'runTimelines'>>;
  private readonly tails: NewRunTails;
  private readonly timelines: RunTimelines;

  constructor(
    private readonly d: { bus: Bus; hub: LiveHub; log: Logger },
    opts: StreamOptions = {},
  ) {
    this.o = {
      heartbeatMs: opts.heartbeatMs ?? 15_000,
      resyncMs: opts.resyncMs ?? 5_000,
      pendingRunWaitMs: opts.pendingRunWaitMs ?? 5_000,
      maxBufferedBytes: opts.maxBufferedBytes ?? 8 * 1024 * 1024,
      firstFrameWaitMs: opts.firstFrameWaitMs ?? 50,
    };
    this.timelines = new RunTimelines(d.hub, subjects.runTimeline, opts.runTimelines);
    this.tails = new NewRunTails(this.timelines, opts.newRunTails);
  }

  /** A 202 of POST /events (its JSON body) named the runs it started: follow them for the streams that usually come next. */
  announced(workspaceId: string, replyJson: string | undefined): void {
    if (!this.draining) this.tails.announced(workspaceId, announcedRunIds(replyJson, MAX_ANNOUNCED));
  }

  /** Open streams right now (for /metrics and tests). */
  get count(): number {
    return this.open.size;
  }

  /** SIGTERM: end every open stream cleanly; clients reconnect (to another replica) with Last-Event-ID. */
  drain(): void {
    this.draining = true;
    this.tails.clear();
    for (const c of [...this.open]) c.close(true);
    for (const stop of [...this.waits]) stop();
  }

  /**
   * GET /runs/{id}/wait (run-wait.ts): the run once it has ended, or as it is
   * after `timeoutMs` (or when this gateway drains). Undefined when `gone`
   * aborted (the client went) before the answer.
   */
  async runWait(caller: Caller, runId: string, timeoutMs = DEFAULT_RUN_WAIT_MS, gone?: AbortSignal): Promise<ApiResponse | undefined> {
    if (!SUBJECT_TOKEN.test(runId)) throw notFound('run');
    let stop!: () => void;
    const stopped = new Promise<void>((r) => (stop = r));
    this.waits.add(stop);
    if (this.draining) stop();
    gone?.addEventListener('abort', stop, { once: true });
    const announced = this.tails.take(caller.workspaceId, runId);
    try {
      return await waitForRunEnd(
        {
          runId,
          announced,
          follow: (fn) => this.timelines.follow(caller.workspaceId, runId, fn),
          read: () => callApi(this.d.bus, 'scheduler', 'runs.get', caller, { params: { id: runId }, query: {} }, 10_000),
          stop: stopped,
          gone: () => gone?.aborted ?? false,
        },
        timeoutMs,
        {
          firstFrameWaitMs: this.o.firstFrameWaitMs,
          newRunWaitMs: announced ? this.o.pendingRunWaitMs : NEW_RUN_WAIT_MS,
          resyncMs: this.o.resyncMs,
        },
      );
    } finally {
      this.waits.delete(stop);
      gone?.removeEventListener('abort', stop);
    }
  }

  async runStream(req: IncomingMessage, res: ServerResponse, caller: Caller, runId: string, from: number): Promise<void> {
    if (!SUBJECT_TOKEN.test(runId)) throw notFound('run');
    const start = Math.max(from, lastEventId(req));
    const merge = new TimelineMerge(start);
    const span = streamSpan(caller, runId, start);
    let sent = 0;
    let conn: SseConnection | undefined;
    let early: Frame[] = [];
    // Resolved by the first live frame: the run exists now (see firstPage).
    let stored!: () => void;
    const storedSignal = new Promise<void>((r) => (stored = r));
    let lastLive = Date.now();
    // Every step below runs in order on this chain, so storage reads and live frames never interleave.
    let chain: Promise<void> = Promise.resolve();
    const run = (fn: () => Promise<void> | void) => {
      chain = chain.then(fn).catch((err: unknown) => {
        this.d.log.warn({ err, runId, requestId: caller.requestId }, 'run stream step failed');
      });
    };

    const sendAll = (frames: Frame[]) => {
      sent += frames.length;
      for (const f of frames) conn!.send(f.kind, JSON.stringify(f), f.seq);
      if (merge.done) conn!.close();
    };
    /** Read storage after merge.last until it has nothing more; end when the run is terminal and all is sent. */
    const resync = async () => {
      for (let i = 0; i < 1000 && !conn!.isClosed; i++) {
        const page = await this.timeline(caller, runId, merge.last);
        this.timelines.stored(caller.workspaceId, runId, page.frames, page.more);
        sendAll(merge.stored(page.frames));
        if (conn!.isClosed) return;
        if (page.terminal && !page.more) return conn!.close();
        if (!page.more) return;
      }
    };

    const onFrame = (frame: Frame) => {
      lastLive = Date.now();
      if (!conn) {
        early.push(frame);
        stored();
        return;
      }
      run(async () => {
        if (conn!.isClosed) return;
        sendAll(merge.live(frame));
        if (merge.gap && !conn!.isClosed) await resync();
      });
    };

    // 1. Subscribe first: a frame committed after the backlog read below is then surely received.
    // A run this gateway just announced (new-run-tails.ts), or one with streams open here, is
    // followed already, and what was seen of it is known (run-timelines.ts).
    const followed = this.timelines.follow(caller.workspaceId, runId, onFrame);
    const unlisten = followed.stop;
    const announced = this.tails.take(caller.workspaceId, runId);

    // 2. The backlog, unless this gateway knows the run from its first frame (seq 1) on: it followed
    // the run before that went live, or read it, or another stream's read of it is in flight. A run
    // announced here whose beginning went live before the gateway listened gets it again with its next
    // frames (the scheduler sends a new run's first frames twice): wait a moment for those. A 404 here
    // is still an ordinary error answer (no SSE headers sent yet).
    if (announced && !followed.known()) await Promise.race([storedSignal, delay(this.o.firstFrameWaitMs)]);
    if (followed.heard()) stored();
    let first: TimelinePage;
    try {
      let known = followed.known();
      let began = known ? (announced ? 'tail' : 'memory') : 'read';
      const inFlight = known ? undefined : followed.pendingRead();
      if (inFlight) {
        await inFlight;
        known = followed.known();
        if (known) began = 'memory';
      }
      runStreams.inc({ began });
      span?.setAttribute('dws.stream.began', began);
      if (known) first = { status: '', terminal: known.some(isTerminalFrame), more: false, frames: known };
      else {
        // Into the run's memory before anyone waiting on this read looks at it.
        const read = this.firstPage(caller, runId, merge.last, () => storedSignal).then((page) => {
          this.timelines.stored(caller.workspaceId, runId, page.frames, page.more);
          return page;
        });
        if (merge.last === 0) followed.reading(read);
        first = await read;
      }
    } catch (err) {
      unlisten();
      endStreamSpan(span, isServiceError(err) && err.status < 500 ? 'refused' : 'failed', 0, err);
      throw err;
    }
    if (this.draining) {
      unlisten();
      endStreamSpan(span, 'drained', 0);
      throw shuttingDown();
    }

    // 3. Stream: backlog, then what arrived meanwhile, then live.
    conn = new SseConnection(res, this.o.maxBufferedBytes);
    const c = conn;
    this.open.add(c);
    c.whenClosed(() => {
      unlisten();
      this.open.delete(c);
      endStreamSpan(span, merge.done ? 'run_ended' : this.draining ? 'drained' : 'closed', sent);
    });
    c.open(this.o.heartbeatMs);
    run(async () => {
      sendAll(merge.stored(first.frames));
      for (const f of early) if (!c.isClosed) sendAll(merge.live(f));
      early = [];
      if (c.isClosed) return;
      if (first.terminal && !first.more) return c.close();
      if (first.more || merge.gap) await resync();
    });
    // A lost live frame (the bus tail is best-effort) must not stall the stream: reread storage when quiet.
    c.every(this.o.resyncMs, () => {
      if (Date.now() - lastLive >= this.o.resyncMs) run(resync);
    });
  }

  /** GET /runs/stream: run_status frames of the workspace, as the scheduler emits them (no seq, no replay). */
  runsStream(res: ServerResponse, caller: Caller): void {
    this.tail(res, subjects.workspaceRuns(caller.workspaceId), 'run_status');
  }

  /** GET /events/stream: events as ingest records them (best-effort; GET /events is the complete record). */
  eventsStream(res: ServerResponse, caller: Caller): void {
    this.tail(res, liveEventsSubject(caller.workspaceId), 'event');
  }

  private tail(res: ServerResponse, subject: string, event: string): void {
    const conn = new SseConnection(res, this.o.maxBufferedBytes);
    const unlisten = this.d.hub.listen(subject, (data) => {
      const text = dec.decode(data);
      // Frames are one JSON line; anything else would break the event framing.
      if (text.includes('\n')) return;
      conn.send(event, text);
    });
    this.open.add(conn);
    conn.whenClosed(() => {
      unlisten();
      this.open.delete(conn);
    });
    conn.open(this.o.heartbeatMs);
    if (this.draining) conn.close(true);
  }

  private async timeline(caller: Caller, runId: string, from: number): Promise<TimelinePage> {
    const reply = await callApi(this.d.bus, 'scheduler', 'runs.timeline', caller, { params: { id: runId }, query: { from, limit: 1000 } }, 10_000);
    return JSON.parse(reply.bodyJson ?? '{}') as TimelinePage;
  }

  /**
   * The first backlog page; a run announced moments ago may not be stored yet,
   * so wait for it: for its first live frame (the scheduler publishes the
   * frames it stores with a new run), or a slow re-read for runs stored without
   * one (queued under flow control).
   */
  private firstPage(caller: Caller, runId: string, from: number, stored: () => Promise<void>): Promise<TimelinePage> {
    return awaitNewRun(runId, () => this.timeline(caller, runId, from), { waitMs: this.o.pendingRunWaitMs, stop: () => this.draining, stored });
  }
}

const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

const shuttingDown = () => new ServiceError(503, 'shutting_down', 'This gateway is shutting down; reconnect.');

/** Last-Event-ID: the seq an EventSource saw last; it resumes after it. */
/**
 * Tracing on: a run stream is a span of the run's trace, under its root (a
 * client's following of the run shows beside its passes), linked to the
 * request's own trace when it came with a traceparent.
 */
function streamSpan(caller: Caller, runId: string, from: number): Span | undefined {
  return tracer()?.startSpan(
    'run.stream',
    {
      kind: SpanKind.SERVER,
      attributes: { 'dws.run.id': runId, 'dws.workspace.id': caller.workspaceId, 'dws.stream.from': from },
      links: linkTo(contextOf(caller.traceparent)),
    },
    runContext(runId),
  );
}

/** How the stream ended (`run_ended`: its end frame was sent; `closed`: the client or a slow socket went first), with the frames it sent. */
function endStreamSpan(span: Span | undefined, ended: 'run_ended' | 'closed' | 'drained' | 'refused' | 'failed', frames: number, err?: unknown): void {
  if (!span) return;
  span.setAttributes({ 'dws.stream.ended': ended, 'dws.stream.frames': frames });
  if (ended === 'failed') endSpan(span, err);
  else span.end();
}

function lastEventId(req: IncomingMessage): number {
  const v = req.headers['last-event-id'];
  if (typeof v !== 'string' || !/^\d{1,15}$/.test(v.trim())) return 0;
  return Number(v.trim());
}
