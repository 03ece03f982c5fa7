import { counter } from './metrics.js';
import { msUntil, PollLoop } from './poll-loop.js';
import { bigserial, customType, text, timestamp, type PgSchema } from 'drizzle-orm/pg-core';
import type { Bus } from '@dws/bus';
import type { Database } from '@dws/db';
import type { Logger } from '@dws/log';

const bytea = customType<{ data: Uint8Array; driverData: Uint8Array }>({ dataType: () => 'bytea' });

/** The outbox table, declared in each service's own schema (include it in its schema.ts). */
export function outboxTable(schema: PgSchema) {
  return schema.table('outbox', {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    subject: text('subject').notNull(),
    msgId: text('msg_id').notNull(),
    payload: bytea('payload').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    claimedUntil: timestamp('claimed_until', { withTimezone: true }),
  });
}

export interface OutboxMessage {
  subject: string;
  msgId: string;
  payload: Uint8Array;
}

/**
 * Transactional outbox: messages are written in the same transaction as the
 * state that implies them, published after commit, and deleted once the bus
 * has stored them. A crash between commit and publish leaves the row; the
 * relay publishes it later (consumers dedupe on msgId), so a lost message
 * only delays. The relay does not poll: it sleeps until the oldest row is
 * `staleMs` old (or `pollMs`, for rows another replica writes), woken by a
 * publish of its own that failed.
 */
