import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { vacuumDueTables } from '../src/embedded-vacuum.js';
import type { Database } from '../src/index.js';
import { targets } from './targets.js';

jest.setTimeout(30_000);

describe.each(targets.map((t) => [t.kind, t] as const))('vacuumDueTables on %s', (_kind, target) => {
  let db: Database;
  let close: () => Promise<void>;
  const query = <T>(text: string) => db.query<T>(text);
  // Statistics reach pg_stat_user_tables when a backend flushes them (at most once a second unless forced).
  const dead = async (table: string) => {
    await db.query('select pg_stat_force_next_flush()');
    const [row] = await db.query<{ n: number }>(`select n_dead_tup::int as n from pg_stat_user_tables where relname = '${table}'`);
    return row?.n ?? 0;
  };

  beforeAll(async () => {
    ({ db, close } = await target.open());
    await db.query('create table churned (id serial primary key, body text)');
    await db.query('create table quiet (id serial primary key, body text)');
    await db.query(`insert into churned (body) select 'x' from generate_series(1, 300)`);
    await db.query('delete from churned');
    await db.query(`insert into quiet (body) select 'x' from generate_series(1, 100)`);
    await db.query('select pg_stat_force_next_flush()');
    await db.query('analyze quiet');
    await db.query('delete from quiet where id <= 10');
  });
  afterAll(() => close());

  it("vacuums the tables past autovacuum's threshold (50 + 20% of the live rows), and only those", async () => {
    expect(await dead('churned')).toBe(300);
    expect(await dead('quiet')).toBe(10);
    const vacuumed = await vacuumDueTables(query);
    expect(vacuumed).toContain('public.churned');
    expect(vacuumed).not.toContain('public.quiet');
    expect(await dead('churned')).toBe(0);
    expect(await dead('quiet')).toBe(10);
    // Nothing is due any more.
    expect(await vacuumDueTables(query)).not.toContain('public.churned');
  });

  it('analyzes a table whose rows changed past 50 + 10% since its last analyze (a prepared plan is made again only then)', async () => {
    await db.query('create table grown (id int primary key, body text)');
    await db.query(`insert into grown select i, 'x' from generate_series(1, 1000) i`);
    await db.query('select pg_stat_force_next_flush()');
    const analyzed = async () => (await db.query<{ at: string | null }>(`select coalesce(last_analyze, last_autoanalyze)::text as at from pg_stat_user_tables where relname = 'grown'`))[0]?.at ?? null;
    if (target.kind === 'pglite') expect(await analyzed()).toBeNull(); // a server's autovacuum may have been first
    expect(await vacuumDueTables(query)).toContain('public.grown');
    expect(await analyzed()).not.toBeNull();
    await db.query('select pg_stat_force_next_flush()');
    expect(await vacuumDueTables(query)).not.toContain('public.grown');
  });
});
