import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { create, fromBinary, ResolveStepSchema, StepHandoffSchema, toBinary } from '@dws/proto';
import { streams, subjects } from '@dws/runtime';
import { createLogger } from '@dws/log';
import { uniqueName } from '@dws/testing';
import { pruneInferenceCache } from '../src/handlers/infer.js';
import { modes, startHarness, until, type Harness } from './harness.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

/** What a fake provider saw: method, path, headers, parsed body. */
interface Seen {
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
}

/**
 * A local model server speaking one provider's wire shape (Anthropic's
 * Messages API or OpenAI's Chat Completions, as their public docs show
 * them). Each model name scripts its answers: a status list (the last
 * repeats); 200 answers a canned completion of that provider.
 */
async function fakeProvider(kind: 'anthropic' | 'openai'): Promise<{ url: string; seen: Seen[]; script: Map<string, number[]>; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const script = new Map<string, number[]>();
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw || '{}');
      seen.push({ path: req.url ?? '', headers: req.headers, body });
      const s = script.get(body.model) ?? [200];
      const status = s.length > 1 ? s.shift()! : s[0]!;
      if (status === 429) return void res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '0' }).end('{"error":{"type":"rate_limit_error","message":"slow down"}}');
      if (status !== 200) return void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { type: 'invalid_request_error', message: `bad request for ${body.model}` } }));
      const answer =
        kind === 'anthropic'
          ? { id: 'msg_1', type: 'message', role: 'assistant', model: body.model, content: [{ type: 'text', text: 'Hello' }, { type: 'text', text: ' there' }], stop_reason: 'end_turn', usage: { input_tokens: 11, output_tokens: 7 } }
          : { id: 'chatcmpl-1', object: 'chat.completion', model: body.model, choices: [{ index: 0, message: { role: 'assistant', content: 'Hi!' }, finish_reason: 'stop' }], usage: { prompt_tokens: 9, completion_tokens: 2, total_tokens: 11 } };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: kind === 'anthropic' ? base : `${base}/v1`,
    seen,
    script,
    close: () => new Promise((r) => (server.closeAllConnections(), server.close(() => r()))),
  };
}

/**
 * Infer steps end to end on the invoker: the scheduler's hand-off in, the
 * provider called once, ResolveStep out with `{ text, response }` and usage.
 */
