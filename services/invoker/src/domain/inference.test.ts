import { describe, expect, it } from '@jest/globals';
import { classifyStatus, parseInferRequest, providerError, retryAfterMs } from './inference.js';

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

  it('refuses what is not built yet, loudly: embeddings and output schemas', () => {
    expect(() => parseInferRequest({ kind: 'embed', model: 'e', inputs: ['a'] })).toThrow(/embed is not available yet/);
    expect(() => parseInferRequest({ model: 'm', prompt: 'x', output: { type: 'object' } })).toThrow(/output schema .* is not available yet/);
  });

  it("puts the provider's own error message in the step error", () => {
    expect(providerError('openai', 401, '{"error":{"message":"Incorrect API key"}}')).toBe('The openai provider answered 401: Incorrect API key');
    expect(providerError('anthropic', 404, 'not json')).toBe('The anthropic provider answered 404: not json');
  });
});
