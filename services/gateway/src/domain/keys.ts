import { createHash, randomBytes } from 'node:crypto';

export type KeyKind = 'secret' | 'public' | 'console';

const PREFIX: Record<KeyKind, string> = { secret: 'sk_', public: 'pk_', console: 'ck_' };

/** CONTRACT: secret `sk_`, public `pk_`, console `ck_`. */
export function generateKey(kind: KeyKind): string {
  return PREFIX[kind] + randomBytes(24).toString('base64url');
}

export function generateSigningKey(): string {
  return 'signkey_' + randomBytes(32).toString('hex');
}

/** Keys are stored as SHA-256: they are long random strings, so no slow hash is needed. */
export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** What a key of each kind may do (CONTRACT Keys): public keys read only. */
export function mayWrite(kind: string): boolean {
  return kind === 'secret' || kind === 'console';
}
