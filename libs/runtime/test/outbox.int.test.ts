import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { connectJetStreamBus, createEmbeddedBus, deleteNamespace, prefixedBus, type Bus } from '@dws/bus';
import type { Database } from '@dws/db';
import { createLogger } from '@dws/log';
import { openEmbeddedTestDb, openTestDb, recordingDb, testInfra, uniqueName, type TestDb } from '@dws/testing';
import { Outbox } from '../src/outbox.js';

jest.setTimeout(30_000);

const log = createLogger({ level: 'silent' });
const infra = testInfra();
if (!infra && process.env.CI) throw new Error('TEST_NATS_URL is not set');

const until = async (pred: () => Promise<boolean> | boolean, ms: number, what: string) => {
  const deadline = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

/** The bus with its publishes recorded, and made to fail while `down` is set (the bus unreachable for a moment). */
function flaky(bus: Bus): { bus: Bus; published: string[]; down: { on: boolean } } {
  const published: string[] = [];
  const down = { on: false };
  const proxy = new Proxy(bus, {
    get(target, prop, receiver) {
      if (prop === 'publish') {
        return async (subject: string, data: Uint8Array, opts?: { msgId?: string }) => {
          if (down.on) throw new Error('bus unreachable');
          await target.publish(subject, data, opts);
          published.push(opts?.msgId ?? '');
        };
      }
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { bus: proxy, published, down };
}

/**
 * The outbox relay sleeps until its oldest row is stale instead of asking
 * every second: what it must publish (a row its own failed publish left, a
 * row a replica that died left) it still publishes on time.
 */
describe.each([['Postgres and NATS'], ['PGlite and the embedded bus']] as const)('Outbox relay on %s', (kind) => {
  const real = kind === 'Postgres and NATS';
  const run = real && !infra ? it.skip : it;
  let tdb: TestDb;
  let bus: Bus;
  const prefix = uniqueName('obx').replace(/[^A-Za-z0-9_-]/g, '');
  const stream = { name: `OBX_${prefix.toUpperCase().replace(/[^A-Z0-9_]/g, '_')}`, subjects: ['obx.>'] };

  beforeAll(async () => {
    if (real && !infra) return;
    tdb = real ? await openTestDb('obx') : await openEmbeddedTestDb();
    bus = real ? prefixedBus(await connectJetStreamBus({ servers: infra!.natsUrl }), prefix) : await createEmbeddedBus();
    await tdb.db.query('create schema obx');
    await tdb.db.query(`create table obx.outbox (id bigserial primary key, subject text not null, msg_id text not null, payload bytea not null,
                        created_at timestamptz not null default now(), claimed_until timestamptz)`);
    await bus.ensureStream(stream);
  });
  afterAll(async () => {
    await bus?.close();
    await tdb?.close();
    if (real && infra) await deleteNamespace(infra.natsUrl, prefix);
  });

  /** Write one message as a service does: in a transaction, then (if `publish`) after commit. */
  const write = async (outbox: Outbox, db: Database, msgId: string, publish = true) => {
    const pending = await db.tx((tx) => outbox.enqueue(tx, [{ subject: 'obx.fact', msgId, payload: new Uint8Array([1]) }]));
    if (publish) await outbox.afterCommit(pending);
  };
  const rows = async () => Number((await tdb.db.query<{ n: number }>('select count(*)::int as n from obx.outbox'))[0]!.n);

  run('with nothing written, looks once (one statement) and sleeps', async () => {
    const { db, calls } = recordingDb(tdb.db);
    const outbox = new Outbox({ db, bus, schema: 'obx', log });
    outbox.start();
    try {
      await until(() => calls.length > 0, 5_000, 'the first look');
      await new Promise((r) => setTimeout(r, 2_500)); // it claimed every second before
      expect(calls).toEqual(['query']);
    } finally {
      await outbox.stop();
    }
  });

  run('a publish that failed is relayed once stale, though the relay sleeps a minute between looks', async () => {
    const f = flaky(bus);
    const outbox = new Outbox({ db: tdb.db, bus: f.bus, schema: 'obx', log, pollMs: 60_000, staleMs: 500 });
    outbox.start();
    try {
      await new Promise((r) => setTimeout(r, 200)); // its first look: nothing there, a minute's sleep
      f.down.on = true;
      await write(outbox, tdb.db, 'failed-once');
      f.down.on = false;
      expect(f.published).toEqual([]);
      await until(() => f.published.includes('failed-once'), 5_000, 'the relay to publish it');
      await until(async () => (await rows()) === 0, 5_000, 'the row deleted');
    } finally {
      await outbox.stop();
    }
  });

  run('a row a replica that died left is relayed by another at its next look once stale; a published one is not', async () => {
    const f = flaky(bus);
    const writer = new Outbox({ db: tdb.db, bus: f.bus, schema: 'obx', log });
    await write(writer, tdb.db, 'published'); // published and deleted by its writer
    await write(writer, tdb.db, 'left', false); // committed, then the writer died
    await writer.stop();
    const relay = new Outbox({ db: tdb.db, bus: f.bus, schema: 'obx', log, pollMs: 1_000, staleMs: 500 });
    relay.start();
    try {
      await until(() => f.published.includes('left'), 5_000, 'the relay to publish the row left behind');
      await until(async () => (await rows()) === 0, 5_000, 'the row deleted');
      expect(f.published.filter((m) => m === 'published')).toHaveLength(1);
    } finally {
      await relay.stop();
    }
  });
});
