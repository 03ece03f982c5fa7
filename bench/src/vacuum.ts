import postgres from 'postgres';

/** autovacuum_naptime's default: how often a server with autovacuum on looks at each database. */
const NAPTIME_MS = 60_000;

/**
 * A Postgres with autovacuum off (this machine's CI config turns it off:
 * /etc/postgresql/15/main/conf.d/90-ci.conf) never clears the dead rows the
 * fleet's hot tables leave (each run's row is updated a dozen times, outbox
 * rows are deleted as they are published), and a long benchmark then slows
 * down as they pile up (a 10-minute W2 soak fell from 1,600 to 560 steps/s).
 * A production server vacuums them. So, only when the server has autovacuum
 * off, the bench vacuums and analyzes its deployment's database on
 * autovacuum's default cadence, and says so. Returns the stop function.
 */
export async function vacuumLikeAutovacuum(url: string, log: (line: string) => void): Promise<() => Promise<void>> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  const [row] = await sql<{ autovacuum: string }[]>`show autovacuum`;
  if (row?.autovacuum === 'on') {
    await sql.end();
    return async () => {};
  }
  log(`  Postgres runs with autovacuum off here: the bench vacuums its database every ${NAPTIME_MS / 1000} s, as autovacuum would\n`);
  let running: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    running = sql.unsafe('vacuum (analyze)').catch((err: unknown) => log(`  vacuum failed: ${(err as Error).message}\n`));
  }, NAPTIME_MS);
  return async () => {
    clearInterval(timer);
    await running;
    await sql.end();
  };
}
