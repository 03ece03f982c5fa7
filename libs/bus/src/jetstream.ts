/**
 * The JetStream Bus adapter (fleet mode). Uses only what nats-server 2.9
 * offers: one filter subject per consumer, no per-message TTL, no consumer
 * metadata. Redelivery backoff and dead-lettering are done here, in the
 * client, with nak(delay) and term(), so they need nothing newer.
 */
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  jetstreamManager,
  ReplayPolicy,
  RetentionPolicy,
  StorageType,
  type ConsumerConfig,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type StreamConfig,
} from '@nats-io/jetstream';
import { createInbox, headers as natsHeaders, nanos, type Msg, type MsgHdrs, type NatsConnection } from '@nats-io/nats-core';

interface PendingRequest {
  resolve(m: Msg): void;
  reject(e: Error): void;
  timer: NodeJS.Timeout;
  subject: string;
  /** Liveness check of a request with idleTimeoutMs: when the responder was last heard from. */
  idle?: { heardAt: number; timer: NodeJS.Timeout };
}

interface RequestMux {
  prefix: string;
  seq: number;
  pending: Map<string, PendingRequest>;
}
import { connect } from '@nats-io/transport-node';
import { untilAnswered } from './jetstream-admin.js';
import { PullLoop } from './jetstream-pull.js';
import { EMPTY, SPILL_HEADER, Spill, isSpilled } from './jetstream-spill.js';
import { namespaceStreams } from './prefixed.js';
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  DLQ_HEADERS,
  DLQ_STREAM,
  DLQ_SUBJECTS,
  ERROR_HEADER,
  checkAppHeaders,
  checkIdleTimeout,
  errorMessage,
  errorPayload,
  isBusHeader,
  parseProgressEvery,
  PROGRESS_EVERY_HEADER,
  PROGRESS_HEADER,
  progressEveryMs,
  resolveConsumer,
  resolveStream,
  type BusLogger,
  type ResolvedConsumer,
  trackSubscription,
} from './policy.js';
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

export interface JetStreamBusOptions {
  /** NATS server URL, or several separated by commas. */
  servers: string;
  /** Connection name the server shows in its monitoring. @default 'dws' */
  name?: string;
  /** Receives failures no caller sees (pull errors, dead-lettering, subscriber throws). @default silent */
  log?: BusLogger;
  /**
   * Copies JetStream keeps of every stream this bus creates (and of its spill
   * stores), on as many servers: 3 on a three-node cluster keeps the bus
   * available and its messages safe when a server is lost. A stream made
   * with another count is scaled to it. @default 1
   */
  replicas?: number;
}

/** Connect to NATS (retrying reconnects forever) and return a Bus over JetStream. Fails if JetStream is off. */
export async function connectJetStreamBus(opts: JetStreamBusOptions): Promise<Bus> {
  const nc = await connect({
    servers: opts.servers.split(',').map((s) => s.trim()),
    name: opts.name ?? 'dws',
    maxReconnectAttempts: -1,
  });
  writesPerLoopTurn(nc);
  try {
    const jsm = await jetstreamManager(nc);
    return new JetStreamBus(nc, jsm, opts.log ?? { warn: () => undefined }, opts.replicas ?? 1);
  } catch (err) {
    await nc.close();
    throw err;
  }
}

/**
 * Delete every stream of a bus namespace (`prefixedBus`) on the NATS server
 * at `servers`, with its consumers and dead letters: for a test or a bench, whose namespace
 * is its own, once nothing uses it. Idle streams and durables are not free:
 * each keeps timers running in nats-server (120 of them left by 15 bench
 * fleets woke it ~60 more times a second). Returns how many it deleted.
 */
export async function deleteNamespace(servers: string, prefix: string): Promise<number> {
  const names = namespaceStreams(prefix);
  const nc = await connect({ servers: servers.split(',').map((s) => s.trim()), name: 'dws-namespace-cleanup' });
  try {
    const jsm = await jetstreamManager(nc);
    const ours: string[] = [];
    // Listed first, deleted after: deleting while paging the list would skip some.
    for await (const si of jsm.streams.list()) if (si.config.name.startsWith(names)) ours.push(si.config.name);
    const dlq = await jsm.streams.info(DLQ_STREAM).then(
      () => true,
      () => false,
    );
    for (const name of ours) {
      await jsm.streams.delete(name);
      // Its dead letters, in the server's one DLQ stream (subjects dlq.<stream>.<durable>), go with it.
      if (dlq) await jsm.streams.purge(DLQ_STREAM, { filter: `dlq.${name}.>` });
    }
    return ours.length;
  } finally {
    await nc.close();
  }
}

