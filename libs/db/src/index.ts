export type { Database, Drizzle, OpenDatabaseOptions, PoolStats } from './types.js';
export { openDatabase } from './open.js';
export { migrate, type MigrateLogger, type MigrateOptions, type MigrateResult } from './migrate.js';
export { whileConnectionLost, withTxRetry } from './tx-retry.js';
export { parseInt8 } from './types-parse.js';
export { AUTOVACUUM_NAPTIME_MS, vacuumDueTables } from './embedded-vacuum.js';
