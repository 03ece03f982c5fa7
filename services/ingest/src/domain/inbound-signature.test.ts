import { createHmac } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { signInvoke } from '@dws/protocol';
import { verifyInbound } from './inbound-signature.js';

const secret = 'whsec_0123456789abcdef';
const raw = '{"a": 1,\n "b":"\u00e9"}';
const now = 1_800_000_000;
const hmac = (s: string, text: string) => createHmac('sha256', s).update(text).digest('hex');

describe('inbound webhook signatures', () => {
  it('X-Service-Signature: the exact bytes, 5 minutes either way', () => {
    expect(verifyInbound(secret, { 'x-service-signature': signInvoke(secret, raw, now) }, raw, now)).toEqual({
      ok: true,
      scheme: 'service',
    });
    expect(verifyInbound(secret, { 'x-service-signature': signInvoke(secret, raw, now - 300) }, raw, now).ok).toBe(true);
    expect(verifyInbound(secret, { 'x-service-signature': signInvoke(secret, raw, now + 301) }, raw, now)).toEqual({
      ok: false,
      scheme: 'service',
      reason: 'expired',
    });
    expect(verifyInbound(secret, { 'x-service-signature': signInvoke(secret, raw, now) }, raw.replace('\n', ''), now)).toEqual({
      ok: false,
      scheme: 'service',
      reason: 'mismatch',
    });
    expect(verifyInbound(secret, { 'x-service-signature': 'garbage' }, raw, now)).toEqual({
      ok: false,
      scheme: 'service',
      reason: 'malformed',
    });
  });

  it('Stripe-Signature: any v1 may match; t is checked; malformed is refused', () => {
    const good = hmac(secret, `${now}.${raw}`);
    expect(verifyInbound(secret, { 'stripe-signature': `t=${now},v1=${'a'.repeat(64)},v1=${good},v0=xyz` }, raw, now)).toEqual({
      ok: true,
      scheme: 'stripe',
    });
    expect(verifyInbound(secret, { 'stripe-signature': `t=${now},v1=${'a'.repeat(64)}` }, raw, now)).toMatchObject({
      ok: false,
      reason: 'mismatch',
    });
    expect(
      verifyInbound(secret, { 'stripe-signature': `t=${now - 301},v1=${hmac(secret, `${now - 301}.${raw}`)}` }, raw, now),
    ).toMatchObject({ ok: false, reason: 'expired' });
    expect(verifyInbound(secret, { 'stripe-signature': `v1=${good}` }, raw, now)).toMatchObject({ ok: false, reason: 'malformed' });
  });

  it('X-Hub-Signature-256: HMAC of the body alone (no timestamp to check)', () => {
    expect(verifyInbound(secret, { 'x-hub-signature-256': `sha256=${hmac(secret, raw)}` }, raw, now)).toEqual({
      ok: true,
      scheme: 'github',
    });
    expect(verifyInbound(secret, { 'x-hub-signature-256': `sha256=${hmac('other-secret-value', raw)}` }, raw, now)).toMatchObject({
      ok: false,
      reason: 'mismatch',
    });
    expect(verifyInbound(secret, { 'x-hub-signature-256': hmac(secret, raw) }, raw, now)).toMatchObject({ ok: false, reason: 'malformed' });
  });

  it('no signature header is missing; an empty secret never verifies; the service header wins over the others', () => {
    expect(verifyInbound(secret, {}, raw, now)).toEqual({ ok: false, reason: 'missing' });
    expect(verifyInbound('', { 'x-hub-signature-256': `sha256=${hmac('', raw)}` }, raw, now)).toEqual({ ok: false, reason: 'mismatch' });
    const both = { 'x-service-signature': 'bad', 'x-hub-signature-256': `sha256=${hmac(secret, raw)}` };
    expect(verifyInbound(secret, both, raw, now)).toMatchObject({ ok: false, scheme: 'service' });
  });
});