/**
 * What the connection sends in one turn of the event loop leaves in one
 * socket write. nats.js writes at the end of the microtasks of the callback
 * that sent first: a service handling many requests in a turn (one per HTTP
 * socket or statement result that was ready) wrote once per request, and
 * each write costs a syscall here, a read and a wake-up in nats-server, and
 * the same again for the process it forwards to. Held until the turn's
 * check phase (setImmediate): nothing waits for a later turn.
 */
export function writesPerLoopTurn(nc: NatsConnection): void {
  const protocol = (nc as unknown as { protocol?: { flushPending?: () => void } }).protocol;
  // Another nats.js: its own flush stays.
  if (typeof protocol?.flushPending !== 'function') return;
  const flushNow = protocol.flushPending.bind(protocol);
  let queued = false;
  protocol.flushPending = () => {
    if (queued) return;
    queued = true;
    setImmediate(() => {
      queued = false;
      flushNow();
    });
  };
}

const API_STREAM_NAME_IN_USE = 10058;
/** "replicas > 1 not supported in non-clustered mode". */
const API_REPLICAS_NEED_CLUSTER = 10074;

class JetStreamBus implements Bus {
  readonly kind = 'jetstream' as const;
  private readonly js: JetStreamClient;
  private readonly subs = new Set<Subscription>();
  private mux: RequestMux | undefined;
  private closed = false;
  private closing: Promise<void> | undefined;
  private dlqReady: Promise<void> | undefined;
  private readonly spill: Spill;
  /** Emits queue here while an earlier one is being spilled, so live tails stay in order. */
  private emitTail: Promise<void> | undefined;
  /** Emits of this turn of the event loop, published together (one socket write) by flushEmits. */
  private emitBatch: [string, Uint8Array][] = [];

