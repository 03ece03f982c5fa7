/**
 * Embedded Postgres (PGlite) runs as a single-user backend: there is no
 * autovacuum launcher, so the dead rows the services leave (a run's row is
 * updated a dozen times, outbox rows are deleted as they are published)
 * would stay for good, and every scan of those tables would slow down with
 * the hours a `pnpm dev` has run; and no table would ever be analyzed, so a
 * prepared statement would keep the plan it got when its tables were near
 * empty (a sequential scan, for good: only an ANALYZE makes Postgres plan it
 * again). This does autovacuum's job with its default thresholds: a table is
 * vacuumed and analyzed once its dead rows exceed 50 + 20% of its live ones,
 * and analyzed once the rows changed since its last analyze exceed 50 + 10%.
 * One table per statement, so the services' queries go in between.
 */

/** autovacuum_naptime's default: how often autovacuum looks at each database. */
export const AUTOVACUUM_NAPTIME_MS = 60_000;

/**
 * How often the embedded database looks for tables due. Shorter than
 * autovacuum's 60 s: until a table's first analyze, a fresh `pnpm dev`'s
 * statements run on plans made for empty tables. The look itself is one read
 * of pg_stat_user_tables.
 */
export const EMBEDDED_NAPTIME_MS = 5_000;

type Query = <T>(text: string) => Promise<T[]>;

/** The tables past autovacuum's thresholds, vacuumed and analyzed (or only analyzed) one by one; returns their names. */
export async function vacuumDueTables(query: Query): Promise<string[]> {
  const due = await query<{ name: string; vacuum: boolean }>(
    `select format('%I.%I', schemaname, relname) as name, n_dead_tup > 50 + 0.2 * n_live_tup as vacuum from pg_stat_user_tables
      where n_dead_tup > 50 + 0.2 * n_live_tup or n_mod_since_analyze > 50 + 0.1 * n_live_tup order by n_dead_tup desc`,
  );
  for (const t of due) await query(t.vacuum ? `vacuum (analyze) ${t.name}` : `analyze ${t.name}`);
  return due.map((t) => t.name);
}
