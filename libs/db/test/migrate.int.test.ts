import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { eq } from '@dws/db/orm';
import { migrate, openDatabase, type Database } from '../src/index.js';
import { items } from './fixture/schema.js';
import { databaseUrl, openFresh, targets } from './targets.js';

// Starting PGlite (WASM) takes seconds on a busy 2-core machine.
jest.setTimeout(30_000);

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtureMigrations = path.join(here, 'fixture', 'migrations');

describe.each(targets.map((t) => [t.kind, t] as const))('migrate on %s', (_kind, target) => {
  let db: Database;
  let close: () => Promise<void>;
  let scratch: string;

  beforeAll(async () => {
    ({ db, close } = await target.open());
    scratch = await mkdtemp(path.join(tmpdir(), 'dws-migrations-'));
  });
  afterAll(async () => {
    await close();
    await rm(scratch, { recursive: true, force: true });
  });

  it('applies drizzle-kit output in journal order, then nothing', async () => {
    const logged: unknown[] = [];
    const first = await migrate(db, {
      schema: 'db_fixture',
      migrationsDir: fixtureMigrations,
      log: { info: (fields) => logged.push(fields) },
    });
    expect(first.applied).toEqual(['0000_init', '0001_add_note']);
    expect(logged).toEqual([
      { schema: 'db_fixture', migration: '0000_init' },
      { schema: 'db_fixture', migration: '0001_add_note' },
    ]);
    expect(await migrate(db, { schema: 'db_fixture', migrationsDir: fixtureMigrations })).toEqual({ applied: [] });
    const recorded = await db.query<{ id: string }>('select id from db_fixture.__migrations order by id');
    expect(recorded.map((r) => r.id)).toEqual(['0000_init', '0001_add_note']);
  });

  it('leaves a schema drizzle can use', async () => {
    await db.drizzle.insert(items).values({ workspaceId: 'ws1', id: 'a', seq: 2 ** 40, data: { x: [1] }, note: 'n' });
    const [row] = await db.drizzle.select().from(items).where(eq(items.id, 'a'));
    expect(row).toMatchObject({ workspaceId: 'ws1', id: 'a', seq: 2 ** 40, status: 'open', data: { x: [1] } });
    expect(row?.createdAt).toBeInstanceOf(Date);
    expect(Math.abs((row?.createdAt.getTime() ?? 0) - Date.now())).toBeLessThan(60_000);
  });

  it('orders by file name without a journal, runs multi-statement chunks in the schema', async () => {
    const dir = path.join(scratch, 'plain');
    await mkdir(dir);
    await writeFile(path.join(dir, '0001_second.sql'), 'insert into t (v) values (2);');
    await writeFile(
      path.join(dir, '0000_first.sql'),
      'create table t (v int);\ninsert into t (v) values (1);\n--> statement-breakpoint\ninsert into t (v) values (10);',
    );
    const out = await migrate(db, { schema: 'plain_fixture', migrationsDir: dir });
    expect(out.applied).toEqual(['0000_first', '0001_second']);
    const rows = await db.query<{ v: number }>('select v from plain_fixture.t order by v');
    expect(rows.map((r) => r.v)).toEqual([1, 2, 10]);
  });

  it('rolls back a failing migration whole', async () => {
    const dir = path.join(scratch, 'broken');
    await mkdir(dir);
    await writeFile(path.join(dir, '0000_ok.sql'), 'create table ok (v int);');
    await writeFile(path.join(dir, '0001_bad.sql'), 'create table bad (v int);\n--> statement-breakpoint\nselect nope;');
    await expect(migrate(db, { schema: 'broken_fixture', migrationsDir: dir })).rejects.toThrow(/nope/);
    const [row] = await db.query<{ n: number }>(
      `select count(*)::int as n from information_schema.schemata where schema_name = 'broken_fixture'`,
    );
    expect(row?.n).toBe(0);
  });

  it('refuses a .sql file missing from the journal', async () => {
    const dir = path.join(scratch, 'stray');
    await mkdir(path.join(dir, 'meta'), { recursive: true });
    await writeFile(path.join(dir, 'meta', '_journal.json'), JSON.stringify({ entries: [{ idx: 0, tag: '0000_a' }] }));
    await writeFile(path.join(dir, '0000_a.sql'), 'select 1;');
    await writeFile(path.join(dir, '0001_b.sql'), 'select 1;');
    await expect(migrate(db, { schema: 'stray_fixture', migrationsDir: dir })).rejects.toThrow(/0001_b\.sql/);
  });

  it('rejects a schema name that is not a plain identifier', async () => {
    await expect(migrate(db, { schema: 'x"; drop', migrationsDir: fixtureMigrations })).rejects.toThrow(/schema/);
  });
});