  /** The durables this process consumes, for `backlog()`. */
  private readonly consumed = new Map<string, { stream: string; durable: string }>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly log: BusLogger,
    private readonly replicas: number,
  ) {
    this.js = jsm.jetstream();
    this.spill = new Spill(this.js, () => nc.info?.max_payload ?? 1024 * 1024, replicas);
  }

  async ensureStream(spec: StreamSpec): Promise<void> {
    this.assertOpen();
    const r = resolveStream(spec);
    const changeable = {
      subjects: r.subjects,
      max_age: nanos(r.maxAgeMs),
      duplicate_window: nanos(r.duplicateWindowMs),
      num_replicas: this.replicas,
    };
    const cfg: Partial<StreamConfig> & { name: string } = {
      name: r.name,
      ...changeable,
      // Limits retention: several durables may read one stream, and a message
      // published before its consumer first starts must still be there.
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      discard: DiscardPolicy.Old,
    };
    await this.untilAnswered(`stream ${r.name}`, async () => {
      try {
        await this.jsm.streams.add(cfg);
      } catch (err) {
        // It exists with another config (an older deploy, or a replica racing us): update in place.
        if (apiErrorCode(err) !== API_STREAM_NAME_IN_USE) throw err;
        await this.jsm.streams.update(r.name, changeable);
      }
    }).catch((err: unknown) => {
      throw this.replicas > 1 && apiErrorCode(err) === API_REPLICAS_NEED_CLUSTER
        ? new Error(`stream ${r.name}: ${this.replicas} replicas need a NATS cluster with JetStream on at least ${this.replicas} servers (${errorMessage(err)})`, { cause: err })
        : err;
    });
  }

  async publish(subject: string, data: Uint8Array, opts?: PublishOptions): Promise<void> {
    this.assertOpen();
    const spilled = this.spill.needed(data);
    let headers = spilled ? await this.spill.put('durable', data) : undefined;
    if (opts?.msgId !== undefined) (headers ??= natsHeaders()).set('Nats-Msg-Id', opts.msgId);
    // A JetStream publish is a core request answered with a PubAck, sent on the shared
    // request inbox: the client's js.publish builds Error objects (stack traces) per call.
    let ack: Msg;
    try {
      ack = await this.roundTrip(subject, spilled ? EMPTY : data, headers, DEFAULT_REQUEST_TIMEOUT_MS);
    } catch (err) {
      if (err instanceof BusError && err.code === 'no_responders') {
        throw new BusError('no_responders', `no stream stores subject '${subject}'`);
      }
      throw err;
    }
    let reply: { error?: { code?: number; description?: string } };
    try {
      reply = JSON.parse(new TextDecoder().decode(ack.data)) as typeof reply;
    } catch {
      throw new Error(`JetStream answered a publish on '${subject}' with something other than a PubAck`);
    }
    if (reply.error) {
      throw new Error(`JetStream refused a publish on '${subject}': ${reply.error.description ?? `code ${reply.error.code}`}`);
    }
  }

  async backlog(): Promise<ConsumerBacklog[]> {
    const out: ConsumerBacklog[] = [];
    for (const { stream, durable } of this.consumed.values()) {
      // A consumer being re-created, or the server away: left out of this scrape, not an error.
      const info = await this.jsm.consumers.info(stream, durable).catch(() => undefined);
      if (info) out.push({ stream, durable, pending: info.num_pending, ackPending: info.num_ack_pending });
    }
    return out;
  }

  async consume(spec: ConsumerSpec, handler: MessageHandler): Promise<Subscription> {
    this.assertOpen();
    const c = resolveConsumer(spec);
    this.consumed.set(`${c.stream}\u0000${c.durable}`, { stream: c.stream, durable: c.durable });
    await this.ensureDlq();
    // Reopening re-creates the durable too, so a deleted consumer heals on the next pull.
    const open = async () => {
      await this.ensureConsumer(c);
      return this.js.consumers.get(c.stream, c.durable);
    };
    const consumer = await this.untilAnswered(`consumer ${c.stream}/${c.durable}`, open);
    const pull = new PullLoop(
      consumer,
      open,
      c,
      handler,
      this.log,
      (m, n, err) => this.deadLetter(c, m, n, err),
      (m) => this.spill.resolve(m, false),
    );
    pull.start();
    return this.track(() => pull.stop());
  }

  async request(subject: string, data: Uint8Array, opts?: RequestOptions): Promise<Uint8Array> {
    this.assertOpen();
    const timeout = opts?.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    const idleMs = checkIdleTimeout(opts?.idleTimeoutMs);
    checkAppHeaders(opts?.headers);
    const spilled = this.spill.needed(data);
    let headers = spilled ? await this.spill.put('transient', data) : undefined;
    if (idleMs !== undefined) (headers ??= natsHeaders()).set(PROGRESS_EVERY_HEADER, String(progressEveryMs(idleMs)));
    if (opts?.headers) for (const [k, v] of Object.entries(opts.headers)) (headers ??= natsHeaders()).set(k, v);
    const reply = await this.roundTrip(subject, spilled ? EMPTY : data, headers, timeout, idleMs);
    if (reply.headers?.has(ERROR_HEADER)) {
      let p: { message?: unknown; code?: unknown; status?: unknown } = {};
      try {
        p = JSON.parse(new TextDecoder().decode(reply.data)) as typeof p;
      } catch {
        // Not our JSON: the message below says so.
      }
      const remote = {
        ...(typeof p.code === 'string' && { code: p.code }),
        ...(typeof p.status === 'number' && { status: p.status }),
      };
      throw new BusError('remote', typeof p.message === 'string' ? p.message : 'remote error', remote);
    }
    return this.spill.resolve(reply, true);
  }

  /**
   * Send one message with a reply token on the shared inbox and wait for its answer.
   * With `idleMs`, also give up once the responder stayed silent (no answer, no progress) that long.
   */
  private roundTrip(subject: string, data: Uint8Array, headers: MsgHdrs | undefined, timeout: number, idleMs?: number): Promise<Msg> {
    this.assertOpen();
    // What was emitted before goes out before: a run's end frame ahead of its RunFinished, whose consumers
    // (the gateway's usage meter among them) would otherwise take the turn the frame's relay waits for.
    if (this.emitBatch.length > 0) this.flushEmits();
    const mux = this.requestMux();
    const token = String(++mux.seq);
    return new Promise<Msg>((resolve, reject) => {
      const p: PendingRequest = {
        resolve,
        reject,
        subject,
        timer: setTimeout(() => {
          mux.pending.delete(token);
          if (p.idle) clearTimeout(p.idle.timer);
          reject(new BusError('timeout', `no reply on '${subject}' within ${timeout} ms`));
        }, timeout),
      };
      if (idleMs !== undefined && idleMs < timeout) {
        // Progress only stamps heardAt (no timer work per beat); the timer checks the stamp when it fires.
        const check = () => {
          // Once more round the event loop first: after a stall of this process, progress that
          // is already in the socket buffer is read before the responder is declared dead.
          setImmediate(() => {
            if (mux.pending.get(token) !== p || !p.idle) return;
            const quiet = Date.now() - p.idle.heardAt;
            if (quiet < idleMs) {
              p.idle.timer = setTimeout(check, idleMs - quiet);
              return;
            }
            mux.pending.delete(token);
            clearTimeout(p.timer);
            reject(new BusError('timeout', `the responder on '${subject}' went silent: no reply or progress for ${quiet} ms`));
          });
        };
        p.idle = { heardAt: Date.now(), timer: setTimeout(check, idleMs) };
      }
      mux.pending.set(token, p);
      try {
        this.nc.publish(subject, data, { reply: mux.prefix + token, ...(headers && { headers }) });
      } catch (err) {
        clearTimeout(p.timer);
        if (p.idle) clearTimeout(p.idle.timer);
        mux.pending.delete(token);
        reject(this.mapError(err, subject, `no responders on '${subject}'`, timeout));
      }
    });
  }

  /**
   * Requests share one inbox subscription and are matched by token. The
   * client's own request() builds two Error objects (stack traces) per call
   * to have them ready; on the invoke hot path that was ~4% of the CPU.
   */
  private requestMux(): RequestMux {
    if (this.mux) return this.mux;
    const mux: RequestMux = { prefix: `${createInbox()}.`, seq: 0, pending: new Map() };
    this.nc.subscribe(`${mux.prefix}*`, {
      callback: (err, m) => {
        if (err) return;
        const token = m.subject.slice(mux.prefix.length);
        const p = mux.pending.get(token);
        if (!p) return;
        if (m.headers?.has(PROGRESS_HEADER)) {
          // The handler is still at work: the request stays pending.
          if (p.idle) p.idle.heardAt = Date.now();
          return;
        }
        mux.pending.delete(token);
        clearTimeout(p.timer);
        if (p.idle) clearTimeout(p.idle.timer);
        // The server answers a request nobody subscribes to with an empty 503 status message.
        if (m.headers?.hasError && m.headers.code === 503) p.reject(new BusError('no_responders', `no responders on '${p.subject}'`));
        else p.resolve(m);
      },
    });
    this.mux = mux;
    return mux;
  }

  respond(subject: string, queueGroup: string, handler: RequestHandler): Subscription {
    this.assertOpen();
    const inflight = new Set<Promise<void>>();
    const answer = async (m: Msg): Promise<void> => {
      const beat = this.progressBeat(m);
      try {
        const reply = await handler(await this.spill.resolve(m, true), m.subject, appHeaders(m.headers));
        if (this.spill.needed(reply)) {
          const headers = await this.spill.put('transient', reply);
          clearInterval(beat);
          m.respond(EMPTY, { headers });
        } else {
          clearInterval(beat);
          m.respond(reply);
        }
      } catch (err) {
        clearInterval(beat);
        // Answer at once, so the requester fails with the reason instead of a timeout.
        const h = natsHeaders();
        h.set(ERROR_HEADER, '1');
        m.respond(new TextEncoder().encode(JSON.stringify(errorPayload(err))), { headers: h });
      }
    };
    const sub = this.nc.subscribe(subject, {
      queue: queueGroup,
      callback: (err, m) => {
        if (err) {
          this.log.warn({ subject, err: errorMessage(err) }, 'bus responder subscription failed');
          return;
        }
        const task = answer(m).catch((e: unknown) => {
          this.log.warn({ subject, err: errorMessage(e) }, 'bus reply failed');
        });
        inflight.add(task);
        void task.finally(() => inflight.delete(task));
      },
    });
    return this.track(async () => {
      await drainQuietly(sub);
      await Promise.all([...inflight]);
    });
  }

  /**
   * While a request that asked for liveness is being handled, tell its requester so at the
   * period it asked for. The first beat comes one period in: a fast handler sends none.
   */
  private progressBeat(m: Msg): NodeJS.Timeout | undefined {
    const every = m.reply ? parseProgressEvery(m.headers?.get(PROGRESS_EVERY_HEADER)) : undefined;
    if (every === undefined) return undefined;
    return setInterval(() => {
      const h = natsHeaders();
      h.set(PROGRESS_HEADER, '1');
      try {
        m.respond(EMPTY, { headers: h });
      } catch {
        // The connection is closing; the requester's idle check ends the wait.
      }
    }, every);
  }

  emit(subject: string, data: Uint8Array): void {
    this.assertOpen();
    if (!this.emitTail && !this.spill.needed(data)) {
      // Live frames of many runs finish in one turn: one write for all of them (nats.js writes per microtask).
      if (this.emitBatch.push([subject, data]) === 1) setImmediate(this.flushEmits);
      return;
    }
    const send = async () => {
      const headers = this.spill.needed(data) ? await this.spill.put('transient', data) : undefined;
      this.nc.publish(subject, headers ? EMPTY : data, headers && { headers });
    };
    const tail: Promise<void> = (this.emitTail ?? Promise.resolve())
      .then(send)
      .catch((err: unknown) => this.log.warn({ subject, err: errorMessage(err) }, 'bus emit failed'))
      .finally(() => {
        if (this.emitTail === tail) this.emitTail = undefined;
      });
    this.emitTail = tail;
  }

  private readonly flushEmits = (): void => {
    const batch = this.emitBatch;
    this.emitBatch = [];
    for (const [subject, data] of batch) {
      try {
        this.nc.publish(subject, data);
      } catch (err) {
        // Closed meanwhile: live frames are best-effort (readers resync from storage); one refused drops no other.
        this.log.warn({ subject, err: errorMessage(err) }, 'bus emit failed');
      }
    }
  };

  subscribe(subject: string, handler: EventHandler): Subscription {
    this.assertOpen();
    const deliver = (data: Uint8Array, m: Msg) => {
      try {
        handler(data, m.subject);
      } catch (e) {
        this.log.warn({ subject: m.subject, err: errorMessage(e) }, 'bus subscriber threw');
      }
    };
    // While a spilled message is fetched, later ones wait behind it: delivery stays in order.
    let tail: Promise<void> | undefined;
    const sub = this.nc.subscribe(subject, {
      callback: (err, m) => {
        if (err) {
          this.log.warn({ subject, err: errorMessage(err) }, 'bus subscription failed');
          return;
        }
        if (!tail && !isSpilled(m.headers)) {
          deliver(m.data, m);
          return;
        }
        const next: Promise<void> = (tail ?? Promise.resolve())
          .then(() => this.spill.resolve(m, false))
          .then(
            (data) => deliver(data, m),
            (e: unknown) => this.log.warn({ subject: m.subject, err: errorMessage(e) }, 'bus subscriber lost a spilled message'),
          )
          .finally(() => {
            if (tail === next) tail = undefined;
          });
        tail = next;
      },
    });
    // A live tail that stops wants nothing more: UNSUB without drain's flush round trip
    // (one per closed SSE stream otherwise).
    return this.track(async () => {
      if (!sub.isClosed()) sub.unsubscribe();
    });
  }

  async healthy(): Promise<boolean> {
    if (this.closed || this.nc.isClosed()) return false;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), 1000);
    });
    try {
      return await Promise.race([this.nc.flush().then(() => true), timeout]);
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.closed = true;
      this.flushEmits();
      await Promise.all([...this.subs].map((s) => s.stop()));
      if (!this.nc.isClosed()) {
        try {
          await this.nc.drain();
        } catch {
          await this.nc.close();
        }
      }
      for (const p of this.mux?.pending.values() ?? []) {
        clearTimeout(p.timer);
        if (p.idle) clearTimeout(p.idle.timer);
        p.reject(new BusError('closed', `bus closed before a reply on '${p.subject}'`));
      }
      this.mux?.pending.clear();
    })();
    return this.closing;
  }

  private ensureDlq(): Promise<void> {
    // Once per connection; forgotten on failure so the next consume retries.
    this.dlqReady ??= this.ensureStream({ name: DLQ_STREAM, subjects: DLQ_SUBJECTS }).catch((err: unknown) => {
      this.dlqReady = undefined;
      throw err;
    });
    return this.dlqReady;
  }

  private async ensureConsumer(c: ResolvedConsumer): Promise<void> {
    const changeable: Partial<ConsumerConfig> = {
      ack_wait: nanos(c.ackWaitMs),
      // Unlimited: the client dead-letters after maxDeliver failures; a server-side
      // limit would silently park a message whose handler kept timing out.
      max_deliver: -1,
      ...(c.filterSubject !== undefined && { filter_subject: c.filterSubject }),
    };
    const cfg: Partial<ConsumerConfig> = {
      durable_name: c.durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      replay_policy: ReplayPolicy.Instant,
      ...changeable,
    };
    try {
      // On 2.9 an add with a changed config updates the durable; identical is a no-op.
      await this.jsm.consumers.add(c.stream, cfg);
    } catch (err) {
      // Newer servers refuse a changed config on create (or a replica raced us): update it.
      const exists = await this.jsm.consumers.info(c.stream, c.durable).then(
        () => true,
        () => false,
      );
      if (!exists) throw err;
      await this.jsm.consumers.update(c.stream, c.durable, changeable);
    }
  }

  private async deadLetter(c: ResolvedConsumer, m: JsMsg, deliveries: number, err: unknown): Promise<void> {
    await this.ensureDlq();
    const h = natsHeaders();
    const put = (k: string, v: string) => h.set(k, v.replace(/[\r\n]+/g, ' ').slice(0, 1024));
    put(DLQ_HEADERS.stream, c.stream);
    put(DLQ_HEADERS.subject, m.subject);
    put(DLQ_HEADERS.seq, String(m.seq));
    put(DLQ_HEADERS.durable, c.durable);
    put(DLQ_HEADERS.deliveries, String(deliveries));
    put(DLQ_HEADERS.error, errorMessage(err) || 'error');
    const msgId = m.headers?.get('Nats-Msg-Id');
    if (msgId) put(DLQ_HEADERS.msgId, msgId);
    // A spilled payload stays where it is: the dead letter carries the same claim check.
    const spilled = m.headers?.get(SPILL_HEADER);
    if (spilled) h.set(SPILL_HEADER, spilled);
    // The msgID makes a repeat (crash between this publish and term) a no-op.
    await this.js.publish(c.deadLetterSubject, m.data, {
      msgID: `dlq:${c.stream}:${c.durable}:${m.seq}`,
      headers: h,
    });
  }

  private mapError(err: unknown, subject: string, noResponders: string, timeoutMs?: number): unknown {
    const e = err as { name?: string; cause?: { name?: string }; isNoResponders?: () => boolean } | null;
    const name = e?.name;
    if (name === 'ClosedConnectionError' || name === 'DrainingConnectionError' || this.nc.isClosed()) {
      return new BusError('closed', 'bus is closed');
    }
    // js.publish reports "no stream for this subject" as JetStreamNotEnabled (a 503 underneath).
    if (
      (typeof e?.isNoResponders === 'function' && e.isNoResponders()) ||
      e?.cause?.name === 'NoRespondersError' ||
      name === 'JetStreamNotEnabled'
    ) {
      return new BusError('no_responders', noResponders);
    }
    if (name === 'TimeoutError' || e?.cause?.name === 'TimeoutError') {
      return new BusError('timeout', `'${subject}' timed out${timeoutMs !== undefined ? ` after ${timeoutMs}ms` : ''}`);
    }
    return err;
  }

  /** An idempotent API call, retried through a server restart (the pull loop's reopen retries on its own). */
  private untilAnswered<T>(what: string, call: () => Promise<T>): Promise<T> {
    return untilAnswered(what, call, { log: this.log, isOpen: () => !this.closed });
  }

  private track(stop: () => Promise<void>): Subscription {
    return trackSubscription(this.subs, stop);
  }

  private assertOpen(): void {
    if (this.closed) throw new BusError('closed', 'bus is closed');
  }
}

function apiErrorCode(err: unknown): number | undefined {
  const e = err as { code?: unknown; apiError?: () => { err_code?: number } } | null;
  if (typeof e?.apiError === 'function') return e.apiError().err_code;
  return typeof e?.code === 'number' ? e.code : undefined;
}

async function drainQuietly(sub: { drain(): Promise<void>; unsubscribe(): void; isClosed(): boolean }): Promise<void> {
  if (sub.isClosed()) return;
  try {
    await sub.drain();
  } catch {
    // The connection is already closing: unsubscribing is all that is left.
    sub.unsubscribe();
  }
}

/** The application headers of a request (RequestOptions.headers): none of the bus's own. */
function appHeaders(h: MsgHdrs | undefined): Record<string, string> | undefined {
  if (!h) return undefined;
  let out: Record<string, string> | undefined;
  for (const k of h.keys()) {
    if (!isBusHeader(k)) (out ??= {})[k] = h.get(k);
  }
  return out;
}
