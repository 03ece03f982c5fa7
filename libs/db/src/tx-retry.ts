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

/**
 * The connection failed, not the statement: Postgres restarting or failing
 * over (its backends terminated, 57P01/57P02), starting up (57P03), or not
 * answering yet. The pool opens a new connection for the next query, so
 * running an idempotent unit again is the fix. Not our own pool's end.
 */
const CONNECTION_LOST = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'CONNECTION_CLOSED', 'CONNECT_TIMEOUT', '57P01', '57P02', '57P03']);

export function isConnectionLost(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && CONNECTION_LOST.has(code);
}
