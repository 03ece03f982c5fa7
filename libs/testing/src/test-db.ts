import { migrate, openDatabase, type Database, type MigrateOptions } from '@dws/db';
import postgres from 'postgres';
import { testDatabaseUrl } from './infra.js';
import { uniqueName } from './names.js';

/** A database of its own for one test file. */
export interface TestDb {
  db: Database;
  /** Connection string of the fresh database; null on PGlite. */
  url: string | null;
  /** Closes the pool and drops the database (PGlite: just closes). */
  close(): Promise<void>;
}

export interface TestDbOptions {
  /** Migrations to apply once the database is open, in order. @default none */
  migrations?: Omit<MigrateOptions, 'log'>[];
  /** postgres.js pool size. @default 5 */
  poolSize?: number;
}

/**
 * Creates `t_<prefix>_<time>_<random>` on the real Postgres (via the admin
 * database of TEST_DATABASE_URL), opens it and applies `migrations`. `close()`
 * drops it WITH (FORCE), so files run in parallel and leave nothing behind.
 * Throws when there is no real Postgres: guard with `testDatabaseUrl()`.
 */
export async function openTestDb(prefix: string, opts: TestDbOptions = {}): Promise<TestDb & { url: string }> {
  const adminUrl = testDatabaseUrl();
  if (!adminUrl) {
    throw new Error('openTestDb: TEST_DATABASE_URL is not set (no Postgres found by the jest globalSetup)');
  }
  const name = uniqueName(`t_${prefix}`);
  await admin(adminUrl, (sql) => sql.unsafe(`create database "${name}"`));
  const url = withDatabase(adminUrl, name);
  let db: Database | undefined;
  try {
    db = await openDatabase({ url, poolSize: opts.poolSize ?? 5 });
    for (const m of opts.migrations ?? []) await migrate(db, m);
  } catch (err) {
    await db?.close();
    await dropDatabase(adminUrl, name);
    throw err;
  }
  const opened = db;
  return {
    db: opened,
    url,
    close: async () => {
      await opened.close();
      await dropDatabase(adminUrl, name);
    },
  };
}

/** PGlite in memory, with `migrations` applied: the embedded twin of {@link openTestDb}. */
export async function openEmbeddedTestDb(opts: Omit<TestDbOptions, 'poolSize'> = {}): Promise<TestDb & { url: null }> {
  const db = await openDatabase({});
  try {
    for (const m of opts.migrations ?? []) await migrate(db, m);
  } catch (err) {
    await db.close();
    throw err;
  }
  return { db, url: null, close: () => db.close() };
}

/**
 * The databases a contract suite runs against: PGlite always, real Postgres
 * when there is one. `describe.each(testDbTargets('x'))('%s', (_kind, open) => ...)`.
 */
export function testDbTargets(
  prefix: string,
  opts: TestDbOptions = {},
): [kind: 'pglite' | 'postgres', open: () => Promise<TestDb>][] {
  const targets: [kind: 'pglite' | 'postgres', open: () => Promise<TestDb>][] = [
    ['pglite', () => openEmbeddedTestDb(opts)],
  ];
  if (testDatabaseUrl()) targets.push(['postgres', () => openTestDb(prefix, opts)]);
  return targets;
}

async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  await admin(adminUrl, (sql) => sql.unsafe(`drop database if exists "${name}" with (force)`));
}

async function admin(url: string, fn: (sql: postgres.Sql) => Promise<unknown>): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await fn(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
