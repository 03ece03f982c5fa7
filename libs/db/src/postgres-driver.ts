import postgres from 'postgres';
import { PgDialect } from 'drizzle-orm/pg-core';
import { drizzle, PostgresJsSession, PostgresJsTransaction } from 'drizzle-orm/postgres-js';
import { execScript, type ScriptRunner } from './symbols.js';
import { parseInt8, serializeJson } from './types-parse.js';
import type { Database, Drizzle, PoolStats } from './types.js';

type Client = postgres.Sql | postgres.TransactionSql;

const NO_PIPELINING = { max_pipeline: 0 };

/**
 * Every named statement runs its generic plan, never a custom one planned
 * again at each Bind. The hot statements (a pass, a checkpoint, a new run,
 * an event) are data-modifying CTEs over jsonb_to_recordset with
 * `id = any($n)`: the generic plan guesses 10 ids where a custom one sees
 * the 1 it gets, costs 4x more on paper, so Postgres' `auto` mode plans every
 * execution afresh once scheduler.runs is big: 0.5-1 ms of planning each
 * (more than the execution) for the same index scans. Partial indexes are still used: every query
 * writes their predicates as literals, not parameters.
 */
export const GENERIC_PLANS = 'force_generic_plan';

/** A postgres.js pool with drizzle over it. */
export function openPostgres(url: string, poolSize = 10): Database {
  const sql = postgres(url, {
    max: poolSize,
    // No pipelining onto busy connections: postgres.js 3.4.9 could hand a
    // connection that was inside a transaction to a pipelined query (upstream
    // #823); with our patch of it (patches/) this closes every such path.
    // (A documented option its typings leave out.)
    ...NO_PIPELINING,
    // Named server-side statements per connection: the raw queries of a
    // service are a fixed set of texts, so the cache stays small.
    prepare: true,
    // NOTICEs ("schema already exists, skipping", ...) are not ours to print.
    onnotice: () => {},
    // Text output of timestamps in UTC, whatever the server's default. Generic
    // plans: see GENERIC_PLANS.
    connection: { TimeZone: 'UTC', plan_cache_mode: GENERIC_PLANS },
    types: {
      int8: { to: 20, from: [20], serialize: (v: number | bigint) => String(v), parse: parseInt8 },
    },
  });
  const root = drizzle(sql) as unknown as Drizzle;
  // drizzle (above) made every date/time type come back as Postgres text and
  // json params pass through untouched; also accept objects for json params
  // of raw queries, as PGlite does. Must run after drizzle() since it resets them.
  const serializers = sql.options.serializers as Record<number, (v: unknown) => unknown>;
  serializers[114] = serializeJson;
  serializers[3802] = serializeJson;
  const dialect = new PgDialect();

  const db: Database & ScriptRunner = {
    kind: 'postgres',
    drizzle: root,
    query: (text, params) => run(sql, text, params),
    tx: <T>(fn: (tx: Database) => Promise<T>) =>
      sql.begin((txSql) => fn(bindTx(txSql, dialect))) as Promise<T>,
    healthy: () => healthy(db),
    // Added to postgres.js by our patch (patches/): its typings do not know it.
    pool: () => (sql as unknown as { dwsPool(): PoolStats }).dwsPool(),
    close: () => sql.end({ timeout: 5 }),
    [execScript]: async (text) => {
      await sql.unsafe(text);
    },
  };
  return db;
}

function bindTx(client: postgres.TransactionSql, dialect: PgDialect): Database {
  // Built on first use: many transactions only run raw queries. A drizzle
  // transaction object (not a plain db) so `drizzle.transaction()` inside
  // becomes a savepoint, as it would with drizzle's own transactions.
  let bound: Drizzle | undefined;
  const db: Database & ScriptRunner = {
    kind: 'postgres',
    get drizzle() {
      bound ??= new PostgresJsTransaction(
        dialect,
        // Typed for a pool; a transaction handle has the same query API.
        new PostgresJsSession(client as unknown as postgres.Sql, dialect, undefined, {}) as never,
        undefined,
      ) as unknown as Drizzle;
      return bound;
    },
    query: (text, params) => run(client, text, params),
    tx: (fn) => fn(db),
    healthy: () => healthy(db),
    close: () => Promise.reject(new Error('close() is for the root Database, not a transaction')),
    [execScript]: async (text) => {
      await client.unsafe(text);
    },
  };
  return db;
}

function run<T>(client: Client, text: string, params?: unknown[]): Promise<T[]> {
  // Without params postgres.js uses the simple protocol (one round trip, no
  // statement to cache); with params, a named prepared statement.
  const q =
    params && params.length > 0
      ? client.unsafe(text, params as postgres.ParameterOrJSON<never>[], { prepare: true })
      : client.unsafe(text);
  return q as unknown as Promise<T[]>;
}

export async function healthy(db: Database): Promise<boolean> {
  try {
    await db.query('select 1');
    return true;
  } catch {
    return false;
  }
}
