import { createHmac, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { signInvoke } from '@dws/protocol';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

/**
 * Inbound webhooks through the public API: a secret key creates a receiver
 * (its secret shown once), a partner posts to /v1/webhooks/{slug} with no
 * API key, signed over the exact bytes, and the post becomes the event that
 * starts a workflow; refused posts (bad signature, over 1 MiB) are recorded
 * in /v1/webhook-source-deliveries. On `pnpm dev` (embedded) and the fleet.
 */
const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];
if (!realInfra()) console.warn('\n!!! Postgres/NATS missing: only the embedded webhook-receivers test runs (fleet SKIPPED) !!!\n');

describe.each(modes)('inbound webhooks on %s', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;

  beforeAll(async () => {
    dep = await startDeployment(mode);
    runner = await startRunner(dep, (r) => {
      r.workflow<{ amount: number }>('on-payment', { triggers: [{ event: 'partner.payment' }] }, async ({ event }) => ({
        got: event.data,
      }));
      r.workflow<{ id: string; message: string }>('on-push', { triggers: [{ event: 'github/push' }] }, async ({ event }) => ({
        commit: event.data.message,
      }));
    });
  }, 120_000);

  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
  }, 60_000);

  it('config writes need a secret key; the secret is shown once; a verified post with no API key starts the workflow', async () => {
    expect(
      (await api(dep.base, 'POST', '/v1/webhook-receivers', { key: dep.publicKey, body: { eventName: 'partner.payment' } })).status,
    ).toBe(403);
    const bad = await api(dep.base, 'POST', '/v1/webhook-receivers', { key: dep.secretKey, body: { app: 5 } });
    expect(bad).toMatchObject({ status: 400, body: { error: { code: 'invalid_webhook_receiver' } } });
    const created = await api(dep.base, 'POST', '/v1/webhook-receivers', {
      key: dep.secretKey,
      body: { name: 'psp', eventName: 'partner.payment' },
    });
    expect(created.status).toBe(201);
    const { id, slug, secret } = created.body as { id: string; slug: string; secret: string };
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    const list = await api(dep.base, 'GET', '/v1/webhook-receivers', { key: dep.publicKey });
    expect(list.body.map((x: any) => x.id)).toContain(id);
    expect(JSON.stringify(list.body)).not.toContain(secret);
    expect((await api(dep.base, 'POST', '/v1/webhook-receivers', { key: dep.secretKey, body: { eventName: 'x', slug } })).status).toBe(409);

    // Whitespace and key order a re-serialising proxy would change: the signature is over these exact bytes.
    const raw = '{ "amount" : 42,\n  "note": "caf\u00e9" }';
    const ok = await api(dep.base, 'POST', `/v1/webhooks/${slug}`, { raw, headers: { 'x-service-signature': signInvoke(secret, raw) } });
    expect(ok).toMatchObject({ status: 202, body: { eventId: expect.stringMatching(/^evt_/), deduped: false } });
    const run = await eventually('the run the webhook started', async () => {
      const runs = await api(dep.base, 'GET', `/v1/runs?eventId=${ok.body.eventId}`, { key: dep.publicKey });
      const r = runs.body?.[0];
      return r ? runReached((await api(dep.base, 'GET', `/v1/runs/${r.id}`, { key: dep.publicKey })).body) : undefined;
    });
    expect(run).toMatchObject({ workflow: 'on-payment', result: { got: { amount: 42, note: 'caf\u00e9' } } });

    // Refused and recorded: a bad signature and a body over 1 MiB (the gateway stops reading and tells ingest).
    expect(
      await api(dep.base, 'POST', `/v1/webhooks/${slug}`, {
        raw,
        headers: { 'x-service-signature': signInvoke('wrong-secret-wrong', raw) },
      }),
    ).toMatchObject({
      status: 401,
      body: { error: { code: 'invalid_signature' } },
    });
    const big = JSON.stringify({ pad: 'x'.repeat(1024 * 1024) });
    expect(
      (await api(dep.base, 'POST', `/v1/webhooks/${slug}`, { raw: big, headers: { 'x-service-signature': signInvoke(secret, big) } }))
        .status,
    ).toBe(413);
    // A body that does not decode is the transport's fault: 400 at the gateway, before any receiver is looked up (not recorded).
    expect(await api(dep.base, 'POST', `/v1/webhooks/${slug}`, { raw, headers: { 'content-encoding': 'gzip' } })).toMatchObject({
      status: 400,
      body: { error: { code: 'invalid_body_encoding' } },
    });
    expect(
      (await api(dep.base, 'POST', '/v1/webhooks/no-such-receiver', { raw, headers: { 'x-service-signature': signInvoke(secret, raw) } }))
        .status,
    ).toBe(404);

    const seen = await api(dep.base, 'GET', '/v1/webhook-source-deliveries?limit=500', { key: dep.publicKey });
    expect(seen.status).toBe(200);
    const mine = seen.body.filter((x: any) => x.receiverId === id);
    expect(mine.map((x: any) => x.outcome)).toEqual(['too_large', 'invalid_signature', 'verified']);
    expect(mine[2]).toMatchObject({ eventId: ok.body.eventId, verified: true, sizeBytes: Buffer.byteLength(raw) });
    expect(mine[0].sizeBytes).toBeGreaterThan(1024 * 1024);

    // Rotation: the old secret stops verifying.
    const rot = await api(dep.base, 'PATCH', `/v1/webhook-receivers/${id}`, { key: dep.secretKey, body: { rotateSecret: true } });
    expect(rot.status).toBe(200);
    expect(
      (await api(dep.base, 'POST', `/v1/webhooks/${slug}`, { raw, headers: { 'x-service-signature': signInvoke(secret, raw) } })).status,
    ).toBe(401);
    expect(
      (await api(dep.base, 'POST', `/v1/webhooks/${slug}`, { raw, headers: { 'x-service-signature': signInvoke(rot.body.secret, raw) } }))
        .status,
    ).toBe(202);
    expect((await api(dep.base, 'DELETE', `/v1/webhook-receivers/${id}`, { key: dep.publicKey })).status).toBe(403);
    expect((await api(dep.base, 'DELETE', `/v1/webhook-receivers/${id}`, { key: dep.secretKey })).status).toBe(204);
  }, 120_000);

  it('a transform filters posts and makes the event: its name from a header, its data and dedupeId from the body', async () => {
    const transform = { if: "headers['x-github-event'] != 'ping'", name: "'github/' + headers['x-github-event']", data: 'body.head_commit', id: 'body.after' };
    const refused = await api(dep.base, 'POST', '/v1/webhook-receivers', { key: dep.secretKey, body: { eventName: 'github', transform: { name: "'a' +" } } });
    expect(refused).toMatchObject({ status: 400, body: { error: { code: 'invalid_webhook_receiver', message: expect.stringContaining('transform.name') } } });
    const created = await api(dep.base, 'POST', '/v1/webhook-receivers', { key: dep.secretKey, body: { name: 'github', eventName: 'github', transform } });
    expect(created).toMatchObject({ status: 201, body: { transform } });
    const { id, slug, secret } = created.body as { id: string; slug: string; secret: string };
    const gh = (event: string, body: unknown) => {
      const raw = JSON.stringify(body);
      return api(dep.base, 'POST', `/v1/webhooks/${slug}`, {
        raw,
        headers: { 'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`, 'x-github-event': event, 'x-github-delivery': randomUUID() },
      });
    };

    expect(await gh('ping', { zen: 'Design for failure.' })).toMatchObject({ status: 202, body: { filtered: true, deduped: false } });
    const after = randomUUID();
    const pushed = await gh('push', { after, head_commit: { id: 'c1', message: 'ship it' } });
    expect(pushed).toMatchObject({ status: 202, body: { eventId: expect.stringMatching(/^evt_/), deduped: false } });
    const run = await eventually('the run the push started', async () => {
      const runs = await api(dep.base, 'GET', `/v1/runs?eventId=${pushed.body.eventId}`, { key: dep.publicKey });
      const r = runs.body?.[0];
      return r ? runReached((await api(dep.base, 'GET', `/v1/runs/${r.id}`, { key: dep.publicKey })).body) : undefined;
    });
    expect(run).toMatchObject({ workflow: 'on-push', eventName: 'github/push', result: { commit: 'ship it' } });
    // GitHub redelivers with a new delivery id: the transform's id (the pushed sha) dedupes it.
    expect(await gh('push', { after, head_commit: { id: 'c1', message: 'ship it' } })).toMatchObject({ status: 202, body: { deduped: true } });
    expect(await gh('push', { after: randomUUID() })).toMatchObject({ status: 422, body: { error: { code: 'transform_failed' } } });

    const seen = await api(dep.base, 'GET', '/v1/webhook-source-deliveries?limit=200', { key: dep.publicKey });
    expect(seen.body.filter((x: any) => x.receiverId === id).map((x: any) => x.outcome)).toEqual(['transform_failed', 'verified', 'verified', 'filtered']);
    const cleared = await api(dep.base, 'PATCH', `/v1/webhook-receivers/${id}`, { key: dep.secretKey, body: { transform: null } });
    expect(cleared.status).toBe(200);
    expect(cleared.body.transform).toBeUndefined();
  }, 120_000);
});
