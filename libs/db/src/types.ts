import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';

/** The drizzle handle every service uses, whichever driver is underneath. */
export type Drizzle = PgDatabase<PgQueryResultHKT, Record<string, never>>;

/**
 * One database connection (pool) shared by the services of a process.
 * Each service works only inside its own Postgres schema.
 */
export interface Database {
  readonly kind: 'postgres' | 'pglite';
  /** drizzle over postgres.js or PGlite: the same query-builder API either way. */
  readonly drizzle: Drizzle;
  /** Raw parameterised SQL ($1, $2, ...); rows as plain objects keyed by column name. */
  query<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  /** Run `fn` in one transaction; `fn` gets a Database bound to it (nested `tx` calls reuse it). */
  tx<T>(fn: (tx: Database) => Promise<T>): Promise<T>;
  /** True when a trivial query succeeds (for /readyz). */
  healthy(): Promise<boolean>;
  /** The connection pool's state, for metrics; absent on PGlite (one connection, no pool) and on a transaction. */
  pool?(): PoolStats;
  close(): Promise<void>;
}

/** A Postgres pool right now, and its waits since it opened (told by our patch of postgres.js). */
export interface PoolStats {
  /** Most connections it opens. */
  size: number;
  /** Running a statement, holding a transaction, or being opened for one. */
  inUse: number;
  idle: number;
  /** Statements waiting for a free connection now. */
  waiting: number;
  /** Statements that found every connection in use and waited, since it opened. */
  waits: number;
  /** Their time waiting, summed. */
  waitedMs: number;
}

export interface OpenDatabaseOptions {
  /** Postgres connection string. When absent, PGlite is used. */
  url?: string;
  /** PGlite data directory; absent (and no url) means in-memory. */
  dataDir?: string;
  /** postgres.js pool size. @default 10 */
  poolSize?: number;
}
