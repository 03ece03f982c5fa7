import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Database } from '../src/index.js';
import { databaseUrl, openFresh } from './targets.js';

/**
 * Transactions on a saturated pool. postgres.js 3.4.9 could send a
 * transaction's BEGIN without reserving the connection, or hand a connection
 * in the middle of a transaction to another caller (upstream issues #823,
 * #1189): queries of unrelated callers then ran inside someone else's
 * transaction, or failed with UNSAFE_TRANSACTION. Our patch of postgres.js
 * (patches/) and `max_pipeline: 0` in openPostgres close both paths. The
 * patch also makes the pool take its most recently idle connection, and
 * survive a transaction whose backend dies (upstream #1154, #1208).
 */
const d = databaseUrl ? describe : describe.skip;
const PAD = 'x'.repeat(8192);
const BIG = 'y'.repeat(256 * 1024);

d('transactions on a saturated Postgres pool', () => {
  let db: Database;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ db, close } = await openFresh(databaseUrl!)); // pool of 4
    await db.query('create table marks (id serial primary key, who text not null, pad text)');
  }, 30_000);
  afterAll(() => close?.());

  it('never runs a query inside another caller\'s transaction, nor fails a BEGIN, under load', async () => {
    const errors: unknown[] = [];
    const jobs: Promise<unknown>[] = [];
    let plain = 0;
    for (let round = 0; round < 5; round++) {
      // Keep every connection busy, then pile plain statements (pipelined onto the busy
      // connections, up to postgres.js's max_pipeline of 100 each) and transactions on top.
      for (let i = 0; i < 4; i++) jobs.push(db.query('select pg_sleep(0.05)').catch((e: unknown) => errors.push(e)));
      for (let i = 0; i < 500; i++) {
        if (i % 7 === 3) {
          jobs.push(
            db
              .tx(async (tx) => {
                // Over the socket's write buffer: the write reports backpressure, and 'drain' follows
                // while the transaction sits idle between statements.
                await tx.query(`insert into marks (who, pad) values ('tx', $1)`, [BIG]);
                await new Promise((r) => setTimeout(r, 10));
                await tx.query(`select 1`);
                throw new Error('roll back');
              })
              .catch((e: unknown) => {
                if ((e as Error).message !== 'roll back') errors.push(e);
              }),
          );
          continue;
        }
        plain++;
        // Autocommitted on its own; lost if it ran inside one of the transactions above (they roll back).
        // 8 KB each: the socket's write buffer fills, as it does under real payloads.
        jobs.push(db.query(`insert into marks (who, pad) values ('plain', $1)`, [PAD]).catch((e: unknown) => errors.push(e)));
      }
      await Promise.all(jobs);
    }
    await Promise.all(jobs);
    expect([...new Set(errors.map((e) => String((e as Error).message ?? e)))]).toEqual([]);
    const rows = await db.query<{ who: string; n: number }>('select who, count(*)::int as n from marks group by who order by who');
    // Every rolled-back transaction left nothing; every plain insert was kept.
    expect([...rows]).toEqual([{ who: 'plain', n: plain }]);
  }, 60_000);

  it('takes the most recently idle connection: statements one after another land on one backend', async () => {
    // Every connection of the pool open and idle (each held by a sleep at once).
    await Promise.all(Array.from({ length: 4 }, () => db.query('select pg_sleep(0.05)')));
    const pids = new Set<number>();
    for (let i = 0; i < 8; i++) pids.add((await db.query<{ pid: number }>('select pg_backend_pid() as pid'))[0]!.pid);
    // Round robin (postgres.js' own order) would have visited all four: each statement woke a cold backend.
    expect(pids.size).toBe(1);
  });

  it('tells its connections in use, the statements waiting for one, and how long they waited (metrics)', async () => {
    const before = db.pool!();
    expect(before.size).toBe(4);
    // Ten sleeps on four connections: six wait, the last ones for two rounds of 100 ms.
    // (postgres.js sends a statement once it is awaited.)
    const sleeps = Promise.all(Array.from({ length: 10 }, () => db.query('select pg_sleep(0.1)')));
    await new Promise((r) => setTimeout(r, 30));
    const busy = db.pool!();
    expect(busy.inUse).toBe(4);
    expect(busy.idle).toBe(0);
    expect(busy.waiting).toBe(6);
    await sleeps;
    const after = db.pool!();
    expect(after.waits - before.waits).toBe(6);
    // Four waited about one sleep, two about two.
    expect(after.waitedMs - before.waitedMs).toBeGreaterThan(600);
    expect(after).toMatchObject({ inUse: 0, idle: 4, waiting: 0 });
  });

  // What a Postgres restart or failover does to a transaction in flight. Unpatched, its rollback
  // was written to the closed socket from a timer (an uncaught TypeError: the process exited),
  // and the dead connection stayed counted in use, so sql.end() waited out its 5 s timeout.
  it('fails a transaction whose backend is terminated as a lost connection, and heals', async () => {
    // A pool of its own: the test times its close.
    const own = await openFresh(databaseUrl!);
    let started!: (pid: number) => void;
    const pid = new Promise<number>((r) => (started = r));
    const failing = own.db
      .tx(async (tx) => {
        started((await tx.query<{ pid: number }>('select pg_backend_pid() as pid'))[0]!.pid);
        await tx.query('select pg_sleep(5)');
      })
      .then(
        () => 'committed',
        (err: unknown) => (err as { code?: string }).code,
      );
    const victim = await pid;
    await new Promise((r) => setTimeout(r, 100));
    await db.query('select pg_terminate_backend($1)', [victim]);
    const failed = await failing;
    expect(['CONNECTION_CLOSED', '57P01']).toContain(failed);
    expect(await own.db.query<{ n: number }>('select 2 as n')).toEqual([{ n: 2 }]);
    expect(own.db.pool!()).toMatchObject({ inUse: 0, waiting: 0 });
    const t0 = Date.now();
    await own.close();
    expect(Date.now() - t0).toBeLessThan(2_000);
  });
});
