import type { Database } from './types.js';

/** Postgres codes where retrying the whole transaction is the fix: deadlock, serialization failure. */
const RETRY = new Set(['40P01', '40001']);

/**
 * Run `fn` in a transaction, again (up to `attempts` times) when Postgres
 * aborts it as a deadlock victim or a serialization failure. For
 * transactions that cannot take their locks in one order (ingest's events
 * lock gate keys in their own order; a parent's cancel locks its children
 * while a child's end locks its parent). `fn` must do nothing outside the
 * transaction (publish after commit), so running it again is safe.
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
