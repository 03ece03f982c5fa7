import { createHash } from 'node:crypto';
import { request } from 'undici';
import type { Bus, Subscription } from '@dws/bus';
import type { Config } from '@dws/config';
import type { Database } from '@dws/db';
import type { Logger } from '@dws/log';
import { unseal } from '@dws/protocol';
import { fromBinary, StepHandoffSchema, type StepHandoff } from '@dws/proto';
import { counter, PollLoop, resolveStepMessage, streams, subjects, type Outbox } from '@dws/runtime';
import {
  CACHE_TTL_MS,
  cacheKey,
  classifyStatus,
  InferRequestError,
  parseInferRequest,
  ProviderAnswerError,
  providerError,
  providerRequest,
  readResponse,
  retryAfterMs,
  type ModelRequest,
  type ProviderConfig,
  type ProviderKind,
  type Usage,
} from '../domain/inference.js';
import { workspaceProvidersSealed } from '../store/workspaces.js';
import { SpanKind } from '@dws/telemetry';
import { traced } from './invoke-trace.js';

const dec = new TextDecoder();

/** Calls of one model request before its step fails (429, 5xx, timeouts, refused connections). */
const MAX_ATTEMPTS = 5;
/** Backoff between attempts: 0.5 s doubling, capped; a provider's retry-after wins up to RETRY_AFTER_CAP_MS. */
const BACKOFF_BASE_MS = 500;
const BACKOFF_CAP_MS = 20_000;
const RETRY_AFTER_CAP_MS = 20_000;
/** The hand-off's ack wait; a model call can take longer, so the handler says it is working every third of it. */
const ACK_WAIT_MS = 30_000;

const inferences = counter('dws_invoker_inferences_total', 'Infer steps answered, by outcome (called, cached, stored: a redelivery resent, failed).');

/** A chat call's `{ text, response }`, an embeddings call's `{ embeddings, response }`, or the step error. */
type Outcome = { data: Record<string, unknown>; usage: Usage } | { error: string };

export interface InferDeps {
  bus: Bus;
  db: Database;
  log: Logger;
  outbox: Outbox;
  /** The environment's providers; a workspace's own (sealed with sealKey) win field by field. */
  providers: Record<ProviderKind, ProviderConfig>;
  sealKey: Buffer;
  timeoutMs: number;
  /** Backoff base between attempts (tests shorten it). @default 500 */
  backoffBaseMs?: number;
}

/** How often each replica drops expired cache entries, and how many per statement (no long lock). */
const CACHE_PRUNE_MS = 10 * 60 * 1000;
const CACHE_PRUNE_BATCH = 1000;

/** Expired inference cache entries go, in small batches, on every replica (SKIP LOCKED: no two take the same rows). */
export function pruneInferenceCache(d: { db: Database; log: Logger }): PollLoop {
  const loop = new PollLoop(
    async () => {
      for (;;) {
        const gone = await d.db.query(
          `delete from invoker.inference_cache where (workspace_id, key) in (
             select workspace_id, key from invoker.inference_cache where expires_at <= now() limit $1 for update skip locked)
           returning 1`,
          [CACHE_PRUNE_BATCH],
        );
        if (gone.length < CACHE_PRUNE_BATCH || loop.stopping) return;
      }
    },
    { pollMs: CACHE_PRUNE_MS, onError: (err) => d.log.warn({ err }, 'pruning the inference cache failed') },
  );
  return loop;
}

/** The service-wide providers of the environment (CONTRACT: SERVICE_ANTHROPIC_*, SERVICE_OPENAI_*). */
export function providersOf(cfg: Config): Record<ProviderKind, ProviderConfig> {
  return {
    anthropic: { baseUrl: cfg.SERVICE_ANTHROPIC_BASE_URL, apiKey: cfg.SERVICE_ANTHROPIC_API_KEY },
    openai: { baseUrl: cfg.SERVICE_OPENAI_BASE_URL, apiKey: cfg.SERVICE_OPENAI_API_KEY },
  };
}

/**
 * Infer hand-offs (`invoker.cmd.infer`, from the scheduler's outbox): make the
 * model call the runner stated and complete the step with ResolveStep
 * `{ text, response }` and its usage, or with a step error. The answer is
 * stored per (run, step) with the ResolveStep in one transaction, so a
 * redelivered hand-off resends it and never calls the model again. A crash
 * after the call and before that commit calls it once more.
 */
