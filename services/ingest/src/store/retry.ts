import type { Database } from '@dws/db';

/** Postgres codes where retrying the whole transaction is the fix: deadlock, serialization failure. */
const RETRY = new Set(['40P01', '40001']);

/**
 * Run `fn` in a transaction, again (up to `attempts` times) when Postgres
 * aborts it as a deadlock victim. Events of one request lock gate rows in
 * their own order, so two requests may lock the same keys in opposite
 * orders; nothing is published before commit, so a retry is safe.
 */
export async function withTxRetry<T>(db: Database, fn: (tx: Database) => Promise<T>, attempts = 5): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await db.tx(fn);
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (i >= attempts || typeof code !== 'string' || !RETRY.has(code)) throw err;
      await new Promise((r) => setTimeout(r, Math.random() * 20 * i));
    }
  }
}
