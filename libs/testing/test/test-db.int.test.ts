import { describe, expect, it, jest } from '@jest/globals';
import postgres from 'postgres';
import { openEmbeddedTestDb, openTestDb, testDatabaseUrl, testDbTargets, uniqueName } from '../src/index.js';

// Starting PGlite (WASM) takes seconds on a busy 2-core machine.
jest.setTimeout(30_000);

const adminUrl = testDatabaseUrl();

describe('uniqueName', () => {
  it('is a lower-case identifier that never repeats', () => {
    const names = new Set(Array.from({ length: 100 }, () => uniqueName('My-Prefix')));
    expect(names.size).toBe(100);
    for (const n of names) expect(n).toMatch(/^my_prefix_[0-9a-z]+_[0-9a-f]{8}$/);
  });
});

describe('openEmbeddedTestDb', () => {
  it('opens PGlite in memory', async () => {
    const t = await openEmbeddedTestDb();
    expect(t.url).toBeNull();
    expect(t.db.kind).toBe('pglite');
    await t.close();
  });
});

describe('testDbTargets', () => {
  it('always offers PGlite, and Postgres when there is one', () => {
    const kinds = testDbTargets('x').map(([kind]) => kind);
    expect(kinds).toEqual(adminUrl ? ['pglite', 'postgres'] : ['pglite']);
  });
});

(adminUrl ? describe : describe.skip)('openTestDb', () => {
  const exists = async (name: string): Promise<boolean> => {
    const sql = postgres(adminUrl ?? '', { max: 1 });
    try {
      return (await sql`select 1 from pg_database where datname = ${name}`).length === 1;
    } finally {
      await sql.end();
    }
  };

  it('creates a fresh database and drops it on close', async () => {
    const t = await openTestDb('testing');
    const name = new URL(t.url).pathname.slice(1);
    expect(name).toMatch(/^t_testing_/);
    expect(await exists(name)).toBe(true);
    await t.db.query('create table x (v int)');
    await t.close();
    expect(await exists(name)).toBe(false);
  });

  it('drops the database when a migration fails', async () => {
    const before = await listTestDbs();
    await expect(
      openTestDb('testing_bad', { migrations: [{ schema: 'bad', migrationsDir: '/nonexistent/migrations' }] }),
    ).rejects.toThrow();
    const after = await listTestDbs();
    expect(after.filter((n) => n.startsWith('t_testing_bad_') && !before.includes(n))).toEqual([]);
  });

  async function listTestDbs(): Promise<string[]> {
    const sql = postgres(adminUrl ?? '', { max: 1 });
    try {
      return (await sql<{ datname: string }[]>`select datname from pg_database`).map((r) => r.datname);
    } finally {
      await sql.end();
    }
  }
});
