/**
 * The in-process stream and durable-consumer state of the embedded bus.
 * A durable mirrors a JetStream pull consumer with explicit ack and
 * DeliverPolicy.All: one cursor for first deliveries, a pending set (delivered
 * or waiting for a redelivery, not acked), and due redeliveries that go out
 * before new messages.
 */
import type { EmbeddedBusStore, StoredMessage } from './embedded-store.js';
import {
  backoffDelay,
  errorMessage,
  retryDelay,
  type BusLogger,
  type ResolvedConsumer,
  type ResolvedStream,
} from './policy.js';
import { subjectMatches } from './subjects.js';
import type { BusMessage, MessageHandler } from './types.js';

/** What a durable needs from the bus that owns it. */
export interface DurableHost {
  readonly closed: boolean;
  readonly store: EmbeddedBusStore | undefined;
  readonly log: BusLogger;
  deadLetter(durable: Durable, msg: StoredMessage, deliveries: number, err: unknown): Promise<void>;
}

export class Stream {
  /** Retained messages in seq order (appends happen in seq order, pruning removes a prefix). */
  readonly log: StoredMessage[] = [];
  readonly dedupe = new Map<string, number>();
  readonly durables = new Map<string, Durable>();
  /** Dropped from memory, still in the store until the duplicate window passes: the last seq and ts of each drop. */
  readonly released: Array<{ seq: number; ts: number }> = [];
  /** The latest store append (appends settle in call order, so the log becomes visible in seq order): what close waits for. */
  writes: Promise<unknown> = Promise.resolve();

  constructor(
    public spec: ResolvedStream,
    public lastSeq: number,
  ) {}

  stores(subject: string): boolean {
    return this.spec.subjects.some((p) => subjectMatches(p, subject));
  }

  /** Index of the first retained message with seq > `seq`. */
  indexAfter(seq: number): number {
    let lo = 0;
    let hi = this.log.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.log[mid]!.seq <= seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  get(seq: number): StoredMessage | undefined {
    const m = this.log[this.indexAfter(seq) - 1];
    return m?.seq === seq ? m : undefined;
  }
}

interface Pending {
  readonly seq: number;
  deliveries: number;
  /** Bumped on every delivery: an outcome from an older delivery can still ack, nothing else. */
  gen: number;
  timer: NodeJS.Timeout | undefined;
}

interface Member {
  readonly handler: MessageHandler;
  readonly concurrency: number;
  inflight: number;
  readonly tasks: Set<Promise<void>>;
  stopped: boolean;
}

export class Durable {
  cfg: ResolvedConsumer;
  filter: string | undefined;
  /** Acked (or dead-lettered) seqs still retained by the stream. */
  readonly acked = new Set<number>();
  /** Highest seq considered for a first delivery. */
  private cursor = 0;
  private readonly pending = new Map<number, Pending>();
  /** Pending seqs whose redelivery is due, ascending. */
  private ready: number[] = [];
  private readonly members: Member[] = [];
  private rr = 0;

  constructor(
    private readonly host: DurableHost,
    readonly stream: Stream,
    readonly name: string,
    cfg: ResolvedConsumer,
  ) {
    this.cfg = cfg;
    this.filter = cfg.filterSubject;
  }

  wants(subject: string): boolean {
    return this.filter === undefined || subjectMatches(this.filter, subject);
  }

  /** Not yet delivered (past the cursor, for this durable) and delivered but not acked: the metrics' lag. */
  backlog(): { pending: number; ackPending: number } {
    let pending = 0;
    for (let i = this.stream.indexAfter(this.cursor); i < this.stream.log.length; i++) if (this.wants(this.stream.log[i]!.subject)) pending++;
    return { pending, ackPending: this.pending.size };
  }

  /** Done with `seq` for pruning: acked, or never meant for this durable. Pending or unseen is not done. */
  isDone(m: StoredMessage): boolean {
    return this.acked.has(m.seq) || !this.wants(m.subject);
  }

  /** Join the work group; returns the member's stop. */
  join(handler: MessageHandler, concurrency: number): () => Promise<void> {
    const member: Member = { handler, concurrency, inflight: 0, tasks: new Set(), stopped: false };
    this.members.push(member);
    this.dispatch();
    return async () => {
      if (!member.stopped) {
        member.stopped = true;
        this.members.splice(this.members.indexOf(member), 1);
      }
      // No task is added once stopped, so this settles.
      await Promise.all([...member.tasks]);
    };
  }

  /** Hand out due redeliveries, then new messages, while some member has a free slot. */
  dispatch(): void {
    if (this.host.closed) return;
    for (;;) {
      const member = this.freeMember();
      if (!member) return;
      const msg = this.next();
      if (!msg) return;
      this.deliver(msg, member);
    }
  }

  /** Forget seqs the stream no longer holds (pruned), with their timers. */
  forgetThrough(seq: number): void {
    for (const s of this.acked) if (s <= seq) this.acked.delete(s);
    for (const [s, p] of this.pending) {
      if (s <= seq) {
        clearTimeout(p.timer);
        this.pending.delete(s);
      }
    }
    this.ready = this.ready.filter((s) => s > seq);
    if (this.cursor < seq) this.cursor = seq;
  }

