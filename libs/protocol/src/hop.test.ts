import { describe, expect, it } from '@jest/globals';
import { hopKey, signHop, verifyHop } from './hop.js';

const key = hopKey(Buffer.alloc(32, 7));

describe('connect hop header', () => {
  it('round-trips the claims', () => {
    const h = signHop(key, { workspaceId: 'ws_1', actor: 'default secret key' }, 1_700_000_000);
    expect(verifyHop(key, h, 1_700_000_030)).toEqual({ ok: true, claims: { workspaceId: 'ws_1', actor: 'default secret key' } });
    expect(verifyHop(key, [h], 1_700_000_000).ok).toBe(true);
  });

  it('refuses another key, a tampered claim, an old stamp and garbage', () => {
    const h = signHop(key, { workspaceId: 'ws_1', actor: 'a' }, 1_700_000_000);
    expect(verifyHop(hopKey(Buffer.alloc(32, 8)), h, 1_700_000_000)).toEqual({ ok: false, reason: 'mismatch' });
    const [, t, m] = h.split('.');
    const forged = `${Buffer.from(JSON.stringify({ w: 'ws_2', a: 'a' })).toString('base64url')}.${t}.${m}`;
    expect(verifyHop(key, forged, 1_700_000_000)).toEqual({ ok: false, reason: 'mismatch' });
    expect(verifyHop(key, h, 1_700_000_061)).toEqual({ ok: false, reason: 'expired' });
    expect(verifyHop(key, undefined)).toEqual({ ok: false, reason: 'missing' });
    expect(verifyHop(key, 'x.y.z')).toEqual({ ok: false, reason: 'malformed' });
    expect(verifyHop(key, [h, h])).toEqual({ ok: false, reason: 'missing' });
  });

  it('derives a key distinct from the seal key', () => {
    expect(key.equals(Buffer.alloc(32, 7))).toBe(false);
    expect(key).toHaveLength(32);
  });
});
