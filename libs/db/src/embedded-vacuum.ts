/**
 * Embedded Postgres (PGlite) runs as a single-user backend: there is no
 * autovacuum launcher, so the dead rows the services leave (a run's row is
 * updated a dozen times, outbox rows are deleted as they are published)
 * would stay for good, and every scan of those tables would slow down with
 * the hours a `pnpm dev` has run. This does autovacuum's job with its
 * default thresholds: a table is vacuumed once its dead rows exceed 50 +
 * 20% of its live ones, and analyzed with it. One table per statement, so
 * the services' queries go in between.
 */

/** autovacuum_naptime's default: how often autovacuum looks at each database. */
export const AUTOVACUUM_NAPTIME_MS = 60_000;

type Query = <T>(text: string) => Promise<T[]>;

/** The tables past autovacuum's threshold, vacuumed and analyzed one by one; returns their names. */
export async function vacuumDueTables(query: Query): Promise<string[]> {
  const due = await query<{ name: string }>(
    `select format('%I.%I', schemaname, relname) as name from pg_stat_user_tables
      where n_dead_tup > 50 + 0.2 * n_live_tup order by n_dead_tup desc`,
  );
  for (const t of due) await query(`vacuum (analyze) ${t.name}`);
  return due.map((t) => t.name);
}
