import { request } from 'undici';
import type { Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { ids } from '@dws/runtime';
import { afterAttempt, ATTEMPT_TIMEOUT_MS, SNIPPET_BYTES, type AttemptOutcome } from '../domain/attempts.js';

interface DueDelivery {
  id: string;
  url: string;
  payload: unknown;
  attempt_count: number;
  max_attempts: number;
}

/**
 * Sends due deliveries. Any replica claims a batch with SKIP LOCKED; the
 * claim is a lease (a crashed sender's deliveries come back after it), and
 * each attempt is logged before the delivery's new status is written.
 */
export class Sender {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private again = false;
  private stopped = false;
  private inflight: Promise<void> = Promise.resolve();

  constructor(private readonly d: { db: Database; log: Logger; pollMs?: number }) {}

  start(): void {
    const tick = () => {
      if (this.stopped) return;
      this.kick();
      this.timer = setTimeout(tick, this.d.pollMs ?? 500);
    };
    tick();
  }

  kick(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.inflight = this.sendDue()
      .catch((err: unknown) => this.d.log.warn({ err }, 'sending webhooks failed'))
      .finally(() => {
        this.running = false;
        if (this.again && !this.stopped) {
          this.again = false;
          this.kick();
        }
      });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.inflight;
  }

  private async sendDue(): Promise<void> {
    for (;;) {
      const due = await this.d.db.query<DueDelivery>(
        `update webhook_dispatcher.deliveries d set status = 'delivering', next_attempt_at = now() + interval '60 seconds', updated_at = now()
          where d.id in (select id from webhook_dispatcher.deliveries
                          where status in ('pending', 'failed', 'delivering') and next_attempt_at <= now()
                          order by next_attempt_at limit 20 for update skip locked)
          returning d.id, d.url, d.payload, d.attempt_count, d.max_attempts`,
      );
      if (due.length === 0 || this.stopped) return;
      await Promise.all(due.map((x) => this.attempt(x)));
    }
  }

  private async attempt(dv: DueDelivery): Promise<void> {
    const attempt = dv.attempt_count + 1;
    const started = Date.now();
    let outcome: AttemptOutcome;
    let statusCode: number | undefined;
    let snippet: string | undefined;
    let error: string | undefined;
    try {
      const res = await request(dv.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'dws-webhooks/1' },
        body: JSON.stringify(dv.payload),
        headersTimeout: ATTEMPT_TIMEOUT_MS,
        bodyTimeout: ATTEMPT_TIMEOUT_MS,
      });
      statusCode = res.statusCode;
      const text = await res.body.text();
      snippet = text.slice(0, SNIPPET_BYTES);
      outcome = statusCode >= 200 && statusCode < 300 ? 'succeeded' : 'http_error';
    } catch (err) {
      const e = err as { code?: string; message?: string };
      outcome = e.code === 'UND_ERR_HEADERS_TIMEOUT' || e.code === 'UND_ERR_BODY_TIMEOUT' ? 'timeout' : 'connection_error';
      error = e.message ?? String(err);
    }
    const next = afterAttempt(outcome, statusCode, attempt, dv.max_attempts);
    await this.d.db.tx(async (tx) => {
      await tx.query(
        `insert into webhook_dispatcher.attempts (id, delivery_id, attempt, outcome, status_code, response_snippet, error, duration_ms)
         values ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [ids.generic('att'), dv.id, attempt, outcome, statusCode ?? null, snippet ?? null, error ?? null, Date.now() - started],
      );
      await tx.query(
        `update webhook_dispatcher.deliveries set status = $2, attempt_count = $3, last_status_code = coalesce($4, last_status_code),
                next_attempt_at = case when $5::int is null then null else now() + ($5::int * interval '1 millisecond') end, updated_at = now()
          where id = $1`,
        [dv.id, next.status, attempt, statusCode ?? null, next.retryInMs ?? null],
      );
    });
  }
}
