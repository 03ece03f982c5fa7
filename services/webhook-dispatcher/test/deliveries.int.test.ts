import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { subscribersOf } from '../src/store/endpoints.js';
import { harness, modes, OTHER_WS, until, WS, type Answer, type Harness } from './harness.js';

jest.setTimeout(60_000);

/** The README's partner-side verification, verbatim in substance: HMAC-SHA256 of `<t>.<rawBody>`, constant-time compare, 5 min skew. */
function verify(secret: string, header: string | undefined, rawBody: string): boolean {
  const m = /^t=(\d+)&s=([0-9a-f]{64})$/.exec(header ?? '');
  if (!m) return false;
  const t = Number(m[1]);
  if (Math.abs(Date.now() / 1000 - t) > 300) return false;
  const expected = createHmac('sha256', secret).update(`${t}.${rawBody}`).digest();
  return timingSafeEqual(expected, Buffer.from(m[2]!, 'hex'));
}

let seq = 0;
const runId = () => `run_${Date.now().toString(36)}_${seq++}`;

describe.each(modes())('webhook deliveries (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness(mode);
  });
  afterAll(async () => {
    await h?.close();
  });

  const endpoint = async (path: string, body: Record<string, unknown> = {}, answers: Answer[] = [200], ws = WS) => {
    const url = h.receiver.script(path, answers);
    const r = await h.call('endpoints.create', { body: { url, eventKinds: ['run.succeeded'], ...body } }, ws);
    expect(r.status).toBe(201);
    return r.body as { id: string; secret: string; url: string };
  };

  it('creates, lists, patches and deletes endpoints; the secret only in the create response', async () => {
    const e = await endpoint('/crud', { name: 'orders', app: 'shop', eventKinds: ['run.failed', 'step.failed'] });
    expect(e.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(e).toMatchObject({ name: 'orders', app: 'shop', scheme: 'hmac-sha256', eventKinds: ['run.failed', 'step.failed'], enabled: true });
    const list = (await h.call('endpoints.list')).body as any[];
    expect(list.find((x) => x.id === e.id)).toBeDefined();
    expect(JSON.stringify(list)).not.toContain(e.secret);
    const patched = await h.call('endpoints.update', { params: { id: e.id }, body: { enabled: false, name: null } });
    expect(patched.body).toMatchObject({ id: e.id, enabled: false });
    expect(patched.body.secret).toBeUndefined();
    expect(patched.body.name).toBeUndefined();
    const sealed = await h.db.query<{ secret_sealed: string; seal_key_id: string }>('select secret_sealed, seal_key_id from webhook_dispatcher.endpoints where id = $1', [e.id]);
    expect(sealed[0]!.secret_sealed).not.toContain(e.secret);
    expect(sealed[0]!.seal_key_id).toMatch(/^[0-9a-f]{16}$/);
    expect((await h.call('endpoints.delete', { params: { id: e.id } })).status).toBe(204);
    expect(await h.fails('endpoints.delete', { params: { id: e.id } })).toMatchObject({ status: 404, code: 'webhook_endpoint_not_found' });
  });

  it('refuses a bad url or eventKinds with a 400 naming the field, and adopts a given secret', async () => {
    expect(await h.fails('endpoints.create', { body: { url: 'ftp://x.example/a', eventKinds: ['run.succeeded'] } })).toMatchObject({ status: 400, code: 'invalid_webhook_endpoint', message: expect.stringMatching(/^url:/) });
    expect(await h.fails('endpoints.create', { body: { url: 'https://x.example/a', eventKinds: ['run.exploded'] } })).toMatchObject({ status: 400, message: expect.stringMatching(/^eventKinds:/) });
    expect(await h.fails('endpoints.create', { body: { url: 'https://x.example/a', eventKinds: [] } })).toMatchObject({ status: 400, message: expect.stringMatching(/^eventKinds:/) });
    expect(await h.fails('endpoints.create', { body: { url: 'https://x.example/a', eventKinds: ['run.failed'], secret: 'short' } })).toMatchObject({ status: 400, message: expect.stringMatching(/^secret:/) });
    const own = await endpoint('/adopted', { secret: 'a-partner-chosen-secret-1234' });
    expect(own.secret).toBe('a-partner-chosen-secret-1234');
    const id = runId();
    await h.runFinished({ runId: id });
    await until(() => h.receiver.at('/adopted').length > 0 && h.receiver.at('/adopted'), 10_000, 'the adopted-secret delivery');
    const got = h.receiver.at('/adopted')[0]!;
    expect(verify('a-partner-chosen-secret-1234', got.headers['x-service-signature'] as string, got.body)).toBe(true);
    await h.call('endpoints.delete', { params: { id: own.id } });
  });

  it('delivers a signed run.succeeded once however often the fact is redelivered, with the documented payload', async () => {
    const e = await endpoint('/ok', { app: 'shop' });
    const id = runId();
    for (let i = 0; i < 3; i++) await h.runFinished({ runId: id, result: { total: 42 }, tags: ['tenant:acme'] });
    const [d] = await h.deliveriesOf(id, 1);
    await h.delivery(d.id, ['succeeded']);
    await new Promise((r) => setTimeout(r, 300)); // deliberately: room for a duplicate, which must not come
    expect(await h.db.query('select id from webhook_dispatcher.deliveries where source_run_id = $1', [id])).toHaveLength(1);
    const got = h.receiver.at('/ok').filter((g) => JSON.parse(g.body).data.runId === id);
    expect(got).toHaveLength(1);
    expect(got[0]!.headers['x-service-delivery-id']).toBe(d.id);
    expect(got[0]!.headers.authorization).toBeUndefined();
    expect(verify(e.secret, got[0]!.headers['x-service-signature'] as string, got[0]!.body)).toBe(true);
    expect(verify('not-the-secret-at-all', got[0]!.headers['x-service-signature'] as string, got[0]!.body)).toBe(false);
    expect(JSON.parse(got[0]!.body)).toEqual({
      id: d.id,
      kind: 'run.succeeded',
      createdAt: expect.any(String),
      data: { runId: id, workflow: 'wf', app: 'shop', tags: ['tenant:acme'], status: 'succeeded', result: { total: 42 }, finishedAt: expect.any(String) },
    });
    const read = await h.call('deliveries.get', { params: { id: d.id } });
    expect(read.body).toMatchObject({ id: d.id, endpointId: e.id, eventKind: 'run.succeeded', sourceRunId: id, status: 'succeeded', attemptCount: 1, maxAttempts: 5, lastStatusCode: 200 });
    expect(read.body.attempts).toEqual([{ id: expect.any(String), attempt: 1, outcome: 'succeeded', statusCode: 200, responseSnippet: 'ok', durationMs: expect.any(Number), createdAt: expect.any(String) }]);
    await h.call('endpoints.delete', { params: { id: e.id } });
  });

  it('retries after a 500 and then succeeds; the snippet is bounded at 1 KiB', async () => {
    const e = await endpoint('/flaky', {}, [500, 200]);
    const id = runId();
    await h.runFinished({ runId: id });
    const [d] = await h.deliveriesOf(id, 1);
    await h.delivery(d.id, ['succeeded']);
    const { body } = await h.call('deliveries.get', { params: { id: d.id } });
    expect(body.attempts.map((a: any) => [a.attempt, a.outcome, a.statusCode])).toEqual([[1, 'http_error', 500], [2, 'succeeded', 200]]);
    expect(Buffer.byteLength(body.attempts[0].responseSnippet)).toBe(1024);
    await h.call('endpoints.delete', { params: { id: e.id } });
  });

  it('exhausts after 5 attempts, then redeliver grants a fresh budget and keeps the log', async () => {
    const e = await endpoint('/down', {}, [503]);
    const id = runId();
    await h.runFinished({ runId: id });
    const [d] = await h.deliveriesOf(id, 1);
    const done = await h.delivery(d.id, ['exhausted'], 20_000);
    expect(done.attempt_count).toBe(5);
    h.receiver.script('/down', [200]);
    expect((await h.call('deliveries.redeliver', { params: { id: d.id } })).status).toBe(204);
    const again = await h.delivery(d.id, ['succeeded']);
    expect([again.attempt_count, again.max_attempts]).toEqual([6, 10]);
    const { body } = await h.call('deliveries.get', { params: { id: d.id } });
    expect(body.attempts.map((a: any) => a.outcome)).toEqual(['http_error', 'http_error', 'http_error', 'http_error', 'http_error', 'succeeded']);
    await h.call('endpoints.delete', { params: { id: e.id } });
  });

  it('is dead on a 410 after one attempt', async () => {
    const e = await endpoint('/gone', {}, [410]);
    const id = runId();
    await h.runFinished({ runId: id });
    const [d] = await h.deliveriesOf(id, 1);
    expect((await h.delivery(d.id, ['dead'])).attempt_count).toBe(1);
    await h.call('endpoints.delete', { params: { id: e.id } });
  });

  it('does not follow a redirect: the 302 is the attempt, retried, and the target never hit', async () => {
    const e = await endpoint('/moved', {}, ['redirect', 200]);
    const id = runId();
    await h.runFinished({ runId: id });
    const [d] = await h.deliveriesOf(id, 1);
    await h.delivery(d.id, ['succeeded']);
    const { body } = await h.call('deliveries.get', { params: { id: d.id } });
    expect(body.attempts.map((a: any) => [a.outcome, a.statusCode])).toEqual([['http_error', 302], ['succeeded', 200]]);
    expect(h.receiver.at('/redirected')).toHaveLength(0);
    await h.call('endpoints.delete', { params: { id: e.id } });
  });

  it('counts a receiver that trickles its body past the total attempt budget as a timeout', async () => {
    const e = await endpoint('/slow', {}, ['trickle', 200]);
    const id = runId();
    await h.runFinished({ runId: id });
    const [d] = await h.deliveriesOf(id, 1);
    await h.delivery(d.id, ['succeeded']);
    const { body } = await h.call('deliveries.get', { params: { id: d.id } });
    expect(body.attempts[0]).toMatchObject({ attempt: 1, outcome: 'timeout', error: expect.stringContaining('800 ms') });
    // The budget is total: headers came at once, the body never finished, and the attempt ended near 800 ms.
    expect(body.attempts[0].durationMs).toBeGreaterThanOrEqual(750);
    expect(body.attempts[0].durationMs).toBeLessThan(3000);
    await h.call('endpoints.delete', { params: { id: e.id } });
  });

  it('answers 409 to a redeliver while delivering', async () => {
    const e = await endpoint('/held', {}, ['hold', 200]);
    const id = runId();
    await h.runFinished({ runId: id });
    const [d] = await h.deliveriesOf(id, 1);
    await h.delivery(d.id, ['delivering']);
    expect(await h.fails('deliveries.redeliver', { params: { id: d.id } })).toMatchObject({ status: 409, code: 'delivery_in_flight' });
    await h.delivery(d.id, ['succeeded']);
    await h.call('endpoints.delete', { params: { id: e.id } });
  });

  it('signs with the rotated secret: the old one no longer verifies', async () => {
    const e = await endpoint('/rotate');
    const rotated = await h.call('endpoints.update', { params: { id: e.id }, body: { rotateSecret: true } });
    const secret = rotated.body.secret as string;
    expect(secret).toMatch(/^whsec_/);
    expect(secret).not.toBe(e.secret);
    const id = runId();
    await h.runFinished({ runId: id });
    const got = await until(() => h.receiver.at('/rotate')[0], 10_000, 'the delivery after rotation');
    expect(verify(secret, got.headers['x-service-signature'] as string, got.body)).toBe(true);
    expect(verify(e.secret, got.headers['x-service-signature'] as string, got.body)).toBe(false);
    await h.call('endpoints.delete', { params: { id: e.id } });
  });

  it('queues only for matching enabled endpoints: app filter, eventKinds, disabled', async () => {
    const shopOnly = await endpoint('/f-shop', { app: 'shop', eventKinds: ['run.failed'] });
    const allApps = await endpoint('/f-all', { eventKinds: ['run.failed', 'step.failed', 'run.cancelled'] });
    const disabled = await endpoint('/f-off', { eventKinds: ['run.failed'] });
    await h.call('endpoints.update', { params: { id: disabled.id }, body: { enabled: false } });
    const a = runId();
    const b = runId();
    const c = runId();
    await h.runFinished({ runId: a, app: 'shop', status: 'failed' });
    await h.runFinished({ runId: b, app: 'billing', status: 'failed' });
    await h.runFinished({ runId: c, app: 'shop', status: 'succeeded' });
    await h.stepFailed({ runId: a, stepId: 's1' });
    await h.stepFailed({ runId: a, stepId: 's1' });
    await h.runFinished({ runId: b, app: 'billing', status: 'cancelled' });
    const ofA = await h.deliveriesOf(a, 3);
    expect(ofA.map((d) => `${d.endpoint_id === shopOnly.id ? 'shop' : 'all'}:${d.event_kind}`).sort()).toEqual(['all:run.failed', 'all:step.failed', 'shop:run.failed']);
    const ofB = await h.deliveriesOf(b, 2);
    expect(ofB.map((d) => `${d.endpoint_id === allApps.id ? 'all' : '?'}:${d.event_kind}`).sort()).toEqual(['all:run.cancelled', 'all:run.failed']);
    const step = ofA.find((d) => d.event_kind === 'step.failed');
    expect(step.payload).toMatchObject({ kind: 'step.failed', data: { runId: a, stepId: 's1', stepName: 'charge', attempts: 3, error: { message: 'declined' } } });
    expect(ofB.find((d) => d.event_kind === 'run.cancelled').payload.data).toMatchObject({ status: 'cancelled', error: { message: 'boom' } });
    await new Promise((r) => setTimeout(r, 300)); // deliberately: room for a stray delivery to c or to the disabled endpoint
    expect(await h.db.query('select id from webhook_dispatcher.deliveries where source_run_id = $1', [c])).toHaveLength(0);
    expect(await h.db.query('select id from webhook_dispatcher.deliveries where endpoint_id = $1', [disabled.id])).toHaveLength(0);
    for (const e of [shopOnly, allApps, disabled]) await h.call('endpoints.delete', { params: { id: e.id } });
  });

  it('looks up the endpoints of several facts in one statement, each fact its own list', async () => {
    const shop = await endpoint('/g-shop', { app: 'shop', eventKinds: ['run.failed'] });
    const all = await endpoint('/g-all', { eventKinds: ['run.failed', 'run.succeeded'] });
    const other = await endpoint('/g-other', { eventKinds: ['run.failed'] }, [200], OTHER_WS);
    const ours = new Set([shop.id, all.id, other.id]);
    const lists = await subscribersOf(h.db, [
      { workspaceId: WS, app: 'shop', kind: 'run.failed' },
      { workspaceId: WS, app: 'billing', kind: 'run.failed' },
      { workspaceId: OTHER_WS, app: 'shop', kind: 'run.failed' },
      { workspaceId: WS, app: 'shop', kind: 'step.failed' },
      { workspaceId: WS, app: 'shop', kind: 'run.succeeded' },
    ]);
    expect(lists.map((l) => l.map((e) => e.id).filter((id) => ours.has(id)).sort())).toEqual([[shop.id, all.id].sort(), [all.id], [other.id], [], [all.id]]);
    expect(lists[0]!.find((e) => e.id === shop.id)!.url).toBe(shop.url);
    for (const [e, ws] of [[shop, WS], [all, WS], [other, OTHER_WS]] as const) await h.call('endpoints.delete', { params: { id: e.id } }, ws);
  });

  it('lists with status and app filters, a clamped limit and a keyset cursor; stats per endpoint', async () => {
    const e = await endpoint('/pages', { eventKinds: ['run.succeeded', 'run.failed'] }, [200]);
    const dead = await endpoint('/pages-dead', { eventKinds: ['run.failed'] }, [404]);
    const runs = [runId(), runId(), runId()];
    for (const r of runs) await h.runFinished({ runId: r, app: 'pager' });
    const failedRun = runId();
    await h.runFinished({ runId: failedRun, app: 'pager', status: 'failed' });
    const [dd] = await h.deliveriesOf(failedRun, 2);
    await until(async () => (await h.db.query<any>("select id from webhook_dispatcher.deliveries where app = 'pager' and status in ('succeeded', 'dead')")).length === 5, 10_000, 'pager deliveries to settle');
    const page1 = await h.call('deliveries.list', { query: { app: 'pager', limit: '2' } });
    expect(page1.body).toHaveLength(2);
    const cursor = page1.headers['x-next-cursor'];
    expect(cursor).toBeDefined();
    const page2 = await h.call('deliveries.list', { query: { app: 'pager', limit: '2', cursor } });
    const page3 = await h.call('deliveries.list', { query: { app: 'pager', limit: '2', cursor: page2.headers['x-next-cursor'] } });
    expect(page3.body).toHaveLength(1);
    expect(page3.headers['x-next-cursor']).toBeUndefined();
    const all = [...page1.body, ...page2.body, ...page3.body];
    expect(new Set(all.map((d: any) => d.id)).size).toBe(5);
    expect(all.map((d: any) => d.createdAt)).toEqual([...all.map((d: any) => d.createdAt)].sort().reverse());
    expect((await h.call('deliveries.list', { query: { app: 'pager', status: 'dead' } })).body.map((d: any) => d.endpointId)).toEqual([dead.id]);
    expect((await h.call('deliveries.list', { query: { limit: '5000' } })).body.length).toBeLessThanOrEqual(200);
    expect(await h.fails('deliveries.list', { query: { status: 'lost' } })).toMatchObject({ status: 400, code: 'invalid_status' });
    expect(await h.fails('deliveries.list', { query: { cursor: 'garbage' } })).toMatchObject({ status: 400, code: 'invalid_cursor' });
    expect(dd).toBeDefined();
    const stats = (await h.call('endpoints.stats')).body as any[];
    expect(stats.find((s) => s.endpointId === e.id)).toEqual({ endpointId: e.id, delivered: 4, succeeded: 4, failed: 0, lastDelivery: expect.any(String) });
    expect(stats.find((s) => s.endpointId === dead.id)).toMatchObject({ delivered: 1, succeeded: 0, failed: 1 });
    const future = (await h.call('endpoints.stats', { query: { since: new Date(Date.now() + 60_000).toISOString() } })).body as any[];
    expect(future.find((s) => s.endpointId === e.id)).toEqual({ endpointId: e.id, delivered: 0, succeeded: 0, failed: 0 });
    expect(await h.fails('endpoints.stats', { query: { since: 'yesterday' } })).toMatchObject({ status: 400, code: 'invalid_since' });
    for (const x of [e, dead]) await h.call('endpoints.delete', { params: { id: x.id } });
  });

  it("answers 404 for another workspace's endpoints and deliveries", async () => {
    const e = await endpoint('/tenant');
    const id = runId();
    await h.runFinished({ runId: id });
    const [d] = await h.deliveriesOf(id, 1);
    await h.delivery(d.id, ['succeeded']);
    expect(await h.fails('endpoints.update', { params: { id: e.id }, body: { enabled: false } }, OTHER_WS)).toMatchObject({ status: 404, code: 'webhook_endpoint_not_found' });
    expect(await h.fails('endpoints.delete', { params: { id: e.id } }, OTHER_WS)).toMatchObject({ status: 404 });
    expect(await h.fails('deliveries.get', { params: { id: d.id } }, OTHER_WS)).toMatchObject({ status: 404, code: 'webhook_delivery_not_found' });
    expect(await h.fails('deliveries.redeliver', { params: { id: d.id } }, OTHER_WS)).toMatchObject({ status: 404, code: 'webhook_delivery_not_found' });
    expect((await h.call('endpoints.list', {}, OTHER_WS)).body.find((x: any) => x.id === e.id)).toBeUndefined();
    expect((await h.call('deliveries.list', {}, OTHER_WS)).body.find((x: any) => x.id === d.id)).toBeUndefined();
    // A fact of the other workspace queues nothing for this one's endpoint.
    const other = runId();
    await h.runFinished({ runId: other, ws: OTHER_WS });
    await new Promise((r) => setTimeout(r, 300)); // deliberately: room for a wrong delivery
    expect(await h.db.query('select id from webhook_dispatcher.deliveries where source_run_id = $1', [other])).toHaveLength(0);
    await h.call('endpoints.delete', { params: { id: e.id } });
  });

  it('sends a custom send unsigned, once however often the hand-off is redelivered', async () => {
    const url = h.receiver.script('/custom', [200]);
    const id = `dlv_custom_${seq++}`;
    for (let i = 0; i < 3; i++) await h.send({ deliveryId: id, url, runId: 'run_custom', stepId: 'a'.repeat(64) });
    const d = await h.delivery(id, ['succeeded']);
    expect(d.attempt_count).toBe(1);
    await new Promise((r) => setTimeout(r, 300)); // deliberately: room for a second send, which must not happen
    const got = h.receiver.at('/custom');
    expect(got).toHaveLength(1);
    expect(got[0]!.headers['x-service-signature']).toBeUndefined();
    expect(got[0]!.headers['x-service-delivery-id']).toBe(id);
    expect(JSON.parse(got[0]!.body)).toEqual({ hello: 1 });
    const read = await h.call('deliveries.get', { params: { id } });
    expect(read.body).toMatchObject({ eventKind: 'custom', status: 'succeeded' });
    expect(read.body.endpointId).toBeUndefined();
  });
});

describe.each(modes())('webhook sender between deliveries (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    // Looks once a minute at most: anything sent on time was sent because the sender slept until it was due.
    h = await harness(mode, { attemptTimeoutMs: 800, backoffBaseMs: 300, pollMs: 60_000 });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('sends a new delivery at once and its retry when the backoff ends, not at the next poll', async () => {
    const url = h.receiver.script('/once-flaky', [503, 200]);
    expect((await h.call('endpoints.create', { body: { url, eventKinds: ['run.succeeded'] } })).status).toBe(201);
    const id = runId();
    const t0 = Date.now();
    await h.runFinished({ runId: id });
    const [d] = await h.deliveriesOf(id, 1);
    await h.delivery(d.id, ['succeeded'], 15_000);
    expect(Date.now() - t0).toBeLessThan(10_000);
    const { body } = await h.call('deliveries.get', { params: { id: d.id } });
    expect(body.attempts.map((a: any) => [a.attempt, a.statusCode])).toEqual([[1, 503], [2, 200]]);
  });
});