  clearTimers(): void {
    for (const p of this.pending.values()) clearTimeout(p.timer);
  }

  private freeMember(): Member | undefined {
    const n = this.members.length;
    for (let k = 0; k < n; k++) {
      const i = (this.rr + k) % n;
      const m = this.members[i]!;
      if (m.inflight < m.concurrency) {
        this.rr = i + 1;
        return m;
      }
    }
    return undefined;
  }

  private next(): StoredMessage | undefined {
    while (this.ready.length > 0) {
      const seq = this.ready.shift()!;
      const m = this.pending.has(seq) ? this.stream.get(seq) : undefined;
      if (m) return m;
    }
    const log = this.stream.log;
    if (log.length === 0 || log[log.length - 1]!.seq <= this.cursor) return undefined;
    for (let i = this.stream.indexAfter(this.cursor); i < log.length; i++) {
      const m = log[i]!;
      this.cursor = m.seq;
      if (!this.acked.has(m.seq) && !this.pending.has(m.seq) && this.wants(m.subject)) return m;
    }
    return undefined;
  }

  private deliver(m: StoredMessage, member: Member): void {
    let p = this.pending.get(m.seq);
    if (!p) {
      p = { seq: m.seq, deliveries: 0, gen: 0, timer: undefined };
      this.pending.set(m.seq, p);
    }
    p.deliveries++;
    const gen = ++p.gen;
    const pend = p;
    this.arm(pend, this.cfg.ackWaitMs, gen);
    const bm: BusMessage = {
      subject: m.subject,
      data: m.data,
      seq: m.seq,
      msgId: m.msgId,
      deliveryCount: p.deliveries,
      ...(m.headers ? { headers: m.headers } : {}),
      working: () => {
        if (this.pending.get(m.seq) === pend && pend.gen === gen && !this.ready.includes(m.seq)) {
          this.arm(pend, this.cfg.ackWaitMs, gen);
        }
      },
    };
    member.inflight++;
    const task: Promise<void> = this.run(member.handler, bm, m, pend, gen).finally(() => {
      member.inflight--;
      member.tasks.delete(task);
      this.dispatch();
    });
    member.tasks.add(task);
  }

  private async run(handler: MessageHandler, bm: BusMessage, m: StoredMessage, p: Pending, gen: number): Promise<void> {
    // Never run a handler inline in publish() or consume().
    await Promise.resolve();
    let retryMs: number | undefined;
    let failure: { err: unknown } | undefined;
    try {
      retryMs = retryDelay(await handler(bm));
    } catch (err) {
      failure = { err };
    }
    const current = this.pending.get(m.seq) === p;
    if (retryMs === undefined && !failure) {
      // An ack counts even from a delivery that a redelivery superseded (JetStream acks by stream seq).
      if (current || !this.acked.has(m.seq)) await this.settle(m);
      return;
    }
    if (!current || p.gen !== gen) return;
    if (retryMs !== undefined) {
      this.arm(p, retryMs, gen);
      return;
    }
    if (bm.deliveryCount >= this.cfg.maxDeliver) {
      try {
        await this.host.deadLetter(this, m, bm.deliveryCount, failure!.err);
        await this.settle(m);
        return;
      } catch (err) {
        this.host.log.warn(
          { stream: this.stream.spec.name, durable: this.name, seq: m.seq, err: errorMessage(err) },
          'dead-letter publish failed; will redeliver',
        );
      }
    }
    this.arm(p, backoffDelay(this.cfg.backoffMs, bm.deliveryCount), gen);
  }

  /** The message is done for this durable: forget it and persist the ack. */
  private async settle(m: StoredMessage): Promise<void> {
    const p = this.pending.get(m.seq);
    if (p) {
      clearTimeout(p.timer);
      this.pending.delete(m.seq);
    }
    this.unready(m.seq);
    // Pruned meanwhile (max age): nothing left to ack.
    if (this.stream.get(m.seq) !== m) return;
    this.acked.add(m.seq);
    try {
      await this.host.store?.ack(this.stream.spec.name, this.name, m.seq);
    } catch (err) {
      // Acked in memory; only a restart before the next write would redeliver it (at least once).
      this.host.log.warn(
        { stream: this.stream.spec.name, durable: this.name, seq: m.seq, err: errorMessage(err) },
        'bus store ack failed',
      );
    }
  }

  /** (Re)start the one timer of a pending message: when it fires, the message is due for redelivery. */
  private arm(p: Pending, ms: number, gen: number): void {
    clearTimeout(p.timer);
    this.unready(p.seq);
    p.timer = setTimeout(() => {
      p.timer = undefined;
      if (this.pending.get(p.seq) !== p || p.gen !== gen) return;
      this.ready.push(p.seq);
      this.ready.sort((a, b) => a - b);
      this.dispatch();
    }, ms);
    p.timer.unref();
  }

  private unready(seq: number): void {
    const i = this.ready.indexOf(seq);
    if (i >= 0) this.ready.splice(i, 1);
  }
}