(databaseUrl ? describe : describe.skip)('migrate on Postgres, concurrently', () => {
  it('applies each migration once when 5 replicas start together', async () => {
    const fresh = await openFresh(databaseUrl ?? '');
    // Each "replica" has its own pool, as separate processes would.
    const replicas = await Promise.all(Array.from({ length: 5 }, () => openDatabase({ url: fresh.url, poolSize: 2 })));
    try {
      const results = await Promise.all(
        replicas.map((r) => migrate(r, { schema: 'db_fixture', migrationsDir: fixtureMigrations })),
      );
      const applied = results.flatMap((r) => r.applied).sort();
      expect(applied).toEqual(['0000_init', '0001_add_note']);
      expect(results.filter((r) => r.applied.length > 0)).toHaveLength(1);
      const [row] = await fresh.db.query<{ n: number }>('select count(*)::int as n from db_fixture.__migrations');
      expect(row?.n).toBe(2);
    } finally {
      await Promise.all(replicas.map((r) => r.close()));
      await fresh.close();
    }
  });
});

(databaseUrl ? describe : describe.skip)('migrate on Postgres, through a lost connection', () => {
  // What a Postgres restart or failover does to a service starting at that moment: its backend is
  // terminated mid-transaction (57P01 here; 57P02 or a reset socket on a crash).
  it('runs its transaction again on a new connection and applies each migration once', async () => {
    const fresh = await openFresh(databaseUrl ?? '');
    const holder = await openDatabase({ url: fresh.url, poolSize: 1 });
    const warned: unknown[] = [];
    try {
      // Holding the schema's migration lock parks migrate's transaction where the test can find it.
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const lockHeld = new Promise<void>((r) => (locked = r));
      const holding = holder.tx(async (tx) => {
        await tx.query('select pg_advisory_xact_lock(hashtext($1))', ['dws-migrate:db_fixture']);
        locked();
        await released;
      });
      await lockHeld;
      const migrating = migrate(fresh.db, {
        schema: 'db_fixture',
        migrationsDir: fixtureMigrations,
        log: { info: () => undefined, warn: (fields) => warned.push(fields) },
      });
      const waiting = async () =>
        fresh.db.query<{ pid: number }>(
          `select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like '%pg_advisory_xact_lock%'`,
        );
      let parked = await waiting();
      for (let i = 0; parked.length === 0 && i < 100; i++) {
        await new Promise((r) => setTimeout(r, 50));
        parked = await waiting();
      }
      expect(parked).toHaveLength(1);
      await fresh.db.query('select pg_terminate_backend($1)', [parked[0]!.pid]);
      release();
      await holding;

      expect((await migrating).applied).toEqual(['0000_init', '0001_add_note']);
      expect(warned).toEqual([expect.objectContaining({ schema: 'db_fixture', retryInMs: 250 })]);
      const [row] = await fresh.db.query<{ n: number }>('select count(*)::int as n from db_fixture.__migrations');
      expect(row?.n).toBe(2);
    } finally {
      await holder.close();
      await fresh.close();
    }
  });
});
