import postgres from 'postgres';
import { AUTOVACUUM_NAPTIME_MS, vacuumDueTables } from '@dws/db';

/**
 * A Postgres with autovacuum off (this machine's CI config turns it off:
 * /etc/postgresql/15/main/conf.d/90-ci.conf) never clears the dead rows the
 * fleet's hot tables leave (each run's row is updated a dozen times, outbox
 * rows are deleted as they are published), and a long benchmark then slows
 * down as they pile up (a 10-minute W2 soak fell from 1,600 to 560 steps/s).
 * A production server vacuums them. So, only when the server has autovacuum
 * off, the bench does autovacuum's job on its deployment's database, as the
 * embedded store does for itself (@dws/db vacuumDueTables), and says so.
 * Returns the stop function.
 */
export async function vacuumLikeAutovacuum(url: string, log: (line: string) => void): Promise<() => Promise<void>> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  const [row] = await sql<{ autovacuum: string }[]>`show autovacuum`;
  if (row?.autovacuum === 'on') {
    await sql.end();
    return async () => {};
  }
  log(`  Postgres runs with autovacuum off here: the bench vacuums and analyzes its database's tables past autovacuum's thresholds every ${AUTOVACUUM_NAPTIME_MS / 1000} s, as autovacuum would\n`);
  let running: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    running = vacuumDueTables((text) => sql.unsafe(text)).catch((err: unknown) => log(`  vacuum failed: ${(err as Error).message}\n`));
  }, AUTOVACUUM_NAPTIME_MS);
  return async () => {
    clearInterval(timer);
    await running;
    await sql.end();
  };
}

/** One round of autovacuum's job now (after a bulk load, as autovacuum would soon do), whatever the server's setting. */
export async function vacuumDueNow(url: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await vacuumDueTables((text) => sql.unsafe(text));
  } finally {
    await sql.end();
  }
}
