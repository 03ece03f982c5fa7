import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { Agent, request } from 'undici';
import type { Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { signInvoke } from '@dws/protocol';
import { ids, PollLoop } from '@dws/runtime';
import { endSpan, headersOf, runContext, SpanKind, tracer, type Span } from '@dws/telemetry';
import { checkUrl, isPrivateAddress } from '../domain/address.js';
import { afterAttempt, ATTEMPT_TIMEOUT_MS, BACKOFF_BASE_MS, SNIPPET_BYTES, type AttemptOutcome } from '../domain/attempts.js';
import type { SealKeyring } from '@dws/protocol';
import { nextDeliveryInMs } from '../store/deliveries.js';

export interface SenderOptions {
  /** Total budget of one attempt: connect, headers and body. @default 10 s (SPEC Limits) */
  attemptTimeoutMs?: number;
  /** First retry delay (later ones x4). @default 5 s */
  backoffBaseMs?: number;
  /** How long a claim holds a delivery; a crashed sender's deliveries are retried after it. @default the attempt timeout + 30 s */
  leaseMs?: number;
  /**
   * The longest sleep between looks for due deliveries. A sender sleeps until
   * its next due retry or lease end and is woken when a delivery is queued
   * here; this bounds how late it sends one another replica queued and left
   * (it crashed). @default 5 s
   */
  pollMs?: number;
}

interface DueDelivery {
  id: string;
  url: string;
  endpoint_id: string | null;
  source_run_id: string | null;
  payload: unknown;
  attempt_count: number;
  max_attempts: number;
}

interface Attempt {
  outcome: AttemptOutcome;
  statusCode?: number;
  snippet?: string;
  error?: string;
}

const BLOCKED = 'EWEBHOOKPRIVATE';

/**
 * The connection's own DNS lookup refuses private addresses, so a name that
 * resolved to a public address for checkUrl and to a private one a moment
 * later (DNS rebinding) cannot reach the service's network.
 */
const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (err, addrs: LookupAddress[]) => {
    if (err) return callback(err, '', 0);
    const bad = addrs.find((a) => isPrivateAddress(a.address));
    if (bad) return callback(Object.assign(new Error(`${hostname} resolves to a private address (${bad.address})`), { code: BLOCKED }), '', 0);
    if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addrs);
    callback(null, addrs[0]!.address, addrs[0]!.family);
  });
};

/**
 * Sends due deliveries. Any replica claims a batch with SKIP LOCKED; the
 * claim is a lease with a token (a crashed sender's deliveries come back
 * after it, and a sender whose lease was taken over writes nothing), and the
 * attempt is logged in the transaction that writes the delivery's status.
 */
export class Sender {
  private readonly loop: PollLoop;
  private readonly agent: Agent;
  private readonly timeoutMs: number;
  private readonly leaseMs: number;

  constructor(
    private readonly d: { db: Database; log: Logger; secrets: SealKeyring; allowPrivate: boolean },
    private readonly opts: SenderOptions = {},
  ) {
    this.timeoutMs = opts.attemptTimeoutMs ?? ATTEMPT_TIMEOUT_MS;
    this.leaseMs = opts.leaseMs ?? this.timeoutMs + 30_000;
    // No redirects are followed (undici's request never does without an interceptor).
    this.agent = new Agent({ connect: d.allowPrivate ? {} : { lookup: guardedLookup } });
    this.loop = new PollLoop(() => this.sendDue(), {
      pollMs: opts.pollMs ?? 5000,
      nextDueInMs: () => nextDeliveryInMs(this.d.db),
      onError: (err) => this.d.log.warn({ err }, 'sending webhooks failed'),
    });
  }

  start(): void {
    this.loop.start();
  }

  kick(): void {
    this.loop.kick();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
    await this.agent.close();
  }

  private async sendDue(): Promise<void> {
    for (;;) {
      if (this.loop.stopping) return;
      const claim = ids.generic('clm');
      const due = await this.d.db.query<DueDelivery>(
        `update webhook_dispatcher.deliveries d set status = 'delivering', claim = $1, next_attempt_at = now() + ($2::int * interval '1 millisecond'), updated_at = now()
          where d.id in (select id from webhook_dispatcher.deliveries
                          where status in ('pending', 'failed', 'delivering') and next_attempt_at <= now()
                          order by next_attempt_at limit 20 for update skip locked)
          returning d.id, d.url, d.endpoint_id, d.source_run_id, d.payload, d.attempt_count, d.max_attempts`,
        [claim, this.leaseMs],
      );
      if (due.length === 0) return;
      await Promise.all(due.map((x) => this.deliver(x, claim)));
    }
  }

