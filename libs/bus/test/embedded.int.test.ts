import { afterAll, describe, expect, it } from '@jest/globals';
import { PGlite } from '@electric-sql/pglite';
import { createEmbeddedBus, createSqlBusStore, type Bus, type BusMessage, type SqlClient } from '../src/index.js';
import { runBusContract } from './bus-contract.js';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Wait (up to 3 s) until `list` holds `n` items, then `settleMs` more, so a delivery too many would show. */
async function collected(list: unknown[], n: number, settleMs = 0): Promise<void> {
  const end = Date.now() + 3000;
  while (list.length < n && Date.now() < end) await sleep(10);
  if (settleMs > 0) await sleep(settleMs);
}

function sqlOf(pg: PGlite): SqlClient {
  return { query: async (text, params) => (await pg.query<Record<string, unknown>>(text, params)).rows };
}

runBusContract('embedded (memory)', () => createEmbeddedBus());

describe('embedded bus on the SQL store (PGlite)', () => {
  // One PGlite (its start is the slow part); each bus gets its own schema, i.e. its own "database".
  let pg: PGlite | undefined;
  let schemas = 0;
  const open = async () => {
    pg ??= new PGlite();
    await pg.waitReady;
    return { sql: sqlOf(pg), schema: `bus_t${++schemas}` };
  };
  afterAll(async () => {
    await pg?.close();
  });

  runBusContract('embedded (PGlite store)', async () => {
    const { sql, schema } = await open();
    return createEmbeddedBus({ store: createSqlBusStore(sql, schema) });
  });

  it('redelivers what was not acked before a crash, and keeps seqs and dedupe', async () => {
    const { sql, schema } = await open();
    const spec = { name: 'CRASH', subjects: ['crash.>'] };
    const consumer = { stream: 'CRASH', durable: 'worker' };

    // First life: 3 published, 1 acked, 1 in a handler that never finishes, then the process "dies"
    // (the bus is abandoned without close()).
    const bus1 = await createEmbeddedBus({ store: createSqlBusStore(sql, schema) });
    await bus1.ensureStream(spec);
    for (let i = 1; i <= 3; i++) await bus1.publish('crash.a', enc(String(i)), { msgId: `m${i}` });
    const seen1: string[] = [];
    const hang = new Promise<void>(() => undefined);
    await bus1.consume(consumer, async (m) => {
      seen1.push(dec(m.data));
      if (m.seq === 2) await hang;
    });
    await collected(seen1, 2);
    expect(seen1).toEqual(['1', '2']);

    // Second life on the same database.
    const bus2 = await createEmbeddedBus({ store: createSqlBusStore(sql, schema) });
    try {
      await bus2.ensureStream(spec);
      const seen2: BusMessage[] = [];
      await bus2.consume(consumer, async (m) => void seen2.push(m));
      await collected(seen2, 2, 100);
      expect(seen2.map((m) => [dec(m.data), m.seq, m.deliveryCount])).toEqual([
        ['2', 2, 1],
        ['3', 3, 1],
      ]);
      // Dedupe survives the restart; seqs keep increasing.
      await bus2.publish('crash.a', enc('again'), { msgId: 'm1' });
      await bus2.publish('crash.a', enc('4'), { msgId: 'm4' });
      await collected(seen2, 3, 100);
      expect(seen2.map((m) => [dec(m.data), m.seq])).toEqual([
        ['2', 2],
        ['3', 3],
        ['4', 4],
      ]);
    } finally {
      await bus2.close();
    }
  }, 20_000);

  it('drops what every durable acked from memory at once, and keeps it stored for the duplicate window', async () => {
    const { sql, schema } = await open();
    const spec = { name: 'DONE', subjects: ['done.>'], duplicateWindowMs: 60_000 };
    const bus1 = await createEmbeddedBus({ store: createSqlBusStore(sql, schema), pruneIntervalMs: 20 });
    const got: string[] = [];
    try {
      await bus1.ensureStream(spec);
      await bus1.consume({ stream: 'DONE', durable: 'a' }, async (m) => void got.push(dec(m.data)));
      await bus1.publish('done.x', enc('1'), { msgId: 'm1' });
      await collected(got, 1, 100); // and several prunes
      // Out of memory: a durable that joins now has nothing to get.
      const late: string[] = [];
      await bus1.consume({ stream: 'DONE', durable: 'late' }, async (m) => void late.push(dec(m.data)));
      await sleep(100);
      expect(late).toEqual([]);
      // Still stored, for the window.
      const rows = await sql.query(`SELECT seq FROM ${schema}.messages WHERE stream = 'DONE'`);
      expect(rows.map((r) => Number(r.seq))).toEqual([1]);
    } finally {
      await bus1.close();
    }
    // After a restart, dedupe still knows m1, and a durable new to this process gets the window's messages.
    const bus2 = await createEmbeddedBus({ store: createSqlBusStore(sql, schema), pruneIntervalMs: 20 });
    try {
      await bus2.ensureStream(spec);
      const fresh: BusMessage[] = [];
      await bus2.consume({ stream: 'DONE', durable: 'fresh' }, async (m) => void fresh.push(m));
      await bus2.publish('done.x', enc('again'), { msgId: 'm1' });
      await bus2.publish('done.x', enc('2'), { msgId: 'm2' });
      await collected(fresh, 2, 100);
      expect(fresh.map((m) => [dec(m.data), m.seq])).toEqual([
        ['1', 1],
        ['2', 2],
      ]);
    } finally {
      await bus2.close();
    }
  }, 20_000);

  it('writes messages and acks that come together in one statement each, bytes and order intact across a restart', async () => {
    const { sql: inner, schema } = await open();
    const statements: string[] = [];
    const sql: SqlClient = { query: (text, params) => (statements.push(text), inner.query(text, params)) };
    const spec = { name: 'GROUP', subjects: ['group.>'] };
    const bytes = (i: number) => Uint8Array.from({ length: 256 }, (_, b) => (b + i) % 256);
    const bus1 = await createEmbeddedBus({ store: createSqlBusStore(sql, schema) });
    await bus1.ensureStream(spec);
    const inserts = (table: string) => statements.filter((q) => q.includes(`INSERT INTO "${schema}"."${table}"`)).length;
    await Promise.all(Array.from({ length: 50 }, (_, i) => bus1.publish('group.a', bytes(i), { msgId: `g${i}` })));
    expect(inserts('messages')).toBeLessThanOrEqual(2);
    // Acked together too: the first 30.
    const acked: number[] = [];
    const sub = await bus1.consume({ stream: 'GROUP', durable: 'd', concurrency: 64 }, async (m) => {
      if (m.seq > 30) return new Promise<void>(() => undefined); // never finishes: "crashes" unacked
      acked.push(m.seq);
    });
    await collected(acked, 30, 100);
    expect(inserts('acks')).toBeLessThanOrEqual(3);
    void sub;

    const bus2 = await createEmbeddedBus({ store: createSqlBusStore(inner, schema) });
    try {
      await bus2.ensureStream(spec);
      const got: BusMessage[] = [];
      await bus2.consume({ stream: 'GROUP', durable: 'd' }, async (m) => void got.push(m));
      await collected(got, 20, 100);
      expect(got.map((m) => m.seq)).toEqual(Array.from({ length: 20 }, (_, i) => 31 + i));
      for (const m of got) expect(Buffer.from(m.data).equals(Buffer.from(bytes(m.seq - 1)))).toBe(true);
      await bus2.publish('group.a', enc('dup'), { msgId: 'g3' }); // dedupe rebuilt from stored msgIds
      await sleep(100);
      expect(got).toHaveLength(20);
    } finally {
      await bus2.close();
    }
  }, 20_000);

  it('keeps messages for a durable that has not started yet in this process', async () => {
    const { sql, schema } = await open();
    // A tiny duplicate window so acked messages are prunable at once.
    const spec = { name: 'LATE', subjects: ['late.>'], duplicateWindowMs: 1 };
    const bus1: Bus = await createEmbeddedBus({ store: createSqlBusStore(sql, schema) });
    await bus1.ensureStream(spec);
    const got1: string[] = [];
    const sub = await bus1.consume({ stream: 'LATE', durable: 'd' }, async (m) => void got1.push(dec(m.data)));
    await bus1.publish('late.a', enc('1'));
    await collected(got1, 1);
    await sub.stop();
    await bus1.publish('late.a', enc('2'));
    await bus1.close();

    const bus2 = await createEmbeddedBus({ store: createSqlBusStore(sql, schema), pruneIntervalMs: 20 });
    try {
      await sleep(100); // prunes run before the durable rejoins: message 2 must survive them
      const rows = await sql.query(`SELECT seq FROM ${schema}.messages WHERE stream = 'LATE'`);
      expect(rows.map((r) => Number(r.seq))).toEqual([2]);
      const got2: string[] = [];
      await bus2.consume({ stream: 'LATE', durable: 'd' }, async (m) => void got2.push(dec(m.data)));
      await collected(got2, 1, 100);
      expect(got2).toEqual(['2']);
    } finally {
      await bus2.close();
    }
  }, 20_000);
});
