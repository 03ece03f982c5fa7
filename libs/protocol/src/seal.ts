import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { keyFingerprint } from './signing.js';

// Keeps secrets (signing secrets, webhook endpoint secrets) sealed at rest
// (SPEC Authentication 6). Format: `v1.<b64 iv>.<b64 tag>.<b64 ciphertext>`,
// AES-256-GCM with a random 12-byte IV; the version prefix leaves room to
// rotate the scheme without guessing what a stored value is.
const PREFIX = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

function assertKey(key: Uint8Array): void {
  if (key.byteLength !== 32) throw new Error(`seal: the key must be 32 bytes, got ${key.byteLength}`);
}

/**
 * Derives a 32-byte AES key from a configured secret string: SHA-256 of its
 * UTF-8 bytes. Suitable for high-entropy secrets from config, not for
 * passwords (no salt, no work factor).
 */
export function deriveKey(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

/**
 * Encrypts `plaintext` with AES-256-GCM under `key` (32 bytes). Two calls on
 * the same input give different outputs (random IV).
 *
 * @throws Error when the key is not 32 bytes
 */
export function seal(plaintext: string, key: Uint8Array): string {
  assertKey(key);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  const tag = cipher.getAuthTag();
  return [PREFIX, iv.toString('base64'), tag.toString('base64'), ct.toString('base64')].join('.');
}

/**
 * Decrypts a value made by `seal`.
 *
 * @throws Error when the value is malformed, the key is wrong, or the value
 *   was tampered with (GCM authentication failure). Never returns garbage.
 */
export function unseal(sealed: string, key: Uint8Array): string {
  assertKey(key);
  const parts = sealed.split('.');
  if (parts.length !== 4 || parts[0] !== PREFIX) throw new Error('unseal: not a v1 sealed value');
  const [, ivB64, tagB64, ctB64] = parts as [string, string, string, string];
  const iv = Buffer.from(ivB64, 'base64');
  const tag = Buffer.from(tagB64, 'base64');
  const ct = Buffer.from(ctB64, 'base64');
  if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new Error('unseal: malformed sealed value');
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(ct), decipher.final()]).toString('utf8');
  } catch (err) {
    throw new Error('unseal: authentication failed (wrong key or tampered value)', { cause: err });
  }
}

/**
 * The seal keys of a process by id (the key's fingerprint): new values are
 * sealed under the current key and stored with its id; values sealed under
 * an earlier key still open while that key is configured as a previous one,
 * so the seal key can rotate without losing what is stored.
 */
export class SealKeyring {
  readonly currentId: string;
  private readonly byId = new Map<string, Uint8Array>();

  /** @param current the key new values are sealed under; @param previous keys that still open older values */
  constructor(
    private readonly current: Uint8Array,
    previous: readonly Uint8Array[] = [],
  ) {
    this.currentId = keyFingerprint(current);
    for (const k of [current, ...previous]) this.byId.set(keyFingerprint(k), k);
  }

  seal(plaintext: string): { sealed: string; keyId: string } {
    return { sealed: seal(plaintext, this.current), keyId: this.currentId };
  }

  /** Whether a value sealed under `keyId` can be opened here. */
  has(keyId: string): boolean {
    return this.byId.has(keyId);
  }

  /**
   * Opens a value sealed under the key `keyId` (empty: the current key).
   *
   * @throws Error naming the key id (never the value) when that key is not configured
   */
  open(sealed: string, keyId: string): string {
    const key = this.byId.get(keyId || this.currentId);
    if (!key) throw new Error(`unseal: the value was sealed under seal key ${keyId}, which is not configured (current ${this.currentId})`);
    return unseal(sealed, key);
  }
}