export class Outbox {
  private readonly table: string;
  private readonly doneIds: number[] = [];
  private flushTimer: NodeJS.Timeout | undefined;
  private readonly relay: PollLoop;
  private deleting: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly opts: {
      db: Database;
      bus: Bus;
      schema: string;
      log: Logger;
      /** The longest the relay sleeps: how late it sees a row a replica that died left. @default 3000 */
      pollMs?: number;
      /** Rows this old are the relay's (the eager path had its chance). @default 3000 */
      staleMs?: number;
      /**
       * Stream subject -> a core request subject its consumer also answers once it
       * has applied the message. afterCommit tries that first (one hop instead of a
       * stream write, an ack, a delivery and another ack) and publishes to the stream
       * when the request fails or is refused; the relay always publishes. Only for
       * consumers that are idempotent on the message (a lost answer means both run).
       */
      direct?: Readonly<Record<string, string>>;
    },
  ) {
    this.table = `"${opts.schema}".outbox`;
    const staleMs = this.staleMs;
    this.relay = new PollLoop(() => this.relayOnce(), {
      pollMs: opts.pollMs ?? STALE_MS,
      onError: (err) => opts.log.warn({ err }, 'outbox relay failed'),
      // A row is the relay's once stale, or once another replica's claim on it lapsed.
      nextDueInMs: () => msUntil(opts.db, `select min(greatest(created_at + interval '${staleMs} milliseconds', coalesce(claimed_until, created_at))) from ${this.table}`),
    });
  }

  private get staleMs(): number {
    return this.opts.staleMs ?? STALE_MS;
  }

  /** Write messages inside `tx`; returns what `afterCommit` needs to publish them. */
  async enqueue(tx: Database, messages: OutboxMessage[]): Promise<PendingPublish> {
    if (messages.length === 0) return { ids: [], messages };
    const values: string[] = [];
    const params: unknown[] = [];
    for (const m of messages) {
      values.push(`($${params.length + 1}, $${params.length + 2}, $${params.length + 3})`);
      params.push(m.subject, m.msgId, m.payload);
    }
    const rows = await tx.query<{ id: number }>(
      `insert into ${this.table} (subject, msg_id, payload) values ${values.join(', ')} returning id`,
      params,
    );
    return { ids: rows.map((r) => Number(r.id)), messages };
  }

  /**
   * Publish what `enqueue` wrote, once its transaction committed, in order;
   * messages with a direct route go at once, side by side (see `direct`).
   * Failures are left to the relay.
   */
  async afterCommit(pending: PendingPublish): Promise<void> {
    const direct: Promise<void>[] = [];
    for (let i = 0; i < pending.messages.length; i++) {
      const m = pending.messages[i]!;
      const to = this.opts.direct?.[m.subject];
      if (to) {
        direct.push(this.handOver(to, m, pending.ids[i]!));
        continue;
      }
      try {
        await this.opts.bus.publish(m.subject, m.payload, { msgId: m.msgId });
        this.doneIds.push(pending.ids[i]!);
        published.inc({ schema: this.opts.schema, path: 'stream' });
      } catch (err) {
        this.opts.log.warn({ err, subject: m.subject }, 'outbox publish failed; the relay will retry');
        this.relay.within(this.staleMs);
        break;
      }
    }
    await Promise.all(direct);
    this.scheduleDelete();
  }

  /** One message to its consumer by request; to the stream when that fails. */
  private async handOver(to: string, m: OutboxMessage, id: number): Promise<void> {
    let path = 'direct';
    try {
      await this.opts.bus.request(to, m.payload, { timeoutMs: DIRECT_TIMEOUT_MS });
    } catch {
      // Refused (busy), no responder, or no answer in time: the stream carries it, deduped on msgId.
      path = 'stream';
      try {
        await this.opts.bus.publish(m.subject, m.payload, { msgId: m.msgId });
      } catch (err) {
        this.opts.log.warn({ err, subject: m.subject }, 'outbox publish failed; the relay will retry');
        this.relay.within(this.staleMs);
        return;
      }
    }
    this.doneIds.push(id);
    published.inc({ schema: this.opts.schema, path });
  }

  /** Start the fallback relay for rows a crash or a bus outage left behind. */
  start(): void {
    this.relay.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.relay.stop();
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    await this.deleteDone();
  }

  /** Publish rows older than staleMs (the eager path had its chance) and delete them. */
  async relayOnce(): Promise<number> {
    const staleMs = this.staleMs;
    const rows = await this.opts.db.query<{ id: number; subject: string; msg_id: string; payload: Uint8Array }>(
      `update ${this.table} set claimed_until = now() + interval '10 seconds'
        where id in (select id from ${this.table}
                      where created_at < now() - ($1::int * interval '1 millisecond')
                        and (claimed_until is null or claimed_until < now())
                      order by id limit 200 for update skip locked)
        returning id, subject, msg_id, payload`,
      [staleMs],
    );
    rows.sort((a, b) => Number(a.id) - Number(b.id));
    for (const r of rows) {
      await this.opts.bus.publish(r.subject, r.payload, { msgId: r.msg_id });
      this.doneIds.push(Number(r.id));
      published.inc({ schema: this.opts.schema, path: 'relay' });
    }
    await this.deleteDone();
    return rows.length;
  }

  private scheduleDelete(): void {
    // Deletes are batched: one statement per burst instead of one per message.
    if (this.flushTimer || this.stopped) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      void this.deleteDone();
    }, 20);
  }

  private deleteDone(): Promise<void> {
    this.deleting = this.deleting.then(async () => {
      if (this.doneIds.length === 0) return;
      const ids = this.doneIds.splice(0, this.doneIds.length);
      try {
        await this.opts.db.query(`delete from ${this.table} where id = any($1::bigint[])`, [ids]);
      } catch (err) {
        // Rows left behind are republished by the relay; consumers dedupe on msgId.
        this.opts.log.warn({ err }, 'outbox delete failed');
      }
    });
    return this.deleting;
  }
}

const published = counter('dws_outbox_published_total', 'Outbox messages handed on, by service schema and path (direct request, stream publish, relay after a crash or outage).');

/** How old a row is before the relay publishes it, and the longest the relay sleeps. */
const STALE_MS = 3000;

/** How long a direct hand-over may take before the message goes to the stream instead. */
const DIRECT_TIMEOUT_MS = 2000;

export interface PendingPublish {
  ids: number[];
  messages: OutboxMessage[];
}
