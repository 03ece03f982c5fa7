import { setTimeout as sleep } from 'node:timers/promises';
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

function isConnectionLost(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && CONNECTION_LOST.has(code);
}

/** How long `whileConnectionLost` keeps trying: the minute a service waits for Postgres at start. */
const PATIENCE_MS = 60_000;

/**
 * Run an idempotent `fn` again while it fails for a lost connection: what a
 * service's start-up statements (migrations, bootstrap rows) need to ride out
 * a Postgres restart instead of exiting. Not for statements whose repeat
 * would do something twice.
 */
export async function whileConnectionLost<T>(fn: () => Promise<T>, onRetry?: (err: Error, retryInMs: number) => void): Promise<T> {
  const deadline = Date.now() + PATIENCE_MS;
  for (let delay = 250; ; delay = Math.min(delay * 2, 2_000)) {
    try {
      return await fn();
    } catch (err) {
      if (!isConnectionLost(err) || Date.now() + delay > deadline) throw err;
      onRetry?.(err as Error, delay);
      await sleep(delay);
    }
  }
}
