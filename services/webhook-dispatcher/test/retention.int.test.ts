import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { createLogger } from '@dws/log';
import { create, toBinary, WorkspaceUpsertedSchema } from '@dws/proto';
import { ids, Retention, streams, subjects } from '@dws/runtime';
import { dispatcherRetention } from '../src/store/retention.js';
import { FAST, harness, modes, OTHER_WS, until, WS, type Harness } from './harness.js';

jest.setTimeout(120_000);

describe.each(modes())('webhook-dispatcher retention (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness(mode, FAST);
  }, 60_000);
  afterAll(() => h?.close());

  /** A custom send (SendWebhook) to `path`, once it rests in one of `statuses`. */
  const deliver = async (path: string, statuses: string[], ws?: string) => {
    const deliveryId = `dlv_${ids.event()}`;
    await h.send({ deliveryId, url: `${h.receiver.base}${path}`, runId: ids.run(), stepId: deliveryId, ws });
    await h.delivery(deliveryId, statuses, 20_000);
    return deliveryId;
  };
  /** As if created and last changed `days` ago. */
  const age = (deliveryIds: string[], days: number) =>
    h.db.query(
      `update webhook_dispatcher.deliveries set created_at = now() - make_interval(days => $2::int), updated_at = now() - make_interval(days => $2::int)
        where id = any($1::text[])`,
      [deliveryIds, days],
    );
  const left = async (deliveryIds: string[]) => ({
    deliveries: Number((await h.db.query<{ n: number }>('select count(*)::int as n from webhook_dispatcher.deliveries where id = any($1::text[])', [deliveryIds]))[0]!.n),
    attempts: Number((await h.db.query<{ n: number }>('select count(*)::int as n from webhook_dispatcher.attempts where delivery_id = any($1::text[])', [deliveryIds]))[0]!.n),
  });

  it('deletes only finished deliveries past the window, with their attempts, while deliveries go out', async () => {
    await h.bus.ensureStream(streams.gatewayFacts);
    await h.bus.publish(
      subjects.workspaceUpserted,
      toBinary(WorkspaceUpsertedSchema, create(WorkspaceUpsertedSchema, { workspaceId: OTHER_WS, name: 'b', signingKey: 'k', retentionDays: 60 })),
    );
    await until(async () => (await h.db.query('select 1 from webhook_dispatcher.retention where workspace_id = $1 and days = 60', [OTHER_WS])).length === 1, 10_000, 'retention projection');

    h.receiver.script('/fail', [500]);
    h.receiver.script('/gone', [410]);
    const oldFinished: string[] = [];
    for (let i = 0; i < 12; i++) oldFinished.push(await deliver('/ok', ['succeeded']));
    oldFinished.push(await deliver('/fail', ['exhausted']), await deliver('/gone', ['dead']));
    const redelivered = await deliver('/ok', ['succeeded']);
    const fresh = await deliver('/ok', ['succeeded']);
    const keptLong = await deliver('/ok', ['succeeded'], OTHER_WS);
    const goneLong = await deliver('/ok', ['succeeded'], OTHER_WS);
    await age([...oldFinished, keptLong], 40);
    await age([goneLong], 61);
    // Created long ago, redelivered (and finished) yesterday: kept until its last change is past the window.
    await h.db.query(`update webhook_dispatcher.deliveries set created_at = now() - interval '40 days', updated_at = now() - interval '1 day' where id = $1`, [redelivered]);
    // Still to send, created and last changed long ago (a retry due later, an attempt in flight, one queued): kept.
    const unfinished: string[] = [];
    for (const status of ['failed', 'delivering', 'pending']) {
      const id = `dlv_${ids.event()}`;
      await h.db.query(
        `insert into webhook_dispatcher.deliveries (id, workspace_id, app, url, event_kind, payload, status, attempt_count, next_attempt_at, created_at, updated_at)
         values ($1, $3, 'shop', 'http://127.0.0.1:9/x', 'custom', '{}'::jsonb, $2, 1, now() + interval '1 hour', now() - interval '40 days', now() - interval '40 days')`,
        [id, status, WS],
      );
      unfinished.push(id);
    }
    const gone = [...oldFinished, goneLong];
    const kept = [...unfinished, redelivered, fresh, keptLong];
    expect((await left(gone)).attempts).toBeGreaterThanOrEqual(gone.length);

    const retention = new Retention({ db: h.db, log: createLogger({ level: 'silent' }), schema: 'webhook_dispatcher', targets: dispatcherRetention }, { batch: 4 });
    const sending = Promise.all(Array.from({ length: 8 }, () => deliver('/ok', ['succeeded'])));
    const [deleted, during] = await Promise.all([retention.sweep(), sending]);

    expect(deleted).toEqual({ deliveries: gone.length });
    expect(await left(gone)).toEqual({ deliveries: 0, attempts: 0 });
    expect((await left(kept)).deliveries).toBe(kept.length);
    expect(await left(during)).toEqual({ deliveries: during.length, attempts: during.length });
    // Reads agree: a deleted delivery is not found.
    expect((await h.fails('deliveries.get', { params: { id: gone[0]! } })).status).toBe(404);
    expect(await retention.sweep()).toEqual({ deliveries: 0 });
  });

  it("a dispatcher's pass at start deletes old finished deliveries", async () => {
    const old = [await deliver('/ok', ['succeeded']), await deliver('/ok', ['succeeded'])];
    const fresh = await deliver('/ok', ['succeeded']);
    await age(old, 31);
    await h.start();
    await until(async () => (await left(old)).deliveries === 0, 20_000, "the new dispatcher's start pass");
    expect(await left(old)).toEqual({ deliveries: 0, attempts: 0 });
    expect(await left([fresh])).toEqual({ deliveries: 1, attempts: 1 });
  });
});
