import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { signInvoke } from '@dws/protocol';
import { callApi } from '@dws/runtime';
import { uniqueName } from '@dws/testing';
import { modes, startHarness, until, type Harness } from './harness.js';

const MiB = 1024 * 1024;

describe.each(modes())('ingest webhook receivers (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode);
    await h.register('shop', [{ name: 'on-payment', triggers: [{ event: 'payment.received' }] }]);
    await h.register('billing', [{ name: 'bill-payment', triggers: [{ event: 'payment.received' }] }]);
  }, 60_000);
  afterAll(() => h?.close());

  /** An ingest op with a JSON body, as the gateway forwards it. */
  async function op(
    name: string,
    payload: { params?: Record<string, string>; query?: Record<string, unknown>; body?: unknown },
    ws = h.ws,
  ): Promise<any> {
    try {
      const res = await callApi(
        h.bus,
        'ingest',
        name,
        { workspaceId: ws, actor: 'tester', keyKind: 'secret', requestId: '' },
        {
          params: payload.params,
          query: payload.query,
          rawBody: payload.body === undefined ? undefined : JSON.stringify(payload.body),
        },
        60_000,
      );
      return { status: res.status, body: res.bodyJson ? JSON.parse(res.bodyJson) : undefined, headers: res.headers };
    } catch (err) {
      const e = err as { status?: number; code?: string; message: string };
      if (e.status) return { status: e.status, body: { error: { code: e.code, message: e.message } } };
      throw err;
    }
  }

  /** POST /v1/webhooks/{slug} as the gateway forwards it: no workspace, the raw text and the headers. */
  const post = (slug: string, raw: string, headers: Record<string, string>, extra: { tooLarge?: boolean; sizeBytes?: number } = {}) =>
    op('webhooks.receive', { params: { slug }, body: { rawBody: raw, headers, ...extra } }, '');

  const signed = (secret: string, raw: string, now?: number) => ({
    'X-Service-Signature': signInvoke(secret, raw, now),
    'content-type': 'application/json',
  });

  async function createReceiver(body: Record<string, unknown>, ws = h.ws) {
    const r = await op('receivers.create', { body }, ws);
    expect(r.status).toBe(201);
    return r.body as { id: string; slug: string; secret: string };
  }

  const deliveries = async (ws = h.ws) => (await op('sourceDeliveries.list', { query: { limit: 200 } }, ws)).body as any[];

  it('a verified post becomes an event named by eventName for the receiver app, which triggers a workflow; recorded with its event', async () => {
    const rc = await createReceiver({ name: 'stripe', app: 'shop', eventName: 'payment.received' });
    expect(rc.secret).toMatch(/^[0-9a-f]{64}$/);
    expect(rc).toMatchObject({
      app: 'shop',
      eventName: 'payment.received',
      enabled: true,
      scheme: 'hmac-sha256',
      slug: expect.any(String),
    });
    // The secret is shown once: never in a read.
    const list = await op('receivers.list', {});
    expect(list.body.find((r: any) => r.id === rc.id)).toBeDefined();
    expect(JSON.stringify(list.body)).not.toContain(rc.secret);

    const raw = JSON.stringify({ amount: 4200, currency: 'eur', note: 'spaced  \u00e9' });
    const r = await post(rc.slug, raw, signed(rc.secret, raw));
    expect(r).toMatchObject({ status: 202, body: { eventId: expect.stringMatching(/^evt_/), deduped: false } });
    const ev = await op('events.get', { params: { id: r.body.eventId } });
    expect(ev.body).toMatchObject({ name: 'payment.received', app: 'shop', source: 'api', data: JSON.parse(raw) });
    expect(ev.body.triggered.map((t: any) => `${t.app}/${t.workflow}`)).toEqual(['shop/on-payment']);
    const [run] = await h.waitStarts((s) => s.some((x) => x.cmd.eventId === r.body.eventId), 15_000, 'the run the webhook started');
    const started = [...h.starts.values()].find((x) => x.cmd.eventId === r.body.eventId)!;
    expect(run).toBeDefined();
    expect(started.cmd).toMatchObject({ workspaceId: h.ws, app: 'shop', workflow: 'on-payment', eventName: 'payment.received' });
    expect(started.input).toEqual(JSON.parse(raw));

    const rec = (await deliveries()).find((d) => d.eventId === r.body.eventId);
    expect(rec).toMatchObject({
      id: r.body.deliveryId,
      receiverId: rc.id,
      slug: rc.slug,
      outcome: 'verified',
      verified: true,
      sizeBytes: Buffer.byteLength(raw),
      headers: { 'content-type': 'application/json' },
    });
    expect(JSON.stringify(rec)).not.toContain('x-service-signature');
  });

  it('targetApp routes the event to that app; a partner delivery id dedupes a retried post', async () => {
    const rc = await createReceiver({ app: 'shop', targetApp: 'billing', eventName: 'payment.received' });
    const raw = '{"id":"pay_1"}';
    const headers = { ...signed(rc.secret, raw), 'X-Service-Delivery-Id': uniqueName('dlv') };
    const first = await post(rc.slug, raw, headers);
    expect(first.status).toBe(202);
    const ev = await op('events.get', { params: { id: first.body.eventId } });
    expect(ev.body.triggered.map((t: any) => `${t.app}/${t.workflow}`)).toEqual(['billing/bill-payment']);
    const again = await post(rc.slug, raw, headers);
    expect(again).toMatchObject({ status: 202, body: { deduped: true } });
    const recs = (await deliveries()).filter((d) => d.receiverId === rc.id);
    expect(recs.map((d) => d.outcome)).toEqual(['verified', 'verified']);
    expect(recs[0].headers['x-service-delivery-id']).toBe(headers['X-Service-Delivery-Id']);
  });

  it('a transform filters posts, names the event from a header or the body, takes its data and dedupeId from the body; failing on a post is 422, recorded', async () => {
    await h.register('git', [{ name: 'on-push', triggers: [{ event: 'github/push' }] }]);
    const rc = await createReceiver({
      app: 'git',
      eventName: 'github.unused',
      transform: { if: "headers['x-github-event'] != 'ping'", name: "'github/' + headers['x-github-event']", data: 'body.head_commit', id: 'body.after' },
    });
    expect(rc).toMatchObject({ transform: { if: expect.any(String), name: expect.any(String), data: 'body.head_commit', id: 'body.after' } });
    const gh = (event: string, body: unknown) => {
      const raw = JSON.stringify(body);
      return post(rc.slug, raw, { ...signed(rc.secret, raw), 'X-GitHub-Event': event, 'X-GitHub-Delivery': uniqueName('ghd') });
    };
    const push = { after: uniqueName('sha'), head_commit: { id: 'c1', message: 'fix' } };
    const r = await gh('push', push);
    expect(r).toMatchObject({ status: 202, body: { eventId: expect.stringMatching(/^evt_/), deduped: false } });
    const ev = await op('events.get', { params: { id: r.body.eventId } });
    expect(ev.body).toMatchObject({ name: 'github/push', app: 'git', data: { id: 'c1', message: 'fix' } });
    expect(ev.body.triggered.map((t: any) => `${t.app}/${t.workflow}`)).toEqual(['git/on-push']);
    // Another delivery of the same push (a new delivery id, the same `after`): deduped by the transform's id.
    expect(await gh('push', push)).toMatchObject({ status: 202, body: { deduped: true } });

    const ping = await gh('ping', { zen: 'Keep it logically awesome.' });
    expect(ping).toMatchObject({ status: 202, body: { deliveryId: expect.any(String), deduped: false, filtered: true } });
    expect(ping.body.eventId).toBeUndefined();
    // `data` names a field this post lacks: the partner is told (422), and the post is recorded.
    const failed = await gh('push', { after: uniqueName('sha') });
    expect(failed).toMatchObject({ status: 422, body: { error: { code: 'transform_failed', message: expect.stringMatching(/transform\.data/) } } });
    const recs = (await deliveries()).filter((d) => d.receiverId === rc.id);
    expect(recs.map((d) => [d.outcome, d.verified])).toEqual([
      ['transform_failed', true],
      ['filtered', true],
      ['verified', true],
      ['verified', true],
    ]);
    expect(recs[1].reason).toMatch(/transform\.if is false/);

    // Mended by a PATCH (null data: the whole body), the partner's retry goes through; null removes the transform.
    const mended = await op('receivers.update', { params: { id: rc.id }, body: { transform: { name: "'github/' + headers['x-github-event']" } } });
    expect(mended.body.transform).toEqual({ name: "'github/' + headers['x-github-event']" });
    const retried = await gh('push', { after: 'x' });
    expect((await op('events.get', { params: { id: retried.body.eventId } })).body).toMatchObject({ name: 'github/push', data: { after: 'x' } });
    const plain = await op('receivers.update', { params: { id: rc.id }, body: { transform: null } });
    expect(plain.body.transform).toBeUndefined();
    const asNamed = await gh('push', { after: 'y' });
    expect((await op('events.get', { params: { id: asNamed.body.eventId } })).body).toMatchObject({ name: 'github.unused' });

    // Checked where it is written: CEL that does not compile, an `if` that is not a condition, an unknown field.
    for (const [transform, field] of [
      [{ name: "'a' +" }, 'transform.name'],
      [{ if: 'body.n + 1' }, 'transform.if'],
      [{ when: 'true' }, 'transform.when'],
      [{ data: '' }, 'transform.data'],
    ] as const) {
      const bad = await op('receivers.create', { body: { eventName: 'x', transform } });
      expect(bad).toMatchObject({ status: 400, body: { error: { code: 'invalid_webhook_receiver', message: expect.stringContaining(field) } } });
    }
  });

  it('refuses and records a bad signature, a missing one, a stale timestamp, an oversized body and non-JSON; none becomes an event', async () => {
    const rc = await createReceiver({ app: 'shop', eventName: 'payment.received' });
    const raw = '{"amount":1}';
    const before = h.starts.size;
    const wrong = await post(rc.slug, raw, signed('not-the-secret-at-all', raw));
    expect(wrong).toMatchObject({ status: 401, body: { error: { code: 'invalid_signature' } } });
    const tampered = await post(rc.slug, '{"amount":2}', signed(rc.secret, raw));
    expect(tampered.status).toBe(401);
    expect((await post(rc.slug, raw, {})).status).toBe(401);
    const stale = await post(rc.slug, raw, signed(rc.secret, raw, Math.floor(Date.now() / 1000) - 301));
    expect(stale).toMatchObject({
      status: 401,
      body: { error: { code: 'invalid_signature', message: expect.stringMatching(/5 minutes/) } },
    });
    const big = JSON.stringify({ pad: 'x'.repeat(MiB) });
    const over = await post(rc.slug, big, signed(rc.secret, big));
    expect(over).toMatchObject({ status: 413, body: { error: { code: 'payload_too_large' } } });
    // The gateway stops reading at 1 MiB and says so.
    expect((await post(rc.slug, '', {}, { tooLarge: true, sizeBytes: 2 * MiB })).status).toBe(413);
    const notJson = await post(rc.slug, 'amount=1', signed(rc.secret, 'amount=1'));
    expect(notJson).toMatchObject({ status: 400, body: { error: { code: 'invalid_body' } } });

    const recs = (await deliveries()).filter((d) => d.receiverId === rc.id);
    expect(recs.map((d) => d.outcome)).toEqual([
      'invalid_body',
      'too_large',
      'too_large',
      'stale_timestamp',
      'invalid_signature',
      'invalid_signature',
      'invalid_signature',
    ]);
    expect(recs.every((d) => d.eventId === undefined && d.verified === false)).toBe(true);
    expect(recs[1].sizeBytes).toBe(2 * MiB);
    expect(recs[2].sizeBytes).toBe(Buffer.byteLength(big));
    expect(recs[4].reason).toBe('no signature missing');
    // Nothing reached the event log or the scheduler.
    expect((await h.db.query('select 1 from ingest.events where workspace_id = $1 and data = $2', [h.ws, raw])).length).toBe(0);
    expect(h.starts.size).toBe(before);
  });

  it('accepts the Stripe-Signature and X-Hub-Signature-256 schemes', async () => {
    const rc = await createReceiver({ app: 'shop', eventName: 'payment.received', secret: 'whsec_adopted_secret_0123456789' });
    expect(rc.secret).toBe('whsec_adopted_secret_0123456789');
    const raw = '{"type":"charge.succeeded"}';
    const t = Math.floor(Date.now() / 1000);
    const v1 = createHmac('sha256', rc.secret).update(`${t}.${raw}`).digest('hex');
    expect((await post(rc.slug, raw, { 'Stripe-Signature': `t=${t},v1=${'0'.repeat(64)},v1=${v1}` })).status).toBe(202);
    expect(
      (
        await post(rc.slug, raw, {
          'Stripe-Signature': `t=${t - 400},v1=${createHmac('sha256', rc.secret)
            .update(`${t - 400}.${raw}`)
            .digest('hex')}`,
        })
      ).status,
    ).toBe(401);
    const gh = createHmac('sha256', rc.secret).update(raw).digest('hex');
    expect((await post(rc.slug, raw, { 'X-Hub-Signature-256': `sha256=${gh}`, 'X-GitHub-Event': 'push' })).status).toBe(202);
    expect((await post(rc.slug, raw, { 'X-Hub-Signature-256': `sha256=${'f'.repeat(64)}` })).status).toBe(401);
    const recs = (await deliveries()).filter((d) => d.receiverId === rc.id);
    expect(recs.map((d) => d.outcome)).toEqual(['invalid_signature', 'verified', 'stale_timestamp', 'verified']);
    expect(recs[1].reason).toMatch(/^github/);
    expect(recs[1].headers['x-github-event']).toBe('push');
    expect(recs[3].reason).toMatch(/^stripe/);
  });

  it('validates create and patch (400 naming the field); a taken slug is 409 in any workspace; the slug is immutable', async () => {
    expect(await op('receivers.create', { body: { app: 'shop' } })).toMatchObject({
      status: 400,
      body: { error: { code: 'invalid_webhook_receiver', message: expect.stringMatching(/^eventName/) } },
    });
    expect((await op('receivers.create', { body: { eventName: 'a', slug: 'bad slug!' } })).body.error.message).toMatch(/^slug/);
    expect((await op('receivers.create', { body: { eventName: 'a', secret: 'short' } })).body.error.message).toMatch(/^secret/);
    expect((await op('receivers.create', { body: { eventName: 'a', app: 'x'.repeat(257) } })).body.error.message).toMatch(/^app/);
    const slug = uniqueName('hook').replace(/[^A-Za-z0-9_-]/g, '');
    const rc = await createReceiver({ eventName: 'a', slug });
    expect(rc.slug).toBe(slug);
    expect(await op('receivers.create', { body: { eventName: 'b', slug } })).toMatchObject({
      status: 409,
      body: { error: { code: 'slug_taken' } },
    });
    expect((await op('receivers.create', { body: { eventName: 'b', slug } }, uniqueName('other-ws'))).status).toBe(409);
    expect((await op('receivers.update', { params: { id: rc.id }, body: { slug: 'new-slug' } })).body.error.message).toMatch(/^slug/);
    expect((await op('receivers.update', { params: { id: rc.id }, body: { enabled: 'no' } })).body.error.message).toMatch(/^enabled/);
  });

  it('rotation: the new secret is shown once and verifies; the old one no longer does; a plain patch shows no secret', async () => {
    const rc = await createReceiver({ app: 'shop', eventName: 'payment.received' });
    const raw = '{"rotated":true}';
    const renamed = await op('receivers.update', { params: { id: rc.id }, body: { name: 'renamed' } });
    expect(renamed).toMatchObject({ status: 200, body: { name: 'renamed', slug: rc.slug } });
    expect(renamed.body.secret).toBeUndefined();
    const rot = await op('receivers.update', { params: { id: rc.id }, body: { rotateSecret: true } });
    expect(rot.body.secret).toMatch(/^[0-9a-f]{64}$/);
    expect(rot.body.secret).not.toBe(rc.secret);
    expect((await post(rc.slug, raw, signed(rc.secret, raw))).status).toBe(401);
    expect((await post(rc.slug, raw, signed(rot.body.secret, raw))).status).toBe(202);
    // Sealed at rest: the stored value is not the secret.
    const [stored] = await h.db.query<{ secret_sealed: string }>('select secret_sealed from ingest.receivers where id = $1', [rc.id]);
    expect(stored!.secret_sealed).not.toContain(rot.body.secret);
  });

  it('a disabled receiver refuses (403) and records; an unknown slug is 404 and unrecorded', async () => {
    const rc = await createReceiver({ app: 'shop', eventName: 'payment.received' });
    expect((await op('receivers.update', { params: { id: rc.id }, body: { enabled: false } })).body.enabled).toBe(false);
    const raw = '{}';
    expect(await post(rc.slug, raw, signed(rc.secret, raw))).toMatchObject({
      status: 403,
      body: { error: { code: 'webhook_receiver_disabled' } },
    });
    expect((await deliveries()).filter((d) => d.receiverId === rc.id).map((d) => d.outcome)).toEqual(['disabled']);
    expect(await post('no-such-slug-here', raw, signed(rc.secret, raw))).toMatchObject({
      status: 404,
      body: { error: { code: 'webhook_receiver_not_found' } },
    });
    expect((await op('receivers.update', { params: { id: rc.id }, body: { enabled: true } })).body.enabled).toBe(true);
    expect((await post(rc.slug, raw, signed(rc.secret, raw))).status).toBe(202);
  });

  it('tenancy: another workspace sees none of the receivers or deliveries and gets 404 on their ids', async () => {
    const rc = await createReceiver({ eventName: 'x' });
    const other = uniqueName('ws-other');
    expect((await op('receivers.list', {}, other)).body).toEqual([]);
    expect(await deliveries(other)).toEqual([]);
    expect(await op('receivers.update', { params: { id: rc.id }, body: { rotateSecret: true } }, other)).toMatchObject({
      status: 404,
      body: { error: { code: 'webhook_receiver_not_found' } },
    });
    expect((await op('receivers.delete', { params: { id: rc.id } }, other)).status).toBe(404);
    expect((await op('receivers.delete', { params: { id: rc.id } })).status).toBe(204);
    expect((await op('receivers.delete', { params: { id: rc.id } })).status).toBe(404);
    expect((await post(rc.slug, '{}', signed(rc.secret, '{}'))).status).toBe(404);
  });

  it('source deliveries page newest first by keyset cursor; limit is clamped at 200 and validated', async () => {
    const ws = uniqueName('ws-page');
    const rc = await createReceiver({ eventName: 'paged' }, ws);
    for (let i = 0; i < 5; i++) await post(rc.slug, `{"i":${i}}`, {});
    await until(async () => (await deliveries(ws)).length === 5, 10_000, 'five records');
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await op('sourceDeliveries.list', { query: { limit: 2, ...(cursor ? { cursor } : {}) } }, ws);
      expect(page.status).toBe(200);
      seen.push(...page.body.map((d: any) => d.id));
      cursor = page.headers['x-next-cursor'];
      if (!cursor) break;
    }
    expect(seen).toEqual((await deliveries(ws)).map((d) => d.id));
    expect(new Set(seen).size).toBe(5);
    expect((await op('sourceDeliveries.list', { query: { limit: 5000 } }, ws)).status).toBe(200);
    expect((await op('sourceDeliveries.list', { query: { limit: 0 } }, ws)).body.error.code).toBe('invalid_limit');
    expect((await op('sourceDeliveries.list', { query: { cursor: 'nope' } }, ws)).body.error.code).toBe('invalid_cursor');
  });
});