describe.each(modes())('invoker on %s: Infer steps', (mode) => {
  let h: Harness;
  let anthropic: Awaited<ReturnType<typeof fakeProvider>>;
  let openai: Awaited<ReturnType<typeof fakeProvider>>;
  const resolved: { runId: string; stepId: string; data?: any; usage?: any; error?: string }[] = [];
  const ws = 'ws_infer';

  beforeAll(async () => {
    anthropic = await fakeProvider('anthropic');
    openai = await fakeProvider('openai');
    h = await startHarness(mode, { infer: { backoffBaseMs: 10 } }, {
      SERVICE_ANTHROPIC_BASE_URL: anthropic.url,
      SERVICE_ANTHROPIC_API_KEY: 'sk-ant-test',
      SERVICE_OPENAI_BASE_URL: openai.url,
      SERVICE_OPENAI_API_KEY: 'sk-openai-test',
    });
    await h.bus.consume({ stream: streams.schedulerCmds.name, durable: 'test-resolves', filterSubject: subjects.resolveStep }, async (m) => {
      const r = fromBinary(ResolveStepSchema, m.data);
      resolved.push({
        runId: r.runId,
        stepId: r.stepId,
        ...(r.errorMessage ? { error: r.errorMessage } : { data: JSON.parse(dec.decode(r.data)) }),
        ...(r.usage.length ? { usage: JSON.parse(dec.decode(r.usage)) } : {}),
      });
    });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await anthropic?.close();
    await openai?.close();
  }, 30_000);

  let n = 0;
  /** Hand an Infer step to the invoker as the scheduler does; resolves with its ResolveStep(s) so far once there is one. */
  const infer = async (data: unknown, runId = uniqueName('run'), workspaceId = ws) => {
    const stepId = `step${++n}`;
    const opcode = { op: 'Infer', id: stepId, name: 'ask', data };
    const msg = create(StepHandoffSchema, { workspaceId, runId, stepId, stepName: 'ask', workflow: 'w', app: 'a', opcode: enc.encode(JSON.stringify(opcode)) });
    await h.bus.publish(subjects.requestInference, toBinary(StepHandoffSchema, msg), { msgId: `${runId}:${stepId}` });
    await until(`the ResolveStep of ${runId}`, () => resolved.find((r) => r.runId === runId));
    return { runId, stepId, handoff: msg, result: resolved.find((r) => r.runId === runId)! };
  };

  it('calls an anthropic-kind provider (Messages API) and completes the step with { text, response } and usage', async () => {
    const { result } = await infer({ model: 'claude-test', messages: [{ role: 'user', content: 'Say hello' }], system: 'Be brief.', temperature: 0.1, maxTokens: 64, top_k: 5 });
    const call = anthropic.seen.find((s) => s.body.model === 'claude-test')!;
    expect(call.path).toBe('/v1/messages');
    expect(call.headers).toMatchObject({ 'x-api-key': 'sk-ant-test', 'anthropic-version': '2023-06-01', 'content-type': 'application/json' });
    expect(call.body).toEqual({ model: 'claude-test', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello' }], system: 'Be brief.', temperature: 0.1, top_k: 5 });
    expect(result.data.text).toBe('Hello there');
    expect(result.data.response).toMatchObject({ type: 'message', usage: { input_tokens: 11, output_tokens: 7 } });
    expect(result.usage).toMatchObject({ model: 'claude-test', tokensIn: 11, tokensOut: 7, latencyMs: expect.any(Number) });
  });

  it('calls an openai-kind provider (Chat Completions), the system prompt first', async () => {
    const { result } = await infer({ provider: 'openai', model: 'gpt-test', prompt: 'Hi?', system: 'Be brief.', maxTokens: 32 });
    const call = openai.seen.find((s) => s.body.model === 'gpt-test')!;
    expect(call.path).toBe('/v1/chat/completions');
    expect(call.headers.authorization).toBe('Bearer sk-openai-test');
    expect(call.body).toEqual({ model: 'gpt-test', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi?' }], max_tokens: 32 });
    expect(result.data).toMatchObject({ text: 'Hi!', response: { object: 'chat.completion' } });
    expect(result.usage).toMatchObject({ model: 'gpt-test', tokensIn: 9, tokensOut: 2 });
  });

  it('retries a 429 (honouring retry-after) and a 503, then completes the step', async () => {
    anthropic.script.set('claude-busy', [429, 503, 200]);
    const { result } = await infer({ model: 'claude-busy', messages: [{ role: 'user', content: 'x' }] });
    expect(anthropic.seen.filter((s) => s.body.model === 'claude-busy')).toHaveLength(3);
    expect(result.data.text).toBe('Hello there');
  });

  it("fails the step on a 400 with the provider's message, without retrying", async () => {
    anthropic.script.set('claude-bad', [400]);
    const { result } = await infer({ model: 'claude-bad', messages: [{ role: 'user', content: 'x' }] });
    expect(anthropic.seen.filter((s) => s.body.model === 'claude-bad')).toHaveLength(1);
    expect(result.error).toBe('The anthropic provider answered 400: bad request for claude-bad');
  });

  it('calls the model once per step: a redelivered hand-off resends the stored answer', async () => {
    const first = await infer({ model: 'claude-once', messages: [{ role: 'user', content: 'x' }] });
    await h.bus.publish(subjects.requestInference, toBinary(StepHandoffSchema, first.handoff), { msgId: `again-${first.runId}` });
    // The repeat resends the stored ResolveStep (same msgId: the stream keeps one) and calls nothing.
    await new Promise((r) => setTimeout(r, 500));
    expect(anthropic.seen.filter((s) => s.body.model === 'claude-once')).toHaveLength(1);
    const stored = await h.db.query<{ outcome: any }>('select outcome from invoker.inferences where run_id = $1', [first.runId]);
    expect(stored).toEqual([{ outcome: { data: first.result.data, usage: first.result.usage } }]);
  });

  it('answers a repeat of a cache-eligible request (temperature <= 0.2) from the cache, per workspace, until its ttl', async () => {
    const calls = (model: string) => anthropic.seen.filter((x) => x.body.model === model).length;
    const ask = { model: 'claude-cache', messages: [{ role: 'user', content: 'same' }], temperature: 0 };
    const first = await infer(ask);
    expect(first.result.usage).toMatchObject({ cacheHit: false });
    // The same request, its keys in another order: answered from the cache, no call.
    const second = await infer({ temperature: 0, messages: [{ content: 'same', role: 'user' }], model: 'claude-cache' });
    expect(calls('claude-cache')).toBe(1);
    expect(second.result.data).toEqual(first.result.data);
    expect(second.result.usage).toMatchObject({ cacheHit: true, latencyMs: 0, tokensIn: 11 });
    // Another workspace has its own cache.
    await infer(ask, uniqueName('run'), 'ws_other');
    expect(calls('claude-cache')).toBe(2);
    // ttlMs: a short-lived answer is called again once it expired.
    const short = { model: 'claude-ttl', prompt: 'x', temperature: 0.2, ttlMs: 150 };
    await infer(short);
    await infer(short);
    expect(calls('claude-ttl')).toBe(1);
    await new Promise((r) => setTimeout(r, 250));
    await infer(short);
    expect(calls('claude-ttl')).toBe(2);
  });

  it('drops expired cache entries and keeps live ones', async () => {
    await h.db.query(
      `insert into invoker.inference_cache (workspace_id, key, outcome, expires_at) values
         ('ws_prune', 'old', '{}'::jsonb, now() - interval '1 second'), ('ws_prune', 'new', '{}'::jsonb, now() + interval '1 hour')`,
    );
    const loop = pruneInferenceCache({ db: h.db, log: createLogger({ level: 'silent' }) });
    loop.start();
    await until('the expired entry to go', async () =>
      (await h.db.query("select 1 from invoker.inference_cache where workspace_id = 'ws_prune' and key = 'old'")).length === 0 ? true : undefined,
    );
    await loop.stop();
    expect(await h.db.query<{ key: string }>("select key from invoker.inference_cache where workspace_id = 'ws_prune'")).toEqual([{ key: 'new' }]);
  });

  it('never caches a request without a temperature or above 0.2 (no cacheHit in its usage)', async () => {
    for (const temperature of [undefined, 0.7, 0.7]) {
      const { result } = await infer({ model: 'claude-warm', prompt: 'x', ...(temperature !== undefined ? { temperature } : {}) });
      expect(result.usage.cacheHit).toBeUndefined();
    }
    expect(anthropic.seen.filter((x) => x.body.model === 'claude-warm')).toHaveLength(3);
  });

  it('fails the step at once on a request no provider could take', async () => {
    expect((await infer({ messages: [{ role: 'user', content: 'x' }] })).result.error).toMatch(/needs a model/);
    expect((await infer({ provider: 'mystery', model: 'm', prompt: 'x' })).result.error).toMatch(/provider must be "anthropic" or "openai"/);
    expect((await infer({ kind: 'embed', model: 'e', inputs: ['a'] })).result.error).toMatch(/anthropic provider kind has no embeddings API/);
    expect((await infer({ model: 'm', messages: [{ role: 'system', content: 'x' }] })).result.error).toMatch(/messages\[0\]/);
  });
});
