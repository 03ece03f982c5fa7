import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { create, fromBinary, ResolveStepSchema, StepHandoffSchema, toBinary } from '@dws/proto';
import { streams, subjects } from '@dws/runtime';
import { uniqueName } from '@dws/testing';
import { modes, startHarness, until, type Harness } from './harness.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

interface Seen {
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
}

/**
 * A local server speaking OpenAI's Embeddings API as its public docs show it:
 * POST /v1/embeddings { model, input: string[] } answers
 * { object: "list", data: [{ object: "embedding", index, embedding }], model,
 * usage: { prompt_tokens, total_tokens } }. Each vector is [input number,
 * input length] so order shows; the data list comes back reversed (each item
 * carries its index). Model names script it: "emb-429" answers 429 once,
 * "emb-short" drops a vector.
 */
async function fakeOpenAi(): Promise<{ url: string; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const busy = new Set<string>();
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw || '{}');
      seen.push({ path: req.url ?? '', headers: req.headers, body });
      if (req.url !== '/v1/embeddings') return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"no such route"}}');
      if (body.model === 'emb-429' && !busy.has(body.input[0])) {
        busy.add(body.input[0]);
        return void res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '0' }).end('{"error":{"message":"slow down"}}');
      }
      const inputs: string[] = body.input;
      let data = inputs.map((s, index) => ({ object: 'embedding', index, embedding: [Number(s.split(' ')[1]), s.length] }));
      if (body.model === 'emb-short') data = data.slice(1);
      const tokens = inputs.reduce((a, s) => a + s.split(' ').length, 0);
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ object: 'list', data: data.reverse(), model: `${body.model}-v1`, usage: { prompt_tokens: tokens, total_tokens: tokens } }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    seen,
    close: () => new Promise((r) => (server.closeAllConnections(), server.close(() => r()))),
  };
}

/** step.ai.embed's batches as the invoker takes them: one Infer hand-off per batch, an OpenAI-compatible embeddings call each. */
describe.each(modes())('invoker on %s: embeddings', (mode) => {
  let h: Harness;
  let openai: Awaited<ReturnType<typeof fakeOpenAi>>;
  const resolved: { runId: string; stepId: string; data?: any; usage?: any; error?: string }[] = [];

  beforeAll(async () => {
    openai = await fakeOpenAi();
    h = await startHarness(mode, { infer: { backoffBaseMs: 10 } }, { SERVICE_OPENAI_BASE_URL: openai.url, SERVICE_OPENAI_API_KEY: 'sk-openai-test', SERVICE_ANTHROPIC_API_KEY: 'sk-ant-test' });
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
    await openai?.close();
  }, 30_000);

  /** The Infer hand-offs of one step.ai.embed, as the scheduler sends them; resolves with each batch's ResolveStep. null: no provider field. */
  const embedBatches = async (model: string, batches: string[][], provider: string | null = 'openai') => {
    const runId = uniqueName('run');
    await Promise.all(
      batches.map((inputs, i) => {
        const name = `vec:batch-${i}`;
        const opcode = { op: 'Infer', id: `b${i}`, name, data: { kind: 'embed', ...(provider ? { provider } : {}), model, inputs } };
        const msg = create(StepHandoffSchema, { workspaceId: 'ws_embed', runId, stepId: `b${i}`, stepName: name, workflow: 'w', app: 'a', opcode: enc.encode(JSON.stringify(opcode)) });
        return h.bus.publish(subjects.requestInference, toBinary(StepHandoffSchema, msg), { msgId: `${runId}:b${i}` });
      }),
    );
    await until(`the ResolveSteps of ${runId}`, () => (resolved.filter((r) => r.runId === runId).length === batches.length ? true : undefined));
    return batches.map((_, i) => resolved.find((r) => r.runId === runId && r.stepId === `b${i}`)!);
  };
  const texts = (from: number, n: number) => Array.from({ length: n }, (_, i) => `text ${from + i}`);

  it('calls POST /v1/embeddings once per batch and completes each with its vectors in input order, usage metered as tokensIn', async () => {
    const batches = [texts(0, 100), texts(100, 100), texts(200, 50)];
    const results = await embedBatches('emb-a', batches);
    const calls = openai.seen.filter((s) => s.body.model === 'emb-a');
    expect(calls).toHaveLength(3);
    for (const call of calls) {
      expect(call.path).toBe('/v1/embeddings');
      expect(call.headers).toMatchObject({ authorization: 'Bearer sk-openai-test', 'content-type': 'application/json' });
      expect(Object.keys(call.body).sort()).toEqual(['input', 'model']);
    }
    expect(calls.map((c) => c.body.input.length).sort()).toEqual([100, 100, 50]);
    results.forEach((r, i) => {
      expect(r.error).toBeUndefined();
      expect(r.data.embeddings).toEqual(batches[i]!.map((s) => [Number(s.split(' ')[1]), s.length]));
      // The vectors are stored once: the provider's answer is kept without its data list.
      expect(r.data.response).toEqual({ object: 'list', model: 'emb-a-v1', usage: { prompt_tokens: batches[i]!.length * 2, total_tokens: batches[i]!.length * 2 } });
      expect(r.usage).toEqual({ model: 'emb-a-v1', tokensIn: batches[i]!.length * 2, latencyMs: expect.any(Number) });
    });
  });

  it('retries a 429 on an embeddings call like any model call', async () => {
    const [r] = await embedBatches('emb-429', [texts(0, 3)]);
    expect(openai.seen.filter((s) => s.body.model === 'emb-429')).toHaveLength(2);
    expect(r!.data.embeddings).toHaveLength(3);
  });

  it('fails the step, without a call, for the anthropic kind (no embeddings API), the default provider included', async () => {
    const [explicit] = await embedBatches('emb-ant', [['a']], 'anthropic');
    const [byDefault] = await embedBatches('emb-ant', [['a']], null);
    for (const r of [explicit, byDefault]) expect(r!.error).toBe('The anthropic provider kind has no embeddings API: step.ai.embed needs provider "openai" (an OpenAI-compatible POST /embeddings).');
    expect(openai.seen.filter((s) => s.body.model === 'emb-ant')).toHaveLength(0);
  });

  it('fails the step when the provider answers fewer vectors than inputs', async () => {
    const [r] = await embedBatches('emb-short', [texts(0, 2)]);
    expect(r!.error).toBe('The openai provider answered embeddings for 1 inputs, not 2.');
  });
});
