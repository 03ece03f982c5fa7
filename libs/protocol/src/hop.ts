import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The gateway authenticates `GET /connect` and hands the upgraded request to
 * the invoker (in one process, or proxied to the invoker's own port). This
 * header tells the invoker which workspace the gateway authenticated; it is
 * an HMAC under a key derived from the seal key, so only a fleet member can
 * mint it, and it expires quickly so a captured one is useless.
 */
export const HOP_HEADER = 'x-dws-connect-hop';

/** Largest accepted |now - t| of a hop header, in seconds. */
export const HOP_TOLERANCE_SECONDS = 60;

export interface HopClaims {
  workspaceId: string;
  /** The API key's label, for logs. */
  actor: string;
}

/** The hop key: HMAC-SHA256 of a fixed label under the fleet's seal key (a separate key per use). */
export function hopKey(sealKey: Uint8Array): Buffer {
  return createHmac('sha256', sealKey).update('dws.connect.hop.v1').digest();
}

const mac = (key: Uint8Array, claims: string, t: number): string =>
  createHmac('sha256', key).update(`${t}.${claims}`).digest('hex');

/** The header value: `<base64url claims JSON>.<unix seconds>.<hex mac>`. */
export function signHop(key: Uint8Array, claims: HopClaims, nowSeconds = Math.floor(Date.now() / 1000)): string {
  const body = Buffer.from(JSON.stringify({ w: claims.workspaceId, a: claims.actor })).toString('base64url');
  const t = Math.floor(nowSeconds);
  return `${body}.${t}.${mac(key, body, t)}`;
}

export type HopResult = { ok: true; claims: HopClaims } | { ok: false; reason: 'missing' | 'malformed' | 'expired' | 'mismatch' };

/** Checks a hop header; never throws. */
export function verifyHop(
  key: Uint8Array,
  header: string | readonly string[] | undefined,
  nowSeconds = Math.floor(Date.now() / 1000),
): HopResult {
  const value = Array.isArray(header) ? (header.length === 1 ? header[0] : undefined) : (header as string | undefined);
  if (!value) return { ok: false, reason: 'missing' };
  const m = /^([A-Za-z0-9_-]+)\.(\d{1,15})\.([0-9a-f]{64})$/.exec(value);
  if (!m) return { ok: false, reason: 'malformed' };
  const [, body, tText, given] = m as unknown as [string, string, string, string];
  const t = Number(tText);
  if (Math.abs(nowSeconds - t) > HOP_TOLERANCE_SECONDS) return { ok: false, reason: 'expired' };
  if (!timingSafeEqual(Buffer.from(mac(key, body, t), 'hex'), Buffer.from(given, 'hex'))) return { ok: false, reason: 'mismatch' };
  try {
    const c = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as { w?: unknown; a?: unknown };
    if (typeof c.w !== 'string' || c.w === '' || typeof c.a !== 'string') return { ok: false, reason: 'malformed' };
    return { ok: true, claims: { workspaceId: c.w, actor: c.a } };
  } catch {
    return { ok: false, reason: 'malformed' };
  }
}
