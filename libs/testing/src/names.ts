import { randomBytes } from 'node:crypto';

/**
 * A name no other test (file, worker, or concurrent jest run) will pick:
 * `<prefix>_<base36 ms>_<8 hex>`, lower-case `[a-z0-9_]`, so it is valid as a
 * Postgres identifier, a NATS subject token and a stream name alike.
 * The time part lets stale leftovers be recognised by age.
 */
export function uniqueName(prefix: string): string {
  const clean = prefix.toLowerCase().replace(/[^a-z0-9_]+/g, '_').slice(0, 30);
  return `${clean}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
}