  private async deliver(dv: DueDelivery, claim: string): Promise<void> {
    const started = Date.now();
    const attempt = dv.attempt_count + 1;
    const span = attemptSpan(dv, attempt);
    let result: Attempt;
    try {
      result = await this.attempt(dv, span);
    } catch (err) {
      // A secret that cannot be unsealed is the operator's to fix; the delivery retries meanwhile.
      this.d.log.error({ err, deliveryId: dv.id }, 'webhook attempt could not be prepared');
      result = { outcome: 'connection_error', error: 'the endpoint secret could not be unsealed' };
    }
    if (span) {
      span.setAttribute('dws.webhook.outcome', result.outcome);
      if (result.statusCode !== undefined) span.setAttribute('http.response.status_code', result.statusCode);
      endSpan(span, result.outcome === 'succeeded' || result.outcome === 'skipped' ? undefined : (result.error ?? `HTTP ${result.statusCode}`));
    }
    const next = afterAttempt(result.outcome, result.statusCode, attempt, dv.max_attempts, Math.random, this.opts.backoffBaseMs ?? BACKOFF_BASE_MS);
    await this.d.db.tx(async (tx) => {
      const held = await tx.query(
        `update webhook_dispatcher.deliveries set status = $3, attempt_count = $4, last_status_code = coalesce($5, last_status_code), claim = null,
                next_attempt_at = case when $6::int is null then null else now() + ($6::int * interval '1 millisecond') end, updated_at = now()
          where id = $1 and claim = $2 returning id`,
        [dv.id, claim, next.status, attempt, result.statusCode ?? null, next.retryInMs ?? null],
      );
      // The lease ran out and another sender owns the delivery now: its attempt is the one on record.
      if (held.length === 0) return;
      await tx.query(
        `insert into webhook_dispatcher.attempts (id, delivery_id, attempt, outcome, status_code, response_snippet, error, duration_ms)
         values ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [ids.generic('att'), dv.id, attempt, result.outcome, result.statusCode ?? null, result.snippet ?? null, result.error ?? null, Date.now() - started],
      );
    });
  }

  /**
   * One POST: signed when the delivery belongs to an endpoint, bounded in
   * time and in what it reads back; with tracing on, carrying the attempt's
   * span as `traceparent` (the receiver's spans join the run's trace).
   */
  private async attempt(dv: DueDelivery, span: Span | undefined): Promise<Attempt> {
    let url = dv.url;
    let secret: string | undefined;
    if (dv.endpoint_id) {
      const rows = await this.d.db.query<{ url: string; secret_sealed: string; seal_key_id: string }>(
        'select url, secret_sealed, seal_key_id from webhook_dispatcher.endpoints where id = $1',
        [dv.endpoint_id],
      );
      if (!rows[0]) return { outcome: 'skipped', error: 'the endpoint was deleted' };
      url = rows[0].url;
      secret = this.d.secrets.open(rows[0].secret_sealed, rows[0].seal_key_id);
    }
    const problem = await checkUrl(url, this.d.allowPrivate);
    if (problem) return { outcome: 'skipped', error: problem.message };
    const body = JSON.stringify(dv.payload);
    // Only what the partner needs: no credential of the service rides along.
    const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'dws-webhooks/1', 'x-service-delivery-id': dv.id };
    if (secret !== undefined) headers['x-service-signature'] = signInvoke(secret, body);
    if (span) Object.assign(headers, headersOf(span));
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(new Error(`no complete answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    try {
      const res = await request(url, { method: 'POST', headers, body, signal: abort.signal, dispatcher: this.agent });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        chunks.push(chunk);
        size += chunk.length;
        // Read no further than the snippet bound; leaving the loop discards the rest of the body.
        if (size >= SNIPPET_BYTES) break;
      }
      const snippet = Buffer.concat(chunks).subarray(0, SNIPPET_BYTES).toString('utf8').replace(/\0/g, '');
      const ok = res.statusCode >= 200 && res.statusCode < 300;
      return { outcome: ok ? 'succeeded' : 'http_error', statusCode: res.statusCode, snippet };
    } catch (err) {
      if (abort.signal.aborted) return { outcome: 'timeout', error: `no complete answer within ${this.timeoutMs} ms` };
      const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } };
      if (e.code === BLOCKED || e.cause?.code === BLOCKED) return { outcome: 'skipped', error: e.cause?.message ?? e.message ?? 'private address' };
      return { outcome: 'connection_error', error: e.message ?? String(err) };
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * The span of one delivery attempt (tracing on): a client span in the trace
 * of the run the delivery came from (a ctx.webhook.send step, a lifecycle
 * event), or of its own when it has none.
 */
function attemptSpan(dv: DueDelivery, attempt: number): Span | undefined {
  const t = tracer();
  if (!t) return undefined;
  let host = '';
  try {
    host = new URL(dv.url).host;
  } catch {
    /* checkUrl reports it */
  }
  return t.startSpan(
    'webhook.deliver',
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'dws.webhook.delivery.id': dv.id,
        'dws.webhook.attempt': attempt,
        'server.address': host,
        ...(dv.source_run_id ? { 'dws.run.id': dv.source_run_id } : {}),
      },
    },
    dv.source_run_id ? runContext(dv.source_run_id) : undefined,
  );
}
