import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { deriveKey, seal, SealKeyring, unseal } from './seal.js';

const golden = JSON.parse(readFileSync(new URL('../test/fixtures/seal.json', import.meta.url), 'utf8')) as {
  secret: string;
  keyHex: string;
  vectors: Array<{ plaintext: string; sealed: string }>;
};
const key = deriveKey(golden.secret);

describe('seal', () => {
  it('derives the key as SHA-256 of the secret', () => {
    expect(key.toString('hex')).toBe(golden.keyHex);
  });

  it.each(golden.vectors.map((v) => [v.plaintext, v.sealed] as const))(
    'unseals a value sealed elsewhere: %s',
    (pt, sealed) => {
      expect(unseal(sealed, key)).toBe(pt);
    },
  );

  it('round-trips with a fresh IV each time', () => {
    const a = seal('s3cret ✓', key);
    const b = seal('s3cret ✓', key);
    expect(a).not.toBe(b);
    expect(a).toMatch(/^v1\.[A-Za-z0-9+/=]+\.[A-Za-z0-9+/=]+\.[A-Za-z0-9+/=]*$/);
    expect(unseal(a, key)).toBe('s3cret ✓');
    expect(unseal(seal('', key), key)).toBe('');
  });

  it('refuses the wrong key, a tampered value and garbage', () => {
    const sealed = golden.vectors[0]!.sealed;
    expect(() => unseal(sealed, deriveKey('other'))).toThrow(/authentication failed/);
    const [v, iv, tag, ct] = sealed.split('.') as [string, string, string, string];
    const ctBytes = Buffer.from(ct, 'base64');
    ctBytes[0] = ctBytes[0]! ^ 1;
    expect(() => unseal([v, iv, tag, ctBytes.toString('base64')].join('.'), key)).toThrow(/authentication failed/);
    expect(() => unseal('v2.a.b.c', key)).toThrow(/not a v1/);
    expect(() => unseal('v1.AAAA.AAAA.AAAA', key)).toThrow(/malformed/);
  });

  it('requires a 32-byte key', () => {
    expect(() => seal('x', Buffer.alloc(16))).toThrow(/32 bytes/);
  });
});

describe('SealKeyring', () => {
  const oldKey = deriveKey('old seal key');
  const newKey = deriveKey('new seal key');

  it('opens what an earlier key sealed once that key is configured as a previous one', () => {
    const before = new SealKeyring(oldKey).seal('whsec_abc');
    const rotated = new SealKeyring(newKey, [oldKey]);
    expect(rotated.open(before.sealed, before.keyId)).toBe('whsec_abc');
    const after = rotated.seal('whsec_def');
    expect(after.keyId).toBe(rotated.currentId);
    expect(after.keyId).not.toBe(before.keyId);
    expect(rotated.open(after.sealed, after.keyId)).toBe('whsec_def');
  });

  it('refuses, naming the key id and never the value, when the sealing key is not configured', () => {
    const before = new SealKeyring(oldKey).seal('whsec_abc');
    const withoutOld = new SealKeyring(newKey);
    expect(withoutOld.has(before.keyId)).toBe(false);
    expect(() => withoutOld.open(before.sealed, before.keyId)).toThrow(before.keyId);
    expect(() => withoutOld.open(before.sealed, before.keyId)).not.toThrow('whsec_abc');
  });
});
