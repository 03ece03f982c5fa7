/** The pull side of a JetStream consume(): fetch loop, handler slots, ack/nak/dead-letter. */
import type { Consumer, ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import { backoffDelay, errorMessage, retryDelay, type BusLogger, type ResolvedConsumer } from './policy.js';
import { SPILL_HEADER } from './jetstream-spill.js';
import type { BusMessage, MessageHandler } from './types.js';

/**
 * How long one pull waits for messages before it is renewed (nats.js's own
 * default). The server sends an idle heartbeat every half of it; at 5 s, an
 * idle service renewed each pull every 5 s and heard a heartbeat every 2.5 s,
 * most of what nats-server and the quiet services did at rest. A longer pull
 * notices no later that the server went away: on a reconnect nats.js checks
 * the consumer and pulls again at once, a consumer's leader change or
 * deletion ends the pull with a 409 at once, and two missed heartbeats end it.
 */
const FETCH_EXPIRES_MS = 30_000;
/**
 * Acks wait this long to leave together: one socket write (and one read on the
 * server) for all the messages handled meanwhile, instead of one each. A crash
 * in between redelivers them, as it would a message whose handler was running:
 * consumers are idempotent.
 */
const ACK_DELAY_MS = 20;

/**
 * One consume(): pulls only as many messages as it has free handler slots, so
 * nothing waits in a client buffer while its ack wait runs, and with
 * concurrency 1 messages are handled in stream order.
 */
export class PullLoop {
  private stopped = false;
  private inflight = 0;
  private readonly tasks = new Set<Promise<void>>();
  private batch: ConsumerMessages | undefined;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private acks: JsMsg[] = [];
  private ackTimer: NodeJS.Timeout | undefined;

  constructor(
    private consumer: Consumer | undefined,
    private readonly open: () => Promise<Consumer>,
    private readonly c: ResolvedConsumer,
    private readonly handler: MessageHandler,
    private readonly log: BusLogger,
    private readonly deadLetter: (m: JsMsg, deliveries: number, err: unknown) => Promise<void>,
    /** The message's payload: its data, or the spilled object its headers name. */
    private readonly payload: (m: JsMsg) => Promise<Uint8Array>,
  ) {}

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.batch?.stop();
    this.wake?.();
    await this.loop;
    while (this.tasks.size > 0) await Promise.all([...this.tasks]);
    this.flushAcks();
  }

  private ack(m: JsMsg): void {
    this.acks.push(m);
    this.ackTimer ??= setTimeout(this.flushAcks, ACK_DELAY_MS);
  }

  /** In one synchronous loop: nats.js writes everything published in one microtask at once. */
  private readonly flushAcks = (): void => {
    clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    const acks = this.acks;
    this.acks = [];
    for (const m of acks) m.ack();
  };

  private async run(): Promise<void> {
    while (!this.stopped) {
      if (this.inflight >= this.c.concurrency) {
        await this.pause();
        continue;
      }
      try {
        this.consumer ??= await this.open();
        if (this.stopped) break;
        this.batch = await this.consumer.fetch({ max_messages: this.c.concurrency - this.inflight, expires: FETCH_EXPIRES_MS });
        if (this.stopped) this.batch.stop();
        const started = Date.now();
        let got = 0;
        for await (const m of this.batch) {
          got++;
          // Delivered after stop(): hand it straight back for another member.
          if (this.stopped) m.nak();
          else this.dispatch(m);
        }
        // A pull that ends at once and empty is a refusal the client did not throw: don't spin.
        if (got === 0 && !this.stopped && Date.now() - started < 100) await this.pause(250);
      } catch (err) {
        if (this.stopped) break;
        // Reopen next time: the consumer may have been deleted or recreated.
        this.consumer = undefined;
        this.log.warn(
          { stream: this.c.stream, durable: this.c.durable, err: errorMessage(err) },
          'bus pull failed; retrying',
        );
        await this.pause(1000);
      } finally {
        this.batch = undefined;
      }
    }
  }

  /** Wait for a free slot (or stop), or at most `ms`. */
  private pause(ms?: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = ms !== undefined ? setTimeout(done, ms) : undefined;
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = () => {
        this.wake = undefined;
        done();
      };
    });
  }

  private dispatch(m: JsMsg): void {
    this.inflight++;
    const task = this.handle(m).finally(() => {
      this.inflight--;
      this.tasks.delete(task);
      this.wake?.();
    });
    this.tasks.add(task);
  }

  private async handle(m: JsMsg): Promise<void> {
    const deliveryCount = m.info.deliveryCount;
    let retryMs: number | undefined;
    try {
      const bm: BusMessage = {
        subject: m.subject,
        data: await this.payload(m),
        seq: m.seq,
        msgId: m.headers?.get('Nats-Msg-Id') || undefined,
        deliveryCount,
        ...busHeaders(m),
        working: () => m.working(),
      };
      retryMs = retryDelay(await this.handler(bm));
    } catch (err) {
      if (deliveryCount >= this.c.maxDeliver) {
        try {
          await this.deadLetter(m, deliveryCount, err);
          m.term();
          return;
        } catch (dlqErr) {
          this.log.warn(
            { stream: this.c.stream, durable: this.c.durable, seq: m.seq, err: errorMessage(dlqErr) },
            'dead-letter publish failed; will redeliver',
          );
        }
      }
      m.nak(backoffDelay(this.c.backoffMs, deliveryCount));
      return;
    }
    if (retryMs !== undefined) m.nak(retryMs);
    else this.ack(m);
  }
}

/** The `Dws-*` headers of a message (dead-letter metadata), as the port exposes them. */
function busHeaders(m: JsMsg): { headers?: Record<string, string> } {
  const h = m.headers;
  if (!h) return {};
  let out: Record<string, string> | undefined;
  for (const k of h.keys()) {
    if (k.startsWith('Dws-') && k !== SPILL_HEADER) (out ??= {})[k] = h.get(k);
  }
  return out ? { headers: out } : {};
}
