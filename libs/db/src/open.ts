import { openPglite } from './pglite-driver.js';
import { openPostgres } from './postgres-driver.js';
import type { Database, OpenDatabaseOptions } from './types.js';

/**
 * Opens the process's one Database: a postgres.js pool when `url` is given,
 * else PGlite (on disk under `dataDir`, or in memory). Same API and same value
 * shapes on both (see README, "Value mapping").
 */
export async function openDatabase(opts: OpenDatabaseOptions): Promise<Database> {
  if (opts.url) return openPostgres(opts.url, opts.poolSize);
  return openPglite(opts.dataDir);
}
