import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/** Header carrying the invoke signature (Node lowercases incoming header names). */
export const SIGNATURE_HEADER = 'x-service-signature';
/** Header carrying the wire protocol version on HTTP invokes. */
export const PROTOCOL_HEADER = 'x-service-protocol';

/** SPEC Limits: signature timestamp skew, 5 minutes either way. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

export type SigningSecret = string | Uint8Array;

const nowUnix = (): number => Math.floor(Date.now() / 1000);

function hmacHex(secret: SigningSecret, t: number, rawBody: string | Uint8Array): string {
  // `<t>.<rawBody>`: the timestamp, a literal dot, the exact request bytes.
  return createHmac('sha256', secret).update(`${t}.`, 'utf8').update(rawBody).digest('hex');
}

function isEmpty(secret: SigningSecret): boolean {
  return typeof secret === 'string' ? secret.length === 0 : secret.byteLength === 0;
}

/**
 * Signs an invoke body (SPEC Authentication 7) and returns the value of the
 * `X-Service-Signature` header: `t=<unix_seconds>&s=<hex>`, where s is the
 * lowercase hex HMAC-SHA256 of `<t>.<rawBody>` under the runner's secret.
 *
 * Sign the exact bytes you send: re-serialising the JSON afterwards breaks it.
 *
 * @param nowSeconds the timestamp to embed. @default the current unix time
 * @throws Error when the secret is empty (a configuration bug, not an outcome)
 */
export function signInvoke(
  secret: SigningSecret,
  rawBody: string | Uint8Array,
  nowSeconds: number = nowUnix(),
): string {
  if (isEmpty(secret)) throw new Error('signInvoke: the signing secret is empty');
  const t = Math.floor(nowSeconds);
  return `t=${t}&s=${hmacHex(secret, t, rawBody)}`;
}

export type VerifyFailureReason = 'missing' | 'malformed' | 'expired' | 'mismatch';
export type VerifyResult = { ok: true } | { ok: false; reason: VerifyFailureReason };

export interface VerifyOptions {
  /** Clock for the skew check. @default the current unix time */
  nowSeconds?: number;
  /** Largest accepted |now - t|, in seconds. @default 300 (SPEC Limits) */
  toleranceSeconds?: number;
}

const T_RE = /^\d{1,15}$/;
const S_RE = /^[0-9a-fA-F]{64}$/;

function parseHeader(header: string): { t: number; s: string } | undefined {
  let t: string | undefined;
  let s: string | undefined;
  for (const part of header.trim().split('&')) {
    const eq = part.indexOf('=');
    if (eq < 0) return undefined;
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't') {
      if (t !== undefined) return undefined;
      t = value;
    } else if (key === 's') {
      if (s !== undefined) return undefined;
      s = value;
    }
    // Unknown keys are ignored so a future scheme can add fields.
  }
  if (t === undefined || s === undefined || !T_RE.test(t) || !S_RE.test(s)) return undefined;
  return { t: Number(t), s: s.toLowerCase() };
}

/**
 * Verifies an `X-Service-Signature` header against the raw request body,
 * before any JSON parsing. The HMAC is compared in constant time, and a
 * timestamp more than `toleranceSeconds` from now (past or future) is
 * rejected. Never throws: every failure is a `{ ok: false, reason }` value.
 *
 * An empty secret never verifies (`mismatch`): an unset key must not accept
 * signatures made with an empty key.
 *
 * @param header the header value as received; Node may hand over an array.
 */
export function verifyInvokeSignature(
  secret: SigningSecret,
  header: string | readonly string[] | null | undefined,
  rawBody: string | Uint8Array,
  options: VerifyOptions = {},
): VerifyResult {
  try {
    let value: string | undefined;
    if (Array.isArray(header)) {
      if (header.length > 1) return { ok: false, reason: 'malformed' };
      value = header[0];
    } else {
      value = (header as string | null | undefined) ?? undefined;
    }
    if (value === undefined || value.trim() === '') return { ok: false, reason: 'missing' };
    const parsed = parseHeader(value);
    if (!parsed) return { ok: false, reason: 'malformed' };
    const now = options.nowSeconds ?? nowUnix();
    const tolerance = options.toleranceSeconds ?? SIGNATURE_TOLERANCE_SECONDS;
    if (Math.abs(now - parsed.t) > tolerance) return { ok: false, reason: 'expired' };
    if (isEmpty(secret)) return { ok: false, reason: 'mismatch' };
    const expected = Buffer.from(hmacHex(secret, parsed.t, rawBody), 'hex');
    const given = Buffer.from(parsed.s, 'hex');
    // Both are 32 bytes (the header regex pins s to 64 hex chars).
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
      return { ok: false, reason: 'mismatch' };
    }
    return { ok: true };
  } catch {
    return { ok: false, reason: 'malformed' };
  }
}

/**
 * The fingerprint a runner reports at registration so `GET /runners` can
 * flag a key mismatch (SPEC Authentication 7): the first 16 lowercase hex
 * characters of SHA-256 over the secret. One-way: it identifies a key
 * without revealing it, and 64 bits is enough to tell keys apart, not to
 * brute-force a random secret.
 */
export function keyFingerprint(secret: SigningSecret): string {
  return createHash('sha256').update(secret).digest('hex').slice(0, 16);
}
