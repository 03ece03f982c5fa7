import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { keyFingerprint, signInvoke, verifyInvokeSignature } from './signing.js';

interface Vector {
  name: string;
  t: number;
  body: string;
  signature: string;
  header: string;
}
const golden = JSON.parse(readFileSync(new URL('../test/fixtures/signatures.json', import.meta.url), 'utf8')) as {
  secret: string;
  keyFingerprint: string;
  vectors: Vector[];
};
const { secret } = golden;
const first = golden.vectors[0]!;

describe('signInvoke', () => {
  it.each(golden.vectors.map((v) => [v.name, v] as const))('matches the golden vector: %s', (_name, v) => {
    expect(signInvoke(secret, v.body, v.t)).toBe(v.header);
    expect(signInvoke(secret, Buffer.from(v.body, 'utf8'), v.t)).toBe(v.header);
    expect(signInvoke(Buffer.from(secret), new TextEncoder().encode(v.body), v.t)).toBe(v.header);
  });

  it('refuses an empty secret', () => {
    expect(() => signInvoke('', 'x', 1)).toThrow(/empty/);
  });
});

describe('verifyInvokeSignature', () => {
  const at = (t: number) => ({ nowSeconds: t });

  it.each(golden.vectors.map((v) => [v.name, v] as const))('accepts the golden vector: %s', (_name, v) => {
    expect(verifyInvokeSignature(secret, v.header, v.body, at(v.t))).toEqual({ ok: true });
    expect(verifyInvokeSignature(secret, v.header, Buffer.from(v.body), at(v.t))).toEqual({ ok: true });
  });

  it('rejects a tampered body', () => {
    const tampered = first.body.replace('"id":1', '"id":2');
    expect(verifyInvokeSignature(secret, first.header, tampered, at(first.t))).toEqual({
      ok: false,
      reason: 'mismatch',
    });
    expect(verifyInvokeSignature(secret, first.header, first.body + ' ', at(first.t))).toEqual({
      ok: false,
      reason: 'mismatch',
    });
  });

  it('rejects the wrong secret', () => {
    expect(verifyInvokeSignature(secret + 'x', first.header, first.body, at(first.t))).toEqual({
      ok: false,
      reason: 'mismatch',
    });
  });

  it('rejects a tampered signature or timestamp', () => {
    const flipped = first.header.slice(0, -1) + (first.header.endsWith('0') ? '1' : '0');
    expect(verifyInvokeSignature(secret, flipped, first.body, at(first.t))).toEqual({ ok: false, reason: 'mismatch' });
    const shifted = first.header.replace(`t=${first.t}`, `t=${first.t + 1}`);
    expect(verifyInvokeSignature(secret, shifted, first.body, at(first.t))).toEqual({ ok: false, reason: 'mismatch' });
  });

  it('accepts up to 300 s of skew and rejects 301 s, in the past and the future', () => {
    expect(verifyInvokeSignature(secret, first.header, first.body, at(first.t + 300))).toEqual({ ok: true });
    expect(verifyInvokeSignature(secret, first.header, first.body, at(first.t + 301))).toEqual({
      ok: false,
      reason: 'expired',
    });
    expect(verifyInvokeSignature(secret, first.header, first.body, at(first.t - 300))).toEqual({ ok: true });
    expect(verifyInvokeSignature(secret, first.header, first.body, at(first.t - 301))).toEqual({
      ok: false,
      reason: 'expired',
    });
  });

  it('honours a custom tolerance', () => {
    expect(
      verifyInvokeSignature(secret, first.header, first.body, { nowSeconds: first.t + 11, toleranceSeconds: 10 }),
    ).toEqual({ ok: false, reason: 'expired' });
  });

  it('uses the real clock by default', () => {
    const body = '{"x":1}';
    expect(verifyInvokeSignature(secret, signInvoke(secret, body), body)).toEqual({ ok: true });
    const old = signInvoke(secret, body, Math.floor(Date.now() / 1000) - 301);
    expect(verifyInvokeSignature(secret, old, body)).toEqual({ ok: false, reason: 'expired' });
  });

  it.each([undefined, null, '', '   ', []])('reports a missing header: %j', (header) => {
    expect(verifyInvokeSignature(secret, header as never, first.body, at(first.t))).toEqual({
      ok: false,
      reason: 'missing',
    });
  });

  it.each([
    'garbage',
    `s=${first.signature}`,
    `t=${first.t}`,
    `t=abc&s=${first.signature}`,
    `t=-5&s=${first.signature}`,
    `t=${first.t}&s=${first.signature.slice(2)}`,
    `t=${first.t}&s=${'z'.repeat(64)}`,
    `t=${first.t}&t=${first.t}&s=${first.signature}`,
    `t=${first.t},s=${first.signature}`,
  ])('reports a malformed header: %s', (header) => {
    expect(verifyInvokeSignature(secret, header, first.body, at(first.t))).toEqual({ ok: false, reason: 'malformed' });
  });

  it('takes a single-element header array, refuses several', () => {
    expect(verifyInvokeSignature(secret, [first.header], first.body, at(first.t))).toEqual({ ok: true });
    expect(verifyInvokeSignature(secret, [first.header, first.header], first.body, at(first.t))).toEqual({
      ok: false,
      reason: 'malformed',
    });
  });

  it('accepts an uppercase hex signature and field order s&t', () => {
    const header = `s=${first.signature.toUpperCase()}&t=${first.t}`;
    expect(verifyInvokeSignature(secret, header, first.body, at(first.t))).toEqual({ ok: true });
  });

  it('never verifies under an empty secret', () => {
    expect(verifyInvokeSignature('', first.header, first.body, at(first.t))).toEqual({ ok: false, reason: 'mismatch' });
  });

  it('never throws on hostile input', () => {
    for (const header of [42, {}, ['a', 'b'], 't=1&s=' + 'a'.repeat(10_000)]) {
      expect(() => verifyInvokeSignature(secret, header as never, first.body)).not.toThrow();
    }
  });
});

describe('keyFingerprint', () => {
  it('is the first 16 hex chars of SHA-256 of the secret', () => {
    expect(keyFingerprint(secret)).toBe(golden.keyFingerprint);
    expect(keyFingerprint(secret)).not.toContain(secret);
  });
});
