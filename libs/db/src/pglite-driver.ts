import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { PGlite } from '@electric-sql/pglite';
import { PgDialect } from 'drizzle-orm/pg-core';
import { drizzle, PgliteSession, PgliteTransaction } from 'drizzle-orm/pglite';
import { EMBEDDED_NAPTIME_MS, vacuumDueTables } from './embedded-vacuum.js';
import { preparedClient, type PgliteTx } from './pglite-statements.js';
import { GENERIC_PLANS, healthy } from './postgres-driver.js';
import { execScript, type ScriptRunner } from './symbols.js';
import { TEXT_PASSTHROUGH_OIDS } from './types-parse.js';
import type { Database, Drizzle } from './types.js';

const asText = (v: string): string => v;

/**
 * Postgres' default shared_buffers (128 MB) is sized for a server; the
 * embedded one shares a developer's machine, and its WASM heap never shrinks.
 */
const START_PARAMS = [...(PGlite as unknown as { defaultStartParams: string[] }).defaultStartParams, '-c', 'shared_buffers=32MB'];

/**
 * A new data directory is created by a short-lived child process: initdb
 * grows the WASM heap to ~600 MB, which this process would keep for good
 * (an embedded process opened on an existing directory stays near 250 MB).
 */
async function initDataDir(dataDir: string): Promise<void> {
  if (existsSync(join(dataDir, 'PG_VERSION'))) return;
  await promisify(execFile)(process.execPath, [fileURLToPath(new URL('./pglite-init.mjs', import.meta.url)), dataDir]);
}

/** PGlite (embedded Postgres in WASM): on disk under `dataDir`, else in memory. */
export async function openPglite(dataDir?: string): Promise<Database> {
  // Same value shapes as the postgres.js driver: dates and times as Postgres
  // text (what drizzle's column mappers expect there), int8 as number-or-bigint
  // and json parsed are PGlite's defaults already.
  const parsers = Object.fromEntries(TEXT_PASSTHROUGH_OIDS.map((oid) => [oid, asText]));
  if (dataDir) await initDataDir(dataDir);
  const pg = await PGlite.create({ ...(dataDir ? { dataDir } : {}), parsers, startParams: START_PARAMS });
  // Text output of timestamps in UTC, as on the postgres.js driver.
  await pg.exec(`set timezone to 'UTC'`);
  // ANALYZE (embedded-vacuum.ts) runs on the one thread every service shares: a tenth of the
  // default sample keeps its pause at ~13 ms for 200,000 rows (85 ms at the default), and the
  // plans it is for (an index or a scan) depend on the table's size, not on fine histograms.
  await pg.exec('set default_statistics_target = 10');
  await pg.exec(`set plan_cache_mode = ${GENERIC_PLANS}`);
  const client = preparedClient(pg);
  const root = drizzle(client as unknown as PGlite) as unknown as Drizzle;
  const dialect = new PgDialect();
  let vacuuming: Promise<unknown> = Promise.resolve();
  const vacuum = setInterval(() => {
    // A failure here (the database closing under it) only skips a round.
    vacuuming = vacuumDueTables(async (text) => (await pg.query<never>(text)).rows).catch(() => undefined);
  }, EMBEDDED_NAPTIME_MS);
  vacuum.unref();

  const db: Database & ScriptRunner = {
    kind: 'pglite',
    drizzle: root,
    query: async <T>(text: string, params?: unknown[]) => (await client.query<T>(text, params)).rows,
    // PGlite is one connection: a transaction holds it, and queries on the
    // root Database wait until it ends (so never use the root inside `fn`).
    tx: (fn) => client.transaction((t) => fn(bindTx(t, dialect))),
    healthy: () => healthy(db),
    close: async () => {
      clearInterval(vacuum);
      await vacuuming;
      await pg.close();
    },
    [execScript]: async (text) => {
      await pg.exec(text);
    },
  };
  return db;
}

function bindTx(t: PgliteTx, dialect: PgDialect): Database {
  let bound: Drizzle | undefined;
  const db: Database & ScriptRunner = {
    kind: 'pglite',
    get drizzle() {
      bound ??= new PgliteTransaction(
        dialect,
        new PgliteSession(t as unknown as PGlite, dialect, undefined, {}),
        undefined,
      ) as unknown as Drizzle;
      return bound;
    },
    query: async <T>(text: string, params?: unknown[]) => (await t.query<T>(text, params)).rows,
    tx: (fn) => fn(db),
    healthy: () => healthy(db),
    close: () => Promise.reject(new Error('close() is for the root Database, not a transaction')),
    [execScript]: async (text) => {
      await t.exec(text);
    },
  };
  return db;
}
