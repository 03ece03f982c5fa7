import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

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
