/**
 * The Infer opcode's model call, as data (CONTRACT.md "AI steps"): the
 * request a runner stated, the HTTP request each provider kind takes, and
 * what its answer means for the step. No I/O here.
 *
 * Why not the providers' official clients (`@anthropic-ai/sdk`, `openai`):
 * the step stores the provider's answer body as it came and passes unknown
 * request fields through untouched, and the retry policy (which statuses,
 * `retry-after`, the attempt cap, keeping the hand-off alive meanwhile) is
 * the service's, decided once for both kinds. The clients retry on their own
 * terms and type away unknown fields; one plain HTTP request per attempt,
 * shaped as each provider's API reference shows, keeps those ours.
 */

export type ProviderKind = 'anthropic' | 'openai';

export interface ProviderConfig {
  baseUrl: string;
  apiKey: string | undefined;
}

/** A runner's chat request (step.ai.generate / infer), checked. */
export interface InferRequest {
  kind?: undefined;
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

/** A runner's embeddings request (step.ai.embed, one durable batch), checked: openai-kind only. */
export interface EmbedRequest {
  kind: 'embed';
  provider: 'openai';
  model: string;
  inputs: string[];
  /** Never cached (no temperature), so no cache lifetime. */
  ttlMs?: undefined;
  /** Fields the runner added (dimensions, encoding_format, user, ...) that go to the provider as they are. */
  extra: Record<string, unknown>;
}

/** What an Infer opcode asks for: a chat call or an embeddings call. */
export type ModelRequest = InferRequest | EmbedRequest;

/** Fields of the opcode's data that are ours, not the provider's. */
const OURS = new Set(['provider', 'model', 'messages', 'prompt', 'system', 'temperature', 'maxTokens', 'ttlMs', 'kind', 'output']);
/** Anthropic's Messages API requires max_tokens; the runner may leave it out. */
const DEFAULT_MAX_TOKENS = 1024;

export class InferRequestError extends Error {}

/** The opcode's `data` as a request, or an InferRequestError saying what is wrong (the step fails; no retry helps). */
export function parseInferRequest(data: unknown): ModelRequest {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) throw new InferRequestError('Infer needs data: an object with model and messages.');
  const d = data as Record<string, unknown>;
  if (d.kind === 'embed') return parseEmbedRequest(d);
  // The service never checks an answer against a schema: the runner does (step.ai.generate's output, re-asks included).
  // Refused rather than passed on, so an unchecked answer is never taken for a checked one.
  if (d.output !== undefined) {
    throw new InferRequestError('The service does not check output schemas: step.ai.generate checks output in the runner (and re-asks); leave output out of the Infer request.');
  }
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

/** Fields of an embeddings request that are ours. */
const EMBED_OURS = new Set(['kind', 'provider', 'model', 'inputs']);

function parseEmbedRequest(d: Record<string, unknown>): EmbedRequest {
  const provider = d.provider ?? 'anthropic';
  if (provider === 'anthropic') {
    throw new InferRequestError('The anthropic provider kind has no embeddings API: step.ai.embed needs provider "openai" (an OpenAI-compatible POST /embeddings).');
  }
  if (provider !== 'openai') throw new InferRequestError(`Infer provider must be "anthropic" or "openai", not ${JSON.stringify(provider)}.`);
  if (typeof d.model !== 'string' || d.model === '') throw new InferRequestError('Infer needs a model (a non-empty string).');
  if (!Array.isArray(d.inputs) || d.inputs.length === 0) throw new InferRequestError('An embeddings request needs inputs: a non-empty array of strings.');
  d.inputs.forEach((x, i) => {
    // OpenAI refuses an empty string input; say which one here rather than relay a 400.
    if (typeof x !== 'string' || x === '') throw new InferRequestError(`Embeddings inputs[${i}] must be a non-empty string.`);
  });
  const extra: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(d)) if (!EMBED_OURS.has(k)) extra[k] = v;
  return { kind: 'embed', provider, model: d.model, inputs: d.inputs as string[], extra };
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
export function cacheKey(r: ModelRequest, sha256: (text: string) => string): string | undefined {
  // An embeddings request states no temperature: never eligible (SPEC Limits).
  if (r.kind === 'embed' || r.temperature === undefined || r.temperature > CACHE_MAX_TEMPERATURE) return undefined;
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
export function providerRequest(r: ModelRequest, cfg: ProviderConfig): { url: string; headers: Record<string, string>; body: string } {
  const base = cfg.baseUrl.replace(/\/+$/, '');
  if (r.kind === 'embed') {
    // OpenAI Embeddings API: POST /embeddings { model, input: string[] } (base URL ends in /v1).
    return {
      url: `${base}/embeddings`,
      headers: { 'content-type': 'application/json', ...(cfg.apiKey ? { authorization: `Bearer ${cfg.apiKey}` } : {}) },
      body: JSON.stringify({ ...r.extra, model: r.model, input: r.inputs }),
    };
  }
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

/** Thrown for a 2xx answer the step cannot use: the step fails with its message. */
export class ProviderAnswerError extends Error {}

/**
 * A provider's 2xx body as the step's result and its usage: `{ text,
 * response }` for a chat call; `{ embeddings, response }` for an embeddings
 * call, one vector per input in input order, `response` without its `data`
 * (the vectors are in `embeddings`, stored once).
 * @throws ProviderAnswerError when an embeddings answer carries no usable vectors
 */
export function readResponse(r: ModelRequest, body: unknown, latencyMs: number): { result: Record<string, unknown>; usage: Usage } {
  if (r.kind === 'embed') return readEmbeddings(r, body, latencyMs);
  const provider = r.provider;
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

function readEmbeddings(r: EmbedRequest, body: unknown, latencyMs: number): { result: Record<string, unknown>; usage: Usage } {
  const { data, ...rest } = (body ?? {}) as Record<string, unknown>;
  const bad = (why: string) => new ProviderAnswerError(`The ${r.provider} provider answered embeddings ${why}.`);
  if (!Array.isArray(data)) throw bad('without a data array');
  if (data.length !== r.inputs.length) throw bad(`for ${data.length} inputs, not ${r.inputs.length}`);
  const embeddings: number[][] = new Array<number[]>(r.inputs.length);
  data.forEach((item, pos) => {
    const e = item as { index?: unknown; embedding?: unknown };
    // Each item says which input it embeds; an answer out of order is put back in order.
    const at = typeof e.index === 'number' ? e.index : pos;
    if (!Number.isInteger(at) || at < 0 || at >= r.inputs.length || embeddings[at] !== undefined) throw bad(`with a bad or repeated index ${JSON.stringify(e.index)}`);
    if (Array.isArray(e.embedding) && e.embedding.every((x) => typeof x === 'number')) embeddings[at] = e.embedding as number[];
    else if (typeof e.embedding === 'string') embeddings[at] = fromBase64(e.embedding);
    else throw bad(`without a vector at index ${at}`);
  });
  const usage: Usage = { latencyMs };
  const model = rest.model;
  if (typeof model === 'string') usage.model = model;
  const tokens = (rest.usage as { prompt_tokens?: unknown } | undefined)?.prompt_tokens;
  if (typeof tokens === 'number' && Number.isFinite(tokens)) usage.tokensIn = tokens;
  return { result: { embeddings, response: rest }, usage };
}

/** `encoding_format: "base64"`: little-endian float32s. */
function fromBase64(s: string): number[] {
  const bytes = Buffer.from(s, 'base64');
  const out: number[] = [];
  for (let i = 0; i + 4 <= bytes.length; i += 4) out.push(bytes.readFloatLE(i));
  return out;
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