export function consumeInferences(d: InferDeps): Promise<Subscription> {
  return d.bus.consume(
    // Retries with backoff happen inside the handler; working() keeps the message ours meanwhile.
    { stream: streams.invokerCmds.name, durable: 'invoker-infer', filterSubject: subjects.requestInference, concurrency: 16, ackWaitMs: ACK_WAIT_MS },
    async (msg) => {
      const h = fromBinary(StepHandoffSchema, msg.data);
      const stored = await d.db.query<{ outcome: Outcome }>('select outcome from invoker.inferences where run_id = $1 and step_id = $2', [h.runId, h.stepId]);
      let outcome = stored[0]?.outcome;
      if (outcome) inferences.inc({ outcome: 'stored' });
      if (!outcome) {
        const beat = setInterval(() => msg.working(), ACK_WAIT_MS / 3);
        try {
          // A span under the run's root (docs/tracing.md): the model call of this Infer step.
          outcome = await traced('step.infer', { runId: h.runId, kind: SpanKind.CLIENT, attributes: { 'dws.run.id': h.runId, 'dws.step.name': h.stepName } }, async (span) => {
            const o = await call(d, h);
            span?.setAttributes(
              'error' in o
                ? { 'dws.infer.error': o.error }
                : { 'dws.infer.model': o.usage.model ?? '', 'dws.infer.tokens_in': o.usage.tokensIn ?? 0, 'dws.infer.tokens_out': o.usage.tokensOut ?? 0, 'dws.infer.cache_hit': o.usage.cacheHit === true },
            );
            return o;
          });
          inferences.inc({ outcome: 'error' in outcome ? 'failed' : outcome.usage.cacheHit ? 'cached' : 'called' });
        } finally {
          clearInterval(beat);
        }
      }
      const pending = await d.db.tx(async (tx) => {
        await tx.query(
          `insert into invoker.inferences (run_id, step_id, workspace_id, outcome) values ($1, $2, $3, $4::jsonb) on conflict (run_id, step_id) do nothing`,
          [h.runId, h.stepId, h.workspaceId, JSON.stringify(outcome)],
        );
        return d.outbox.enqueue(tx, [resolveStepMessage(h, outcome)]);
      });
      await d.outbox.afterCommit(pending);
    },
  );
}

async function call(d: InferDeps, h: StepHandoff): Promise<Outcome> {
  let data: unknown;
  try {
    data = (JSON.parse(dec.decode(h.opcode)) as { data?: unknown }).data;
  } catch {
    return { error: 'Infer hand-off without a readable opcode.' };
  }
  let req;
  try {
    req = parseInferRequest(data);
  } catch (err) {
    if (err instanceof InferRequestError) return { error: err.message };
    throw err;
  }
  const key = cacheKey(req, (text) => createHash('sha256').update(text).digest('hex'));
  if (key !== undefined) {
    const hit = await d.db.query<{ outcome: { data: { text: string; response: unknown }; usage: Usage } }>(
      'select outcome from invoker.inference_cache where workspace_id = $1 and key = $2 and expires_at > now()',
      [h.workspaceId, key],
    );
    if (hit[0]) return { data: hit[0].outcome.data, usage: { ...hit[0].outcome.usage, latencyMs: 0, cacheHit: true } };
  }
  const cfg = await providerFor(d, h.workspaceId, req.provider);
  if (!cfg.apiKey) {
    return { error: `No ${req.provider} API key is configured (the workspace's providers, or SERVICE_${req.provider.toUpperCase()}_API_KEY).` };
  }
  const answered = await callProvider(d, h, req, cfg);
  if (key !== undefined && 'data' in answered) {
    await d.db.query(
      `insert into invoker.inference_cache (workspace_id, key, outcome, expires_at) values ($1, $2, $3::jsonb, now() + ($4::bigint * interval '1 millisecond'))
       on conflict (workspace_id, key) do update set outcome = excluded.outcome, expires_at = excluded.expires_at, created_at = now()`,
      [h.workspaceId, key, JSON.stringify(answered), req.ttlMs ?? CACHE_TTL_MS],
    );
    return { data: answered.data, usage: { ...answered.usage, cacheHit: false } };
  }
  return answered;
}

/** The workspace's own provider settings (admin API) over the environment's, field by field. */
async function providerFor(d: InferDeps, workspaceId: string, kind: ProviderKind): Promise<ProviderConfig> {
  const sealed = await workspaceProvidersSealed(d.db, workspaceId);
  if (!sealed) return d.providers[kind];
  const own = (JSON.parse(unseal(sealed, d.sealKey)) as Partial<Record<ProviderKind, Partial<ProviderConfig>>>)[kind];
  return { ...d.providers[kind], ...own };
}

/** The provider's answer to `req`, retried over 429 / 5xx / transport errors. */
async function callProvider(d: InferDeps, h: StepHandoff, req: ModelRequest, cfg: ProviderConfig): Promise<Outcome> {
  const http = providerRequest(req, cfg);
  let last = '';
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const t0 = Date.now();
    let waitMs: number | undefined;
    try {
      const res = await request(http.url, { method: 'POST', headers: http.headers, body: http.body, headersTimeout: d.timeoutMs, bodyTimeout: d.timeoutMs });
      const text = await res.body.text();
      const kind = classifyStatus(res.statusCode);
      if (kind === 'ok') {
        try {
          const { result, usage } = readResponse(req, JSON.parse(text), Date.now() - t0);
          return { data: result, usage: { model: req.model, ...usage } };
        } catch (err) {
          if (err instanceof ProviderAnswerError) return { error: err.message };
          return { error: `The ${req.provider} provider answered ${res.statusCode} with a body that is not JSON.` };
        }
      }
      last = providerError(req.provider, res.statusCode, text);
      if (kind === 'fail') return { error: last };
      waitMs = retryAfterMs(res.headers['retry-after'], Date.now(), RETRY_AFTER_CAP_MS);
    } catch (err) {
      last = `The ${req.provider} provider could not be reached: ${(err as Error).message}`;
    }
    if (attempt === MAX_ATTEMPTS) break;
    const backoff = Math.min(BACKOFF_CAP_MS, (d.backoffBaseMs ?? BACKOFF_BASE_MS) * 2 ** (attempt - 1));
    d.log.warn({ runId: h.runId, step: h.stepName, attempt, err: last }, 'model call failed; retrying');
    await new Promise((r) => setTimeout(r, waitMs ?? backoff));
  }
  return { error: `${last} (gave up after ${MAX_ATTEMPTS} attempts)` };
}
