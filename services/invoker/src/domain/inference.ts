/**
 * The Infer opcode's model call, as data (CONTRACT.md "AI steps"): the
 * request a runner stated, the HTTP request each provider kind takes, and
 * what its answer means for the step. No I/O here.
 */

export type ProviderKind = 'anthropic' | 'openai';

export interface ProviderConfig {
  baseUrl: string;
  apiKey: string | undefined;
}

/** A runner's model request, checked. */
export interface InferRequest {
  provider: ProviderKind;
  model: string;
  messages: { role: 'user' | 'assistant'; content: string }[];
  system?: string;
  temperature?: number;
  maxTokens?: number;
  /** Inference cache lifetime of this answer (SPEC: 24 h by default). */
  ttlMs?: number;
  /** Fields the runner added that go to the provider as they are. */
  extra: Record<string, unknown>;
}

/** Fields of the opcode's data that are ours, not the provider's. */
const OURS = new Set(['provider', 'model', 'messages', 'prompt', 'system', 'temperature', 'maxTokens', 'ttlMs', 'kind', 'output']);
/** Anthropic's Messages API requires max_tokens; the runner may leave it out. */
const DEFAULT_MAX_TOKENS = 1024;

export class InferRequestError extends Error {}

/** The opcode's `data` as a request, or an InferRequestError saying what is wrong (the step fails; no retry helps). */
export function parseInferRequest(data: unknown): InferRequest {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) throw new InferRequestError('Infer needs data: an object with model and messages.');
  const d = data as Record<string, unknown>;
  if (d.kind === 'embed') throw new InferRequestError('step.ai.embed is not available yet: this service makes chat calls only (Messages, Chat Completions).');
  // Checking the answer against a schema (and re-asking) is not built: refuse rather than return unchecked output.
  if (d.output !== undefined) throw new InferRequestError('An output schema (checked output with re-asks) is not available yet: leave output out and validate the text yourself.');
  const provider = d.provider ?? 'anthropic';
  if (provider !== 'anthropic' && provider !== 'openai') throw new InferRequestError(`Infer provider must be "anthropic" or "openai", not ${JSON.stringify(provider)}.`);
  if (typeof d.model !== 'string' || d.model === '') throw new InferRequestError('Infer needs a model (a non-empty string).');
  let messages: InferRequest['messages'];
  if (d.messages !== undefined) {
    if (!Array.isArray(d.messages) || d.messages.length === 0) throw new InferRequestError('Infer messages must be a non-empty array.');
    messages = d.messages.map((m, i) => {
      const msg = m as { role?: unknown; content?: unknown };
      if ((msg?.role !== 'user' && msg?.role !== 'assistant') || typeof msg.content !== 'string') {
        throw new InferRequestError(`Infer messages[${i}] must be { role: "user" | "assistant", content: string }.`);
      }
      return { role: msg.role, content: msg.content };
    });
  } else if (typeof d.prompt === 'string') {
    messages = [{ role: 'user', content: d.prompt }];
  } else {
    throw new InferRequestError('Infer needs messages (or a prompt).');
  }
  if (d.system !== undefined && typeof d.system !== 'string') throw new InferRequestError('Infer system must be a string.');
  if (d.temperature !== undefined && (typeof d.temperature !== 'number' || !Number.isFinite(d.temperature))) throw new InferRequestError('Infer temperature must be a number.');
  if (d.maxTokens !== undefined && (!Number.isInteger(d.maxTokens) || (d.maxTokens as number) <= 0)) throw new InferRequestError('Infer maxTokens must be a positive integer.');
  if (d.ttlMs !== undefined && (!Number.isInteger(d.ttlMs) || (d.ttlMs as number) <= 0)) throw new InferRequestError('Infer ttlMs must be a positive integer (ms).');
  const extra: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(d)) if (!OURS.has(k)) extra[k] = v;
  return {
    provider,
    model: d.model,
    messages,
    ...(d.system !== undefined ? { system: d.system as string } : {}),
    ...(d.temperature !== undefined ? { temperature: d.temperature as number } : {}),
    ...(d.maxTokens !== undefined ? { maxTokens: d.maxTokens as number } : {}),
    ...(d.ttlMs !== undefined ? { ttlMs: d.ttlMs as number } : {}),
    extra,
  };
}

/** SPEC Limits: the inference cache keeps an answer 24 hours unless ttlMs says otherwise. */
export const CACHE_TTL_MS = 24 * 60 * 60 * 1000;
/** SPEC Limits: only a request with a temperature, at most 0.2, may be answered from the cache. */
export const CACHE_MAX_TEMPERATURE = 0.2;

/**
 * The cache key of a request: a SHA-256 over its canonical JSON (keys
 * sorted at every depth), so the same request in another key order hits;
 * undefined when the request is not eligible (no temperature, or above 0.2).
 */
