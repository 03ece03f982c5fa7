import { describe, expect, it } from '@jest/globals';
import { cacheKey, classifyStatus, parseInferRequest, ProviderAnswerError, providerError, providerRequest, readResponse, retryAfterMs } from './inference.js';

describe('inference', () => {
  it('classifies provider statuses: retry 429, 408, 409 and 5xx; fail other 4xx', () => {
    expect([200, 201].map(classifyStatus)).toEqual(['ok', 'ok']);
    expect([429, 408, 409, 500, 503, 529].map(classifyStatus)).toEqual(['retry', 'retry', 'retry', 'retry', 'retry', 'retry']);
    expect([400, 401, 403, 404, 413, 422].map(classifyStatus)).toEqual(['fail', 'fail', 'fail', 'fail', 'fail', 'fail']);
  });

  it('reads retry-after as seconds or an HTTP date, capped; nothing for garbage', () => {
    const now = Date.parse('2026-11-24T12:00:00Z');
    expect(retryAfterMs('2', now, 20_000)).toBe(2000);
    expect(retryAfterMs('120', now, 20_000)).toBe(20_000);
    expect(retryAfterMs('Tue, 24 Nov 2026 12:00:05 GMT', now, 20_000)).toBe(5000);
    expect(retryAfterMs('soon', now, 20_000)).toBeUndefined();
    expect(retryAfterMs(undefined, now, 20_000)).toBeUndefined();
  });

  it('takes a prompt as one user message and keeps unknown fields for the provider', () => {
    expect(parseInferRequest({ kind: 'generate', model: 'm', prompt: 'hi', ttlMs: 5, top_p: 0.5 })).toEqual({ provider: 'anthropic', model: 'm', messages: [{ role: 'user', content: 'hi' }], ttlMs: 5, extra: { top_p: 0.5 } });
  });

  it('refuses an output schema: the runner checks it, the service would only pass it on unchecked', () => {
    expect(() => parseInferRequest({ model: 'm', prompt: 'x', output: { type: 'object' } })).toThrow(/does not check output schemas: step\.ai\.generate checks output in the runner/);
  });

  it('takes an embeddings request for an openai-kind provider only, with non-empty string inputs', () => {
    expect(parseInferRequest({ kind: 'embed', provider: 'openai', model: 'e', inputs: ['a', 'b'], dimensions: 8 })).toEqual({
      kind: 'embed',
      provider: 'openai',
      model: 'e',
      inputs: ['a', 'b'],
      extra: { dimensions: 8 },
    });
    expect(() => parseInferRequest({ kind: 'embed', model: 'e', inputs: ['a'] })).toThrow('The anthropic provider kind has no embeddings API: step.ai.embed needs provider "openai" (an OpenAI-compatible POST /embeddings).');
    expect(() => parseInferRequest({ kind: 'embed', provider: 'openai', model: 'e', inputs: [] })).toThrow(/needs inputs: a non-empty array of strings/);
    expect(() => parseInferRequest({ kind: 'embed', provider: 'openai', model: 'e', inputs: ['a', ''] })).toThrow('Embeddings inputs[1] must be a non-empty string.');
    expect(() => parseInferRequest({ kind: 'embed', provider: 'openai', inputs: ['a'] })).toThrow(/needs a model/);
  });

  it('builds the OpenAI Embeddings request and never caches one', () => {
    const r = parseInferRequest({ kind: 'embed', provider: 'openai', model: 'text-embedding-3-small', inputs: ['a', 'b'], dimensions: 8, temperature: 0 });
    expect(providerRequest(r, { baseUrl: 'https://api.openai.com/v1/', apiKey: 'sk-1' })).toEqual({
      url: 'https://api.openai.com/v1/embeddings',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-1' },
      body: JSON.stringify({ dimensions: 8, temperature: 0, model: 'text-embedding-3-small', input: ['a', 'b'] }),
    });
    expect(cacheKey(r, (t) => t)).toBeUndefined();
  });

  it('reads an embeddings answer: vectors in input order (by index; base64 float32 too), usage tokensIn, the vectors kept once', () => {
    const r = parseInferRequest({ kind: 'embed', provider: 'openai', model: 'e', inputs: ['a', 'b', 'c'] });
    const f32 = Buffer.alloc(8);
    f32.writeFloatLE(0.5, 0);
    f32.writeFloatLE(-2, 4);
    const body = {
      object: 'list',
      data: [
        { object: 'embedding', index: 2, embedding: [3, 3] },
        { object: 'embedding', index: 0, embedding: [1, 1] },
        { object: 'embedding', index: 1, embedding: f32.toString('base64') },
      ],
      model: 'e-2024',
      usage: { prompt_tokens: 6, total_tokens: 6 },
    };
    expect(readResponse(r, body, 12)).toEqual({
      result: { embeddings: [[1, 1], [0.5, -2], [3, 3]], response: { object: 'list', model: 'e-2024', usage: { prompt_tokens: 6, total_tokens: 6 } } },
      usage: { latencyMs: 12, model: 'e-2024', tokensIn: 6 },
    });
    expect(() => readResponse(r, { data: body.data.slice(1) }, 1)).toThrow(new ProviderAnswerError('The openai provider answered embeddings for 2 inputs, not 3.'));
    expect(() => readResponse(r, { data: [body.data[1], body.data[1], body.data[0]] }, 1)).toThrow(/bad or repeated index 0/);
    expect(() => readResponse(r, {}, 1)).toThrow(/without a data array/);
  });

  it("puts the provider's own error message in the step error", () => {
    expect(providerError('openai', 401, '{"error":{"message":"Incorrect API key"}}')).toBe('The openai provider answered 401: Incorrect API key');
    expect(providerError('anthropic', 404, 'not json')).toBe('The anthropic provider answered 404: not json');
  });
});
