import { describe, expect, it } from '@jest/globals';
import { isSensitiveKey, redact } from './redact.js';

describe('redact', () => {
  it.each([
    'password',
    'PASSWORD',
    'secret',
    'token',
    'authorization',
    'apiKey',
    'api_key',
    'x-api-key',
    'accessToken',
    'refresh_token',
    'privateKey',
    'Cookie',
    'set-cookie',
    'clientSecret',
    'dbPassword',
  ])('treats %s as sensitive', (k) => {
    expect(isSensitiveKey(k)).toBe(true);
  });

  it.each(['user', 'tokens', 'maxTokens', 'tokenCount', 'keys', 'secretive'])('leaves %s alone', (k) => {
    expect(isSensitiveKey(k)).toBe(false);
  });

  it('redacts at any depth, in arrays, maps, and copies instead of mutating', () => {
    const input = { a: { b: [{ secret: 's', keep: 1 }] }, m: new Map([['token', 't']]) };
    expect(redact(input)).toEqual({ a: { b: [{ secret: '[REDACTED]', keep: 1 }] }, m: { token: '[REDACTED]' } });
    expect(input.a.b[0]!.secret).toBe('s');
  });

  it('is JSON-safe: cycles, bigints, errors, dates, functions', () => {
    const cyclic: Record<string, unknown> = { n: 1n, when: new Date(0), fn: () => 1 };
    cyclic.self = cyclic;
    const out = redact({ cyclic, err: new Error('e') }) as Record<string, Record<string, unknown>>;
    expect(out.cyclic).toEqual({ n: '1', when: '1970-01-01T00:00:00.000Z', self: '[Circular]' });
    expect(out.err).toMatchObject({ name: 'Error', message: 'e' });
    const shared = { x: 1 };
    expect(redact({ p: shared, q: shared })).toEqual({ p: { x: 1 }, q: { x: 1 } });
  });
});
