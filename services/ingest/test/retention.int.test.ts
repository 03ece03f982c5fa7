import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { createLogger } from '@dws/log';
import { create, toBinary, WorkspaceUpsertedSchema } from '@dws/proto';
import { ids, Retention, streams, subjects } from '@dws/runtime';
import { uniqueName } from '@dws/testing';
import { ingestRetention } from '../src/store/retention.js';
import { modes, startHarness, until, type Harness } from './harness.js';

jest.setTimeout(120_000);

describe.each(modes())('ingest retention (%s)', (mode) => {
  let h: Harness;
  const wsLong = uniqueName('ws_long');

  beforeAll(async () => {
    h = await startHarness(mode);
    for (const ws of [h.ws, wsLong]) {
      await h.register(
        'shop',
        [
          { name: 'on-order', triggers: [{ event: 'order.created' }] },
          { name: 'held-debounce', triggers: [{ event: 'held.debounce' }], debounce: { period: '1h' } },
          { name: 'held-batch', triggers: [{ event: 'held.batch' }], batchEvents: { maxSize: 100, timeout: '1h' } },
        ],
        ws,
      );
    }
  }, 60_000);
  afterAll(() => h?.close());

  const send = async (name: string, ws = h.ws) => {
    const r = await h.send({ name, app: 'shop', data: { n: 1 } }, { ws });
    expect(r.status).toBe(202);
    return r.body.id as string;
  };
  /** As if received `days` ago. */
  const age = (eventIds: string[], days: number) =>
    h.db.query(`update ingest.events set received_at = now() - make_interval(days => $2::int) where id = any($1::text[])`, [eventIds, days]);
  const present = async (eventIds: string[]) =>
    (await h.db.query<{ id: string }>('select id from ingest.events where id = any($1::text[])', [eventIds])).map((r) => r.id).sort();
  const seedDelivery = async (ws: string, days: number) => {
    const id = `sd_${ids.event()}`;
    await h.db.query(
      `insert into ingest.source_deliveries (id, workspace_id, receiver_id, slug, outcome, size_bytes, headers, created_at)
       values ($1, $2, 'rcv_1', 'slug', 'verified', 2, '{}'::jsonb, now() - make_interval(days => $3::int))`,
      [id, ws, days],
    );
    return id;
  };
  const deliveriesLeft = async (deliveryIds: string[]) =>
    (await h.db.query<{ id: string }>('select id from ingest.source_deliveries where id = any($1::text[])', [deliveryIds])).map((r) => r.id).sort();

  it('deletes only events and receiver deliveries past the window, never one a debounce or batch holds, while events flow', async () => {
    // A 60-day window for one workspace, from the gateway's fact, through ingest's own durable.
    await h.bus.ensureStream(streams.gatewayFacts);
    await h.bus.publish(
      subjects.workspaceUpserted,
      toBinary(WorkspaceUpsertedSchema, create(WorkspaceUpsertedSchema, { workspaceId: wsLong, name: 'long', signingKey: 'k', retentionDays: 60 })),
    );
    await until(async () => (await h.db.query('select 1 from ingest.retention where workspace_id = $1 and days = 60', [wsLong])).length === 1, 10_000, 'retention projection');

    const old: string[] = [];
    for (let i = 0; i < 25; i++) old.push(await send('order.created'));
    const fresh: string[] = [];
    for (let i = 0; i < 3; i++) fresh.push(await send('order.created'));
    const recent = await send('order.created');
    const held = [await send('held.debounce'), await send('held.batch')];
    const keptLong = await send('order.created', wsLong);
    const goneLong = await send('order.created', wsLong);
    await age([...old, ...held, keptLong], 40);
    await age([recent], 29);
    await age([goneLong], 61);
    const sdGone = [await seedDelivery(h.ws, 31), await seedDelivery(wsLong, 61)];
    const sdKept = [await seedDelivery(h.ws, 0), await seedDelivery(wsLong, 40)];

    // The pass in batches of 7 while events keep arriving and starting runs.
    const retention = new Retention({ db: h.db, log: createLogger({ level: 'silent' }), schema: 'ingest', targets: ingestRetention }, { batch: 7 });
    const flowing = (async () => {
      const sent: string[] = [];
      for (let i = 0; i < 15; i++) sent.push(await send('order.created'));
      return sent;
    })();
    const [deleted, during] = await Promise.all([retention.sweep(), flowing]);

    expect(deleted).toEqual({ events: old.length + 1, source_deliveries: sdGone.length });
    expect(await present([...old, goneLong])).toEqual([]);
    expect(await present([...fresh, recent, ...held, keptLong, ...during])).toEqual([...fresh, recent, ...held, keptLong, ...during].sort());
    expect(await deliveriesLeft([...sdGone, ...sdKept])).toEqual([...sdKept].sort());
    // An old event reads as gone; the events of the pass started their runs and read back whole.
    expect((await h.call('events.get', { params: { id: old[0]! } })).status).toBe(404);
    const last = (await h.call('events.get', { params: { id: during.at(-1)! } })).body;
    expect(last).toMatchObject({ id: during.at(-1), name: 'order.created' });
    await h.waitStarts((s) => during.every((id) => s.some((x) => x.cmd.eventId === id && x.cmd.workflow === 'on-order')), 15_000, 'runs of the events sent during the pass');
    expect(await retention.sweep()).toEqual({ events: 0, source_deliveries: 0 });
  });

  it("a replica's pass at start deletes old events", async () => {
    const old: string[] = [];
    for (let i = 0; i < 3; i++) old.push(await send('order.created'));
    const fresh = await send('order.created');
    await age(old, 45);
    await h.replica();
    await until(async () => (await present(old)).length === 0, 20_000, "the replica's start pass");
    expect(await present([fresh])).toEqual([fresh]);
  });
});
