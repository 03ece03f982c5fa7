import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { eq, sql } from '@dws/db/orm';
import { integer, pgTable, text } from '@dws/db/pg-core';
import { openDatabase, type Database } from '../src/index.js';
import { targets } from './targets.js';

// Starting PGlite (WASM) takes seconds on a busy 2-core machine.
jest.setTimeout(30_000);

const notes = pgTable('notes', { id: integer('id').primaryKey(), body: text('body').notNull() });

describe.each(targets.map((t) => [t.kind, t] as const))('Database on %s', (kind, target) => {
  let db: Database;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ db, close } = await target.open());
    await db.query('create table notes (id integer primary key, body text not null)');
  });
  afterAll(() => close());

  it('reports its driver and health', async () => {
    expect(db.kind).toBe(kind);
    expect(await db.healthy()).toBe(true);
  });

  it('runs the generic plan of a statement, not one planned again with each Bind (GENERIC_PLANS)', async () => {
    const rows = await db.query<{ mode: string }>(`select current_setting('plan_cache_mode') as mode`);
    expect(rows[0]!.mode).toBe('force_generic_plan');
    // Planned once without its values: the plan shows the parameter, where a custom plan has the literal.
    await db.tx(async (tx) => {
      await tx.query('prepare by_id as select body from notes where id = $1');
      const plan = (await tx.query<{ 'QUERY PLAN': string }>('explain execute by_id(42)')).map((r) => r['QUERY PLAN']).join('\n');
      await tx.query('deallocate by_id');
      expect(plan).toMatch(/\$1/);
      expect(plan).not.toMatch(/42/);
    });
  });

  it('runs parameterised queries and returns plain rows', async () => {
    const rows = await db.query<{ a: number; b: string; c: null }>('select $1::int as a, $2::text as b, $3::text as c', [
      7,
      'x',
      null,
    ]);
    expect(rows).toHaveLength(1);
    expect({ ...rows[0] }).toEqual({ a: 7, b: 'x', c: null });
    expect(Object.getPrototypeOf(rows[0])).toBe(Object.prototype);
    expect(await db.query('select 1 as one where false')).toHaveLength(0);
  });

  it('maps int8, numeric, json, timestamps the same on both drivers', async () => {
    const [row] = await db.query<Record<string, unknown>>(
      `select 42::int8 as small, 9007199254740993::int8 as big, count(*) as n, 1.50::numeric as num,
              '{"a":[1,2]}'::jsonb as j, '{"a":[1,2]}'::jsonb::text as jt,
              '2024-01-02T03:04:05.678Z'::timestamptz as ts, $1::int8 as p8, $2::int8 as pbig
         from (values (1), (2)) v`,
      [5, 9007199254740993n],
    );
    expect(row).toEqual({
      small: 42,
      big: 9007199254740993n,
      n: 2,
      num: '1.50',
      j: { a: [1, 2] },
      jt: '{"a": [1, 2]}',
      ts: '2024-01-02 03:04:05.678+00',
      p8: 5,
      pbig: 9007199254740993n,
    });
  });

  it('takes json params as objects or as JSON text', async () => {
    const rows = await db.query<{ o: unknown; s: unknown }>('select $1::jsonb as o, $2::jsonb as s', [
      { k: 'v' },
      '{"k":"w"}',
    ]);
    expect(rows[0]).toEqual({ o: { k: 'v' }, s: { k: 'w' } });
  });

  it('commits a transaction', async () => {
    const out = await db.tx(async (tx) => {
      await tx.query('insert into notes (id, body) values ($1, $2)', [1, 'kept']);
      return 'ok';
    });
    expect(out).toBe('ok');
    expect(await db.query('select body from notes where id = 1')).toEqual([{ body: 'kept' }]);
  });

  it('rolls back when fn throws, and rethrows', async () => {
    await expect(
      db.tx(async (tx) => {
        await tx.query('insert into notes (id, body) values ($1, $2)', [2, 'lost']);
        throw Object.assign(new Error('boom'), { code: 'boom' });
      }),
    ).rejects.toMatchObject({ code: 'boom' });
    expect(await db.query('select * from notes where id = 2')).toEqual([]);
  });

  it('rolls back when a statement fails', async () => {
    await expect(
      db.tx(async (tx) => {
        await tx.query('insert into notes (id, body) values ($1, $2)', [3, 'lost']);
        await tx.query('insert into notes (id, body) values ($1, $2)', [1, 'duplicate key']);
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect(await db.query('select * from notes where id = 3')).toEqual([]);
  });

  it('runs drizzle inside the transaction (sees its writes, rolls back with it)', async () => {
    await expect(
      db.tx(async (tx) => {
        await tx.query('insert into notes (id, body) values ($1, $2)', [10, 'raw']);
        // Only visible if drizzle runs on the transaction's connection.
        const seen = await tx.drizzle.select().from(notes).where(eq(notes.id, 10));
        expect(seen).toEqual([{ id: 10, body: 'raw' }]);
        await tx.drizzle.insert(notes).values({ id: 11, body: 'drizzle' });
        const [count] = await tx.query<{ n: number }>('select count(*)::int as n from notes where id in (10, 11)');
        expect(count?.n).toBe(2);
        throw new Error('undo');
      }),
    ).rejects.toThrow('undo');
    expect(await db.drizzle.select().from(notes).where(sql`${notes.id} in (10, 11)`)).toEqual([]);

    await db.tx(async (tx) => {
      await tx.drizzle.insert(notes).values({ id: 12, body: 'committed' });
    });
    expect(await db.drizzle.select({ body: notes.body }).from(notes).where(eq(notes.id, 12))).toEqual([
      { body: 'committed' },
    ]);
  });

  it('reuses the transaction for a nested tx()', async () => {
    await expect(
      db.tx(async (tx) =>
        tx.tx(async (inner) => {
          expect(inner).toBe(tx);
          await inner.query('insert into notes (id, body) values ($1, $2)', [20, 'inner']);
          throw new Error('outer sees it');
        }),
      ),
    ).rejects.toThrow('outer sees it');
    expect(await db.query('select * from notes where id = 20')).toEqual([]);
  });

  it('makes drizzle.transaction() inside a tx a savepoint', async () => {
    await db.tx(async (tx) => {
      await tx.drizzle.insert(notes).values({ id: 30, body: 'outer' });
      await expect(
        tx.drizzle.transaction(async (sp) => {
          await sp.insert(notes).values({ id: 31, body: 'savepoint' });
          throw new Error('undo savepoint');
        }),
      ).rejects.toThrow('undo savepoint');
    });
    const rows = await db.query<{ id: number }>('select id from notes where id in (30, 31) order by id');
    expect(rows.map((r) => r.id)).toEqual([30]);
  });

  it('refuses close() on a transaction', async () => {
    await db.tx(async (tx) => {
      await expect(tx.close()).rejects.toThrow(/root Database/);
    });
  });
});

describe('PGlite on disk', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'dws-db-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('keeps data across reopen', async () => {
    const first = await openDatabase({ dataDir: dir });
    await first.query('create table kept (v text)');
    await first.query('insert into kept values ($1)', ['persisted']);
    await first.close();
    const second = await openDatabase({ dataDir: dir });
    expect(await second.query('select v from kept')).toEqual([{ v: 'persisted' }]);
    await second.close();
  });

  it('creates a new directory outside this process and runs with small shared buffers', async () => {
    const fresh = path.join(dir, 'fresh');
    const before = process.memoryUsage().external;
    const db = await openDatabase({ dataDir: fresh });
    expect(existsSync(path.join(fresh, 'PG_VERSION'))).toBe(true);
    expect(await db.query('show shared_buffers')).toEqual([{ shared_buffers: '32MB' }]);
    // initdb's ~600 MB WASM heap stayed in the child; opening an existing directory takes far less.
    expect(process.memoryUsage().external - before).toBeLessThan(400 * 1024 * 1024);
    await db.close();
  });
});