export function cacheKey(r: InferRequest, sha256: (text: string) => string): string | undefined {
  if (r.temperature === undefined || r.temperature > CACHE_MAX_TEMPERATURE) return undefined;
  const { ttlMs: _ttl, ...request } = r;
  return sha256(canonicalJson(request));
}

function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

/** The provider's HTTP request for `r`: path under the base URL, headers, JSON body. */
export function providerRequest(r: InferRequest, cfg: ProviderConfig): { url: string; headers: Record<string, string>; body: string } {
  const base = cfg.baseUrl.replace(/\/+$/, '');
  if (r.provider === 'anthropic') {
    return {
      url: `${base}/v1/messages`,
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...(cfg.apiKey ? { 'x-api-key': cfg.apiKey } : {}) },
      body: JSON.stringify({
        ...r.extra,
        model: r.model,
        max_tokens: r.maxTokens ?? DEFAULT_MAX_TOKENS,
        messages: r.messages,
        ...(r.system !== undefined ? { system: r.system } : {}),
        ...(r.temperature !== undefined ? { temperature: r.temperature } : {}),
      }),
    };
  }
  return {
    url: `${base}/chat/completions`,
    headers: { 'content-type': 'application/json', ...(cfg.apiKey ? { authorization: `Bearer ${cfg.apiKey}` } : {}) },
    body: JSON.stringify({
      ...r.extra,
      model: r.model,
      messages: [...(r.system !== undefined ? [{ role: 'system', content: r.system }] : []), ...r.messages],
      ...(r.maxTokens !== undefined ? { max_tokens: r.maxTokens } : {}),
      ...(r.temperature !== undefined ? { temperature: r.temperature } : {}),
    }),
  };
}

/** SPEC Usage of one call. */
export interface Usage {
  model?: string;
  tokensIn?: number;
  tokensOut?: number;
  latencyMs?: number;
  /** Present only when the cache was engaged (SPEC Usage). */
  cacheHit?: boolean;
}

/** A provider's 2xx body as the step's result `{ text, response }` and its usage. */
export function readResponse(provider: ProviderKind, body: unknown, latencyMs: number): { result: { text: string; response: unknown }; usage: Usage } {
  const b = (body ?? {}) as Record<string, any>;
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
  let text = '';
  let tokensIn: number | undefined;
  let tokensOut: number | undefined;
  if (provider === 'anthropic') {
    const blocks: unknown[] = Array.isArray(b.content) ? b.content : [];
    text = blocks
      .filter((c): c is { type: string; text: string } => (c as { type?: unknown })?.type === 'text' && typeof (c as { text?: unknown }).text === 'string')
      .map((c) => c.text)
      .join('');
    tokensIn = num(b.usage?.input_tokens);
    tokensOut = num(b.usage?.output_tokens);
  } else {
    const content = b.choices?.[0]?.message?.content;
    text = typeof content === 'string' ? content : '';
    tokensIn = num(b.usage?.prompt_tokens);
    tokensOut = num(b.usage?.completion_tokens);
  }
  const usage: Usage = { latencyMs };
  if (typeof b.model === 'string') usage.model = b.model;
  if (tokensIn !== undefined) usage.tokensIn = tokensIn;
  if (tokensOut !== undefined) usage.tokensOut = tokensOut;
  return { result: { text, response: body }, usage };
}

/** What a provider's status means: done, retry later (429, 5xx), or a step error (another 4xx: no retry helps). */
export function classifyStatus(status: number): 'ok' | 'retry' | 'fail' {
  if (status >= 200 && status < 300) return 'ok';
  if (status === 429 || status === 408 || status === 409 || status >= 500) return 'retry';
  return 'fail';
}

/** `retry-after` (seconds, or an HTTP date) in ms, capped; undefined when absent or unreadable. */
export function retryAfterMs(header: string | string[] | undefined, nowMs: number, capMs: number): number | undefined {
  const v = Array.isArray(header) ? header[0] : header;
  if (v === undefined || v.trim() === '') return undefined;
  const secs = Number(v);
  if (Number.isFinite(secs) && secs >= 0) return Math.min(secs * 1000, capMs);
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.min(Math.max(0, at - nowMs), capMs);
}

/** The provider's error body in one line for the step error (its own message when it has one). */
export function providerError(provider: ProviderKind, status: number, body: string): string {
  let detail = body.slice(0, 500);
  try {
    const j = JSON.parse(body) as { error?: { message?: unknown } | string };
    const m = typeof j.error === 'string' ? j.error : j.error?.message;
    if (typeof m === 'string') detail = m;
  } catch {
    // not JSON: the text as it came
  }
  return `The ${provider} provider answered ${status}: ${detail}`.slice(0, 1000);
}
