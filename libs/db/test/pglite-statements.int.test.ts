import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { openDatabase, type Database } from '../src/index.js';

// Starting PGlite (WASM) takes seconds on a busy 2-core machine.
jest.setTimeout(30_000);

/** The statements PGlite's session holds prepared under a name, by text. */
async function prepared(db: Database): Promise<string[]> {
  const rows = await db.query<{ statement: string }>(`select statement from pg_prepared_statements where name like 'dws_%'`);
  return rows.map((r) => r.statement);
}

describe('PGlite runs each distinct statement prepared once', () => {
  let db: Database;

  beforeAll(async () => {
    db = await openDatabase({});
    await db.query('create table items (id integer primary key, body text not null)');
  });
  afterAll(() => db.close());

  it('prepares a statement on its first run and reuses it after', async () => {
    const insert = 'insert into items (id, body) values ($1, $2) returning id';
    expect(await db.query(insert, [1, 'a'])).toEqual([{ id: 1 }]);
    const once = (await prepared(db)).filter((s) => s === insert);
    expect(once).toHaveLength(1);
    expect(await db.query(insert, [2, 'b'])).toEqual([{ id: 2 }]);
    await db.tx((tx) => tx.query(insert, [3, 'c']));
    expect((await prepared(db)).filter((s) => s === insert)).toHaveLength(1);
    expect(await db.query('select id, body from items order by id')).toEqual([
      { id: 1, body: 'a' },
      { id: 2, body: 'b' },
      { id: 3, body: 'c' },
    ]);
  });

  it('keeps at most 256 statements prepared, closing the least recently used', async () => {
    const first = 'select $1::int + 0 as n';
    await db.query(first, [1]);
    for (let i = 1; i <= 300; i++) {
      expect(await db.query<{ n: number }>(`select $1::int + ${i} as n`, [1])).toEqual([{ n: 1 + i }]);
    }
    const held = await prepared(db);
    expect(held.length).toBeLessThanOrEqual(256);
    expect(held).not.toContain(first);
    expect(held).toContain('select $1::int + 300 as n');
    // Closed, then prepared again when it comes back.
    expect(await db.query(first, [5])).toEqual([{ n: 5 }]);
  });

  it('runs a statement again after the table under it changed shape', async () => {
    await db.query('create table shapes (id integer primary key)');
    await db.query('insert into shapes (id) values (1)');
    const all = 'select * from shapes';
    expect(await db.query(all)).toEqual([{ id: 1 }]);
    await db.query(`alter table shapes add column label text not null default 'x'`);
    expect(await db.query(all)).toEqual([{ id: 1, label: 'x' }]);
  });

  it('answers a failed statement with its error and leaves the session usable', async () => {
    await expect(db.query('selec 1')).rejects.toMatchObject({ code: '42601', query: 'selec 1' });
    await expect(db.query('insert into items (id, body) values ($1, $2)', [1, 'again'])).rejects.toMatchObject({
      code: '23505',
      params: [1, 'again'],
    });
    await expect(db.query('select $1::int as n', ['not a number'])).rejects.toMatchObject({ code: '22P02' });
    expect(await db.query('select count(*)::int as n from items')).toEqual([{ n: 3 }]);
    expect(await prepared(db)).not.toContain('selec 1');
  });

  it('rejects a statement on a transaction that has ended', async () => {
    let kept: Database | undefined;
    await db.tx(async (tx) => {
      kept = tx;
      await tx.query('select 1');
    });
    await expect(kept!.query('select 1')).rejects.toThrow('Transaction is closed');
  });

  it('rejects a statement once the database is closed', async () => {
    const other = await openDatabase({});
    await other.query('select 1');
    await other.close();
    await expect(other.query('select 1')).rejects.toThrow('closed');
  });
});
