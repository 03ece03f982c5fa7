import { openPostgres } from './postgres-driver.js';
import type { Database, OpenDatabaseOptions } from './types.js';

/**
 * Opens the process's one Database: a postgres.js pool when `url` is given,
 * else PGlite (on disk under `dataDir`, or in memory). Same API and same value
 * shapes on both (see README, "Value mapping").
 *
 * PGlite is imported only when it is used: loading it compiles its WASM
 * build of Postgres, ~55 MB of resident memory that a fleet service on a real
 * Postgres would carry for nothing.
 */
export async function openDatabase(opts: OpenDatabaseOptions): Promise<Database> {
  if (opts.url) return openPostgres(opts.url, opts.poolSize);
  const { openPglite } = await import('./pglite-driver.js');
  return openPglite(opts.dataDir);
}
