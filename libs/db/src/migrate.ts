import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { execScript, hasExecScript } from './symbols.js';
import { whileConnectionLost } from './tx-retry.js';
import type { Database } from './types.js';

/** A pino logger fits. */
export interface MigrateLogger {
  info(fields: Record<string, unknown>, message: string): void;
  warn?(fields: Record<string, unknown>, message: string): void;
}

export interface MigrateOptions {
  /** The service's Postgres schema (snake_case); created if missing, holds `__migrations`. */
  schema: string;
  /** Folder of drizzle-kit output: `0000_name.sql` files and optionally `meta/_journal.json`. */
  migrationsDir: string;
  /** Told about each migration applied, and of each retry. @default no logging */
  log?: MigrateLogger;
}

export interface MigrateResult {
  /** Ids (file names without `.sql`) applied by this call, in order; empty when up to date. */
  applied: string[];
}

interface Migration {
  id: string;
  file: string;
}

const BREAKPOINT = /-->\s*statement-breakpoint/;
const SCHEMA_NAME = /^[a-z_][a-z0-9_]*$/;

/**
 * Applies the migrations of `migrationsDir` not yet recorded in
 * `<schema>.__migrations`, in one transaction under an advisory lock keyed on
 * the schema, so replicas starting together apply each migration exactly once
 * (the others wait, then find nothing to do). Idempotent; safe on PGlite.
 *
 * Each migration runs with `search_path` set to the schema, so hand-written
 * SQL may leave names unqualified. drizzle-kit's `CREATE SCHEMA "x"` is run as
 * `CREATE SCHEMA IF NOT EXISTS "x"` since the schema exists by then.
 */
export async function migrate(db: Database, opts: MigrateOptions): Promise<MigrateResult> {
  const { schema, migrationsDir, log } = opts;
  if (!SCHEMA_NAME.test(schema)) throw new Error(`migrate: invalid schema name ${JSON.stringify(schema)}`);
  const migrations = await listMigrations(migrationsDir);
  // A service starting while Postgres restarts would exit on one lost connection; the unit is
  // one idempotent transaction, so run it again on a new one.
  return whileConnectionLost(
    () => applyPending(db, schema, migrations, migrationsDir, log),
    (err, retryInMs) => log?.warn?.({ schema, err: err.message, retryInMs }, 'migrate: connection lost; retrying'),
  );
}

function applyPending(db: Database, schema: string, migrations: Migration[], migrationsDir: string, log: MigrateLogger | undefined): Promise<MigrateResult> {
  const table = `"${schema}"."__migrations"`;
  return db.tx(async (tx) => {
    // The lock comes first: even CREATE SCHEMA IF NOT EXISTS races with itself.
    await tx.query('select pg_advisory_xact_lock(hashtext($1))', [`dws-migrate:${schema}`]);
    await tx.query(`create schema if not exists "${schema}"`);
    await tx.query(
      `create table if not exists ${table} (id text primary key, applied_at timestamptz not null default now())`,
    );
    await tx.query(`set local search_path to "${schema}", public`);
    const done = new Set((await tx.query<{ id: string }>(`select id from ${table}`)).map((r) => r.id));

    const applied: string[] = [];
    for (const m of migrations) {
      if (done.has(m.id)) continue;
      const text = await readFile(path.join(migrationsDir, m.file), 'utf8');
      for (const statement of splitStatements(text)) {
        // A chunk may hold several statements when written by hand.
        if (hasExecScript(tx)) await tx[execScript](statement);
        else await tx.query(statement);
      }
      await tx.query(`insert into ${table} (id) values ($1)`, [m.id]);
      applied.push(m.id);
      log?.info({ schema, migration: m.id }, 'migration applied');
    }
    return { applied };
  });
}

/** drizzle-kit's statement chunks, empty ones dropped, `CREATE SCHEMA` made idempotent. */
export function splitStatements(text: string): string[] {
  return text
    .split(BREAKPOINT)
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((s) => s.replace(/^create\s+schema\s+(?!if\s+not\s+exists)/i, 'CREATE SCHEMA IF NOT EXISTS '));
}

/** Journal order when `meta/_journal.json` exists (every `.sql` must be in it), else file-name order. */
export async function listMigrations(dir: string): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  let journal: { entries?: { idx: number; tag: string }[] } | undefined;
  try {
    journal = JSON.parse(await readFile(path.join(dir, 'meta', '_journal.json'), 'utf8')) as typeof journal;
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'ENOENT') throw err;
  }
  if (!journal) return files.map((file) => ({ id: file.slice(0, -4), file }));

  const entries = [...(journal.entries ?? [])].sort((a, b) => a.idx - b.idx);
  const listed = new Set(entries.map((e) => `${e.tag}.sql`));
  const stray = files.filter((f) => !listed.has(f));
  if (stray.length > 0) {
    throw new Error(`migrate: ${stray.join(', ')} in ${dir} not listed in meta/_journal.json`);
  }
  const present = new Set(files);
  return entries.map((e) => {
    const file = `${e.tag}.sql`;
    if (!present.has(file)) throw new Error(`migrate: ${file} is in meta/_journal.json but not in ${dir}`);
    return { id: e.tag, file };
  });
}
