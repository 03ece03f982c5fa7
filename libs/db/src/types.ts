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
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** Postgres connection string. When absent, PGlite is used. */
  url?: string;
  /** PGlite data directory; absent (and no url) means in-memory. */
  dataDir?: string;
  /** postgres.js pool size. @default 10 */
  poolSize?: number;
}
