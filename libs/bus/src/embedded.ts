/**
 * The embedded Bus adapter: the JetStream semantics of the Bus port inside one
 * process, for `pnpm dev`. With an EmbeddedBusStore every publish is written
 * before it resolves and every ack after the handler, so a kill -9 loses
 * nothing that was acknowledged to a publisher.
 */
import { Durable, Stream, type DurableHost } from './embedded-stream.js';
import type { EmbeddedBusStore, StoredMessage } from './embedded-store.js';
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  DLQ_HEADERS,
  DLQ_STREAM,
  DLQ_SUBJECTS,
  checkAppHeaders,
  checkIdleTimeout,
  errorMessage,
  errorPayload,
  resolveConsumer,
  resolveStream,
  type BusLogger,
  trackSubscription,
} from './policy.js';
import { assertValidSubject, subjectMatches, subjectsOverlap } from './subjects.js';
import {
  BusError,
  type Bus,
  type ConsumerBacklog,
  type ConsumerSpec,
  type EventHandler,
  type MessageHandler,
  type PublishOptions,
  type RequestHandler,
  type RequestOptions,
  type StreamSpec,
  type Subscription,
} from './types.js';

export type { EmbeddedBusStore, StoredBusState, StoredMessage } from './embedded-store.js';

export interface EmbeddedBusOptions {
  /** Persistence (e.g. createSqlBusStore over PGlite). @default none: everything in memory */
  store?: EmbeddedBusStore;
  /** Receives handler-independent failures (store writes, dead-lettering, subscriber throws). @default silent */
  log?: BusLogger;
  /** How often messages acked by every durable (or past max age) are dropped. @default 10000 */
  pruneIntervalMs?: number;
}

/**
 * Start an in-process Bus. With `opts.store`, reloads streams, durables and
 * unacked messages, which each durable gets again once it is consumed.
 */
export async function createEmbeddedBus(opts: EmbeddedBusOptions = {}): Promise<Bus> {
  const bus = new EmbeddedBus(opts.store, opts.log ?? { warn: () => undefined });
  if (opts.store) bus.restore(await opts.store.load());
  bus.startPruning(opts.pruneIntervalMs ?? 10_000);
  return bus;
}

interface Responder {
  readonly pattern: string;
  readonly queue: string;
  readonly handler: RequestHandler;
  readonly inflight: Set<Promise<void>>;
  stopped: boolean;
}

interface Subscriber {
  readonly pattern: string;
  readonly handler: EventHandler;
  stopped: boolean;
}

