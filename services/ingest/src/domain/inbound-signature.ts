import { createHmac, timingSafeEqual } from 'node:crypto';
import { SIGNATURE_TOLERANCE_SECONDS, verifyInvokeSignature, type VerifyFailureReason } from '@dws/protocol';

/**
 * Signature schemes an inbound webhook may carry, checked in this order (the
 * first header present decides; a post carrying none is `missing`):
 *
 * - `service`: `X-Service-Signature: t=<unix>&s=<hex HMAC-SHA256 of "<t>.<rawBody>">`,
 *   the scheme of our own outbound deliveries and invokes; t within 5 minutes.
 * - `stripe`: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`, the same
 *   signed string `<t>.<rawBody>`; any v1 may match (Stripe sends one per
 *   active secret while rolling); t within 5 minutes.
 * - `github`: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of rawBody>`.
 *   GitHub signs no timestamp, so there is no staleness check: a captured
 *   post can be replayed; the X-GitHub-Delivery id dedupes a replay within 24 h.
 */
export type InboundScheme = 'service' | 'stripe' | 'github';

export type InboundVerdict = { ok: true; scheme: InboundScheme } | { ok: false; scheme?: InboundScheme; reason: VerifyFailureReason };

const HEX64 = /^[0-9a-fA-F]{64}$/;
const T_RE = /^\d{1,15}$/;

function equalHex(expected: Buffer, givenHex: string): boolean {
  if (!HEX64.test(givenHex)) return false;
  return timingSafeEqual(expected, Buffer.from(givenHex, 'hex'));
}

function stripe(secret: string, header: string, raw: string, now: number): InboundVerdict {
  let t: string | undefined;
  const sigs: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const k = part.slice(0, eq).trim();
    const v = part.slice(eq + 1).trim();
    if (k === 't') t = v;
    else if (k === 'v1') sigs.push(v);
  }
  if (t === undefined || !T_RE.test(t) || sigs.length === 0) return { ok: false, scheme: 'stripe', reason: 'malformed' };
  if (Math.abs(now - Number(t)) > SIGNATURE_TOLERANCE_SECONDS) return { ok: false, scheme: 'stripe', reason: 'expired' };
  const expected = createHmac('sha256', secret).update(`${t}.`, 'utf8').update(raw, 'utf8').digest();
  return sigs.some((s) => equalHex(expected, s)) ? { ok: true, scheme: 'stripe' } : { ok: false, scheme: 'stripe', reason: 'mismatch' };
}

function github(secret: string, header: string, raw: string): InboundVerdict {
  const m = /^sha256=(.*)$/.exec(header.trim());
  if (!m || !HEX64.test(m[1]!)) return { ok: false, scheme: 'github', reason: 'malformed' };
  const expected = createHmac('sha256', secret).update(raw, 'utf8').digest();
  return equalHex(expected, m[1]!) ? { ok: true, scheme: 'github' } : { ok: false, scheme: 'github', reason: 'mismatch' };
}

/**
 * Verify an inbound post over its raw body (before any JSON parsing).
 * `headers` are lowercased names. Never throws. An empty secret never verifies.
 */
export function verifyInbound(
  secret: string,
  headers: Record<string, string>,
  raw: string,
  nowSeconds = Math.floor(Date.now() / 1000),
): InboundVerdict {
  if (secret === '') return { ok: false, reason: 'mismatch' };
  const svc = headers['x-service-signature'];
  if (svc !== undefined) {
    const r = verifyInvokeSignature(secret, svc, raw, { nowSeconds });
    return r.ok ? { ok: true, scheme: 'service' } : { ok: false, scheme: 'service', reason: r.reason };
  }
  const st = headers['stripe-signature'];
  if (st !== undefined) return stripe(secret, st, raw, nowSeconds);
  const gh = headers['x-hub-signature-256'];
  if (gh !== undefined) return github(secret, gh, raw);
  return { ok: false, reason: 'missing' };
}