class EmbeddedBus implements Bus, DurableHost {
  readonly kind = 'embedded' as const;
  closed = false;
  private closing: Promise<void> | undefined;
  private readonly streams = new Map<string, Stream>();
  private readonly subs = new Set<Subscription>();
  private readonly responders: Responder[] = [];
  private readonly subscribers: Subscriber[] = [];
  /** Round-robin position per queue group (keyed by pattern and group). */
  private readonly rr = new Map<string, number>();
  private pruneTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly store: EmbeddedBusStore | undefined,
    readonly log: BusLogger,
  ) {}

  restore(state: Awaited<ReturnType<EmbeddedBusStore['load']>>): void {
    const now = Date.now();
    for (const s of state.streams) this.streams.set(s.spec.name, new Stream(s.spec, s.prunedThrough));
    const msgs = [...state.messages].sort((a, b) => a.seq - b.seq);
    for (const m of msgs) {
      const st = this.streams.get(m.stream);
      if (!st) continue;
      st.log.push(m);
      if (m.seq > st.lastSeq) st.lastSeq = m.seq;
      if (m.msgId !== undefined && now - m.ts < st.spec.duplicateWindowMs) st.dedupe.set(m.msgId, m.ts);
    }
    for (const d of state.durables) {
      const st = this.streams.get(d.stream);
      if (!st) continue;
      // Real settings arrive with the first consume(); until then only the filter matters (pruning).
      const cfg = resolveConsumer({ stream: d.stream, durable: d.durable, filterSubject: d.filterSubject });
      st.durables.set(d.durable, new Durable(this, st, d.durable, cfg));
    }
    for (const a of state.acks) {
      const st = this.streams.get(a.stream);
      if (st?.get(a.seq)) st.durables.get(a.durable)?.acked.add(a.seq);
    }
  }

  startPruning(everyMs: number): void {
    this.pruneTimer = setInterval(() => this.prune(), everyMs);
    this.pruneTimer.unref();
  }

  async ensureStream(spec: StreamSpec): Promise<void> {
    this.assertOpen();
    const resolved = resolveStream(spec);
    if (!/^[A-Za-z0-9_-]+$/.test(resolved.name)) throw new Error(`invalid stream name '${resolved.name}'`);
    for (const s of resolved.subjects) assertValidSubject(s, true);
    for (const other of this.streams.values()) {
      if (other.spec.name === resolved.name) continue;
      const clash = resolved.subjects.some((a) => other.spec.subjects.some((b) => subjectsOverlap(a, b)));
      if (clash) throw new Error(`stream ${resolved.name}: subjects overlap with stream ${other.spec.name}`);
    }
    const st = this.streams.get(resolved.name);
    if (st) st.spec = resolved;
    else this.streams.set(resolved.name, new Stream(resolved, 0));
    await this.store?.saveStream(resolved);
  }

  async publish(subject: string, data: Uint8Array, opts?: PublishOptions): Promise<void> {
    this.assertOpen();
    assertValidSubject(subject, false);
    // Copy: the stored message must not change if the caller reuses its buffer.
    await this.append(subject, data.slice(), opts?.msgId, undefined);
  }

  async consume(spec: ConsumerSpec, handler: MessageHandler): Promise<Subscription> {
    this.assertOpen();
    const cfg = resolveConsumer(spec);
    const st = this.streams.get(cfg.stream);
    if (!st) throw new Error(`stream ${cfg.stream} not found`);
    if (cfg.filterSubject !== undefined) assertValidSubject(cfg.filterSubject, true);
    await this.ensureDlq();
    const known = st.durables.get(cfg.durable);
    if (!known || known.filter !== cfg.filterSubject) {
      await this.store?.saveDurable(cfg.stream, cfg.durable, cfg.filterSubject);
    }
    // Read again after the await: a concurrent consume() may have created it.
    let d = st.durables.get(cfg.durable);
    if (!d) {
      d = new Durable(this, st, cfg.durable, cfg);
      st.durables.set(cfg.durable, d);
    }
    // Like a JetStream consumer update: the latest settings win for the whole work group.
    d.cfg = cfg;
    d.filter = cfg.filterSubject;
    const leave = d.join(handler, cfg.concurrency);
    return this.track(leave);
  }

  request(subject: string, data: Uint8Array, opts?: RequestOptions): Promise<Uint8Array> {
    if (this.closed) return Promise.reject(new BusError('closed', 'bus is closed'));
    // Liveness (idleTimeoutMs) needs no timer here: every responder runs in this process, so
    // it cannot die while the requester lives, and a stalled event loop stalls both alike.
    try {
      checkIdleTimeout(opts?.idleTimeoutMs);
      checkAppHeaders(opts?.headers);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    const groups = new Map<string, Responder[]>();
    for (const r of this.responders) {
      if (r.stopped || !subjectMatches(r.pattern, subject)) continue;
      const key = `${r.pattern}\u0000${r.queue}`;
      const list = groups.get(key);
      if (list) list.push(r);
      else groups.set(key, [r]);
    }
    if (groups.size === 0) return Promise.reject(new BusError('no_responders', `no responders on '${subject}'`));
    const timeoutMs = opts?.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    // A copy: the responder must not see the caller change them afterwards (nor change them).
    const headers = opts?.headers && Object.keys(opts.headers).length > 0 ? { ...opts.headers } : undefined;
    return new Promise<Uint8Array>((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(() => {
        settled = true;
        reject(new BusError('timeout', `request to '${subject}' timed out after ${timeoutMs}ms`));
      }, timeoutMs);
      // As in NATS, each queue group gets the request once and the first answer wins.
      for (const [key, list] of groups) {
        const i = (this.rr.get(key) ?? 0) % list.length;
        this.rr.set(key, i + 1);
        const r = list[i]!;
        const task = (async () => {
          await Promise.resolve();
          try {
            const out = await r.handler(data, subject, headers);
            if (!settled) resolve(out);
          } catch (err) {
            const p = errorPayload(err);
            const remote = { ...(p.code !== undefined && { code: p.code }), ...(p.status !== undefined && { status: p.status }) };
            if (!settled) reject(new BusError('remote', p.message, remote));
          } finally {
            if (!settled) clearTimeout(timer);
            settled = true;
          }
        })();
        r.inflight.add(task);
        void task.finally(() => r.inflight.delete(task));
      }
    });
  }

  respond(subject: string, queueGroup: string, handler: RequestHandler): Subscription {
    this.assertOpen();
    assertValidSubject(subject, true);
    const r: Responder = { pattern: subject, queue: queueGroup, handler, inflight: new Set(), stopped: false };
    this.responders.push(r);
    return this.track(async () => {
      if (!r.stopped) {
        r.stopped = true;
        this.responders.splice(this.responders.indexOf(r), 1);
      }
      await Promise.all([...r.inflight]);
    });
  }

  emit(subject: string, data: Uint8Array): void {
    this.assertOpen();
    for (const s of this.subscribers) {
      if (!subjectMatches(s.pattern, subject)) continue;
      // Asynchronous, like NATS: the publisher never runs subscriber code.
      queueMicrotask(() => {
        if (s.stopped) return;
        try {
          s.handler(data, subject);
        } catch (err) {
          this.log.warn({ subject, err: errorMessage(err) }, 'bus subscriber threw');
        }
      });
    }
  }

  subscribe(subject: string, handler: EventHandler): Subscription {
    this.assertOpen();
    assertValidSubject(subject, true);
    const s: Subscriber = { pattern: subject, handler, stopped: false };
    this.subscribers.push(s);
    return this.track(async () => {
      if (s.stopped) return;
      s.stopped = true;
      this.subscribers.splice(this.subscribers.indexOf(s), 1);
    });
  }

  healthy(): Promise<boolean> {
    return Promise.resolve(!this.closed);
  }

  backlog(): Promise<ConsumerBacklog[]> {
    const out: ConsumerBacklog[] = [];
    for (const st of this.streams.values()) for (const d of st.durables.values()) out.push({ stream: st.spec.name, durable: d.name, ...d.backlog() });
    return Promise.resolve(out);
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      // Set first: no new deliveries while in-flight handlers drain.
      this.closed = true;
      clearInterval(this.pruneTimer);
      await Promise.all([...this.subs].map((s) => s.stop()));
      for (const st of this.streams.values()) for (const d of st.durables.values()) d.clearTimers();
      await Promise.all([...this.streams.values()].map((st) => st.writes));
    })();
    return this.closing;
  }

  async deadLetter(d: Durable, m: StoredMessage, deliveries: number, err: unknown): Promise<void> {
    await this.ensureDlq();
    const headers: Record<string, string> = {
      [DLQ_HEADERS.stream]: d.stream.spec.name,
      [DLQ_HEADERS.subject]: m.subject,
      [DLQ_HEADERS.seq]: String(m.seq),
      [DLQ_HEADERS.durable]: d.name,
      [DLQ_HEADERS.deliveries]: String(deliveries),
      [DLQ_HEADERS.error]: errorMessage(err),
    };
    if (m.msgId !== undefined) headers[DLQ_HEADERS.msgId] = m.msgId;
    // The msgId makes a repeated dead-lettering (crash between publish and ack) a no-op.
    await this.append(d.cfg.deadLetterSubject, m.data, `dlq:${d.stream.spec.name}:${d.name}:${m.seq}`, headers);
  }

  private async ensureDlq(): Promise<void> {
    if (this.streams.has(DLQ_STREAM)) return;
    const spec = resolveStream({ name: DLQ_STREAM, subjects: DLQ_SUBJECTS });
    this.streams.set(DLQ_STREAM, new Stream(spec, 0));
    await this.store?.saveStream(spec);
  }

  private async append(
    subject: string,
    data: Uint8Array,
    msgId: string | undefined,
    headers: Record<string, string> | undefined,
  ): Promise<void> {
    let st: Stream | undefined;
    for (const s of this.streams.values()) {
      if (s.stores(subject)) {
        st = s;
        break;
      }
    }
    if (!st) throw new BusError('no_responders', `no stream stores subject '${subject}'`);
    const now = Date.now();
    if (msgId !== undefined) {
      const seen = st.dedupe.get(msgId);
      if (seen !== undefined && now - seen < st.spec.duplicateWindowMs) return;
      st.dedupe.set(msgId, now);
    }
    const msg: StoredMessage = { stream: st.spec.name, seq: ++st.lastSeq, subject, data, msgId, ts: now, headers };
    const store = this.store;
    if (store) {
      // Not chained behind the previous write: the store settles appends in call order, and
      // writes several at once when they come together.
      const write = store.append(msg);
      st.writes = write.catch(() => undefined);
      try {
        await write;
      } catch (err) {
        // Not stored: let a retry with the same msgId through. The seq stays a hole.
        if (msgId !== undefined && st.dedupe.get(msgId) === now) st.dedupe.delete(msgId);
        throw err;
      }
    }
    // Writes settle in seq order, so the log stays sorted.
    st.log.push(msg);
    for (const d of st.durables.values()) d.dispatch();
  }

  /**
   * Drop from memory the prefix of each stream that every durable is done
   * with, or past max age. The store keeps those rows for the duplicate
   * window too: a restart rebuilds dedupe from the stored msgIds (and a
   * durable first seen after the restart still gets that window's messages).
   */
  private prune(): void {
    const now = Date.now();
    for (const st of this.streams.values()) {
      const window = st.spec.duplicateWindowMs;
      for (const [id, ts] of st.dedupe) if (now - ts >= window) st.dedupe.delete(id);
      const durables = [...st.durables.values()];
      let n = 0;
      for (const m of st.log) {
        if (now - m.ts < st.spec.maxAgeMs && !durables.every((d) => d.isDone(m))) break;
        n++;
      }
      if (n > 0) {
        const last = st.log[n - 1]!;
        st.log.splice(0, n);
        for (const d of durables) d.forgetThrough(last.seq);
        if (this.store) st.released.push({ seq: last.seq, ts: last.ts });
      }
      // Each release is judged by its newest message: everything before it is older.
      let through = 0;
      while (st.released.length > 0 && now - st.released[0]!.ts >= window) through = st.released.shift()!.seq;
      if (through === 0) continue;
      this.store?.prune(st.spec.name, through).catch((err: unknown) => {
        this.log.warn({ stream: st.spec.name, err: errorMessage(err) }, 'bus store prune failed');
      });
    }
  }

  private track(stop: () => Promise<void>): Subscription {
    return trackSubscription(this.subs, stop);
  }

  private assertOpen(): void {
    if (this.closed) throw new BusError('closed', 'bus is closed');
  }
}
