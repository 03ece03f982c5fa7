import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { conflict, notFound } from '@dws/protocol';
import type { ApiCall } from '@dws/runtime';
import { http, infraAvailable, startTestGateway, type TestGateway } from './harness.js';

if (!infraAvailable) console.warn('\n!!! Postgres/NATS missing: gateway webhook route tests SKIPPED !!!\n');
const d = infraAvailable ? describe : describe.skip;

/**
 * The gateway side of the outbound webhook routes, on real Postgres and NATS
 * with a stand-in answering the webhook-dispatcher's ops on the real bus:
 * which op each route reaches (stats is not an id), what is forwarded, who
 * may write, and that the dispatcher's answers (201 with the secret, 204,
 * 404, 409, X-Next-Cursor) pass through unchanged. The dispatcher's own
 * behaviour is tested in services/webhook-dispatcher and test-e2e.
 */
d('gateway outbound webhook routes', () => {
  let g: TestGateway;
  const calls: { op: string; call: ApiCall }[] = [];
  const last = () => calls[calls.length - 1]!;
  const rec =
    (op: string, answer: (call: ApiCall) => { status?: number; body?: unknown; headers?: Record<string, string> }) =>
    async (call: ApiCall) => {
      calls.push({ op, call });
      if (call.params.id === 'whd_busy') throw conflict('delivery_in_flight', 'The delivery is being attempted now.');
      if (call.params.id?.endsWith('_gone')) throw notFound(op.startsWith('endpoints') ? 'webhook endpoint' : 'webhook delivery');
      return answer(call);
    };

  beforeAll(async () => {
    g = await startTestGateway();
    g.stub('webhook-dispatcher', {
      'endpoints.list': rec('endpoints.list', () => ({
        body: [{ id: 'whe_1', url: 'https://x.example/h', scheme: 'hmac-sha256', eventKinds: ['run.failed'], enabled: true }],
      })),
      'endpoints.create': rec('endpoints.create', () => ({ status: 201, body: { id: 'whe_2', secret: 'whsec_shown_once' } })),
      'endpoints.update': rec('endpoints.update', (call) => ({ body: { id: call.params.id } })),
      'endpoints.delete': rec('endpoints.delete', () => ({ status: 204 })),
      'endpoints.stats': rec('endpoints.stats', () => ({ body: [{ endpointId: 'whe_1', delivered: 3, succeeded: 2, failed: 1 }] })),
      'deliveries.list': rec('deliveries.list', () => ({ body: [{ id: 'whd_1' }], headers: { 'X-Next-Cursor': 'c2' } })),
      'deliveries.get': rec('deliveries.get', (call) => ({ body: { id: call.params.id, attempts: [] } })),
      'deliveries.redeliver': rec('deliveries.redeliver', () => ({ status: 204 })),
    });
  }, 60_000);
  afterAll(async () => {
    await g?.stop();
  }, 30_000);

  it('routes /webhook-endpoints/stats to the stats op with its since, and refuses a bad since before the service', async () => {
    const since = '2026-01-01T00:00:00Z';
    const stats = await http(g.base, 'GET', `/v1/webhook-endpoints/stats?since=${since}`, { key: g.publicKey });
    expect(stats.status).toBe(200);
    expect(stats.body).toEqual([{ endpointId: 'whe_1', delivered: 3, succeeded: 2, failed: 1 }]);
    expect(last()).toMatchObject({ op: 'endpoints.stats', call: { query: { since } } });

    const before = calls.length;
    const bad = await http(g.base, 'GET', '/v1/webhook-endpoints/stats?since=yesterday', { key: g.publicKey });
    expect({ status: bad.status, code: bad.body.error.code }).toEqual({ status: 400, code: 'invalid_since' });
    expect(calls.length).toBe(before);
  });

  it('pages deliveries with a clamped limit and passes X-Next-Cursor through', async () => {
    const page = await http(g.base, 'GET', '/v1/webhook-deliveries?status=failed&app=shop&limit=5000&cursor=c1', { key: g.publicKey });
    expect(page.status).toBe(200);
    expect(page.headers['x-next-cursor']).toBe('c2');
    expect(last()).toMatchObject({ op: 'deliveries.list', call: { query: { status: 'failed', app: 'shop', limit: 200, cursor: 'c1' } } });

    const before = calls.length;
    for (const [q, code] of [
      ['status=retrying', 'invalid_status'],
      ['limit=0', 'invalid_limit'],
      ['limit=x', 'invalid_limit'],
    ] as const) {
      const r = await http(g.base, 'GET', `/v1/webhook-deliveries?${q}`, { key: g.publicKey });
      expect({ q, status: r.status, code: r.body.error.code }).toEqual({ q, status: 400, code });
    }
    expect(calls.length).toBe(before);

    const one = await http(g.base, 'GET', '/v1/webhook-deliveries/whd_7', { key: g.publicKey });
    expect(one.body).toEqual({ id: 'whd_7', attempts: [] });
    const gone = await http(g.base, 'GET', '/v1/webhook-deliveries/whd_gone', { key: g.publicKey });
    expect({ status: gone.status, code: gone.body.error.code }).toEqual({ status: 404, code: 'webhook_delivery_not_found' });
  });

  it('refuses every config write and redeliver to a public key (403), calling nothing', async () => {
    const before = calls.length;
    const writes: [string, string, unknown?][] = [
      ['POST', '/v1/webhook-endpoints', { url: 'https://x.example/h', eventKinds: ['run.failed'] }],
      ['PATCH', '/v1/webhook-endpoints/whe_1', { enabled: false }],
      ['DELETE', '/v1/webhook-endpoints/whe_1'],
      ['POST', '/v1/webhook-deliveries/whd_1/redeliver'],
    ];
    for (const [method, path, body] of writes) {
      const r = await http(g.base, method, path, { key: g.publicKey, body });
      expect({ path, status: r.status, code: r.body.error.code }).toEqual({ path, status: 403, code: 'key_read_only' });
    }
    expect(calls.length).toBe(before);
  });

  it('forwards a create body verbatim and answers the 201 with the secret; a wrong field is a 400 naming it', async () => {
    const raw = '{"url":"https://x.example/h","eventKinds":["run.succeeded"],"app":"shop"}';
    const created = await http(g.base, 'POST', '/v1/webhook-endpoints', { key: g.secretKey, raw });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ id: 'whe_2', secret: 'whsec_shown_once' });
    expect(last().op).toBe('endpoints.create');
    expect(last().call.body).toEqual(JSON.parse(raw));

    const before = calls.length;
    for (const [body, field] of [
      [{ url: 'https://x.example/h', eventKinds: [] }, 'eventKinds'],
      [{ url: 'https://x.example/h', eventKinds: ['run.exploded'] }, 'eventKinds'],
      [{ eventKinds: ['run.failed'] }, 'url'],
      [{ url: 'https://x.example/h', eventKinds: ['run.failed'], secret: 'short' }, 'secret'],
    ] as const) {
      const r = await http(g.base, 'POST', '/v1/webhook-endpoints', { key: g.secretKey, body });
      expect({ field, status: r.status, code: r.body.error.code }).toEqual({ field, status: 400, code: 'invalid_webhook_endpoint' });
      expect(r.body.error.message).toContain(field);
    }
    const patch = await http(g.base, 'PATCH', '/v1/webhook-endpoints/whe_1', { key: g.secretKey, body: { enabled: 'no' } });
    expect({ status: patch.status, code: patch.body.error.code }).toEqual({ status: 400, code: 'invalid_webhook_endpoint' });
    expect(calls.length).toBe(before);
  });

  it('passes the dispatcher 204, 404 and 409 through on edit, delete and redeliver', async () => {
    const patched = await http(g.base, 'PATCH', '/v1/webhook-endpoints/whe_1', {
      key: g.secretKey,
      body: { rotateSecret: true, app: null },
    });
    expect(patched.status).toBe(200);
    expect(last()).toMatchObject({ op: 'endpoints.update', call: { params: { id: 'whe_1' }, body: { rotateSecret: true, app: null } } });
    expect((await http(g.base, 'DELETE', '/v1/webhook-endpoints/whe_1', { key: g.secretKey })).status).toBe(204);
    const gone = await http(g.base, 'DELETE', '/v1/webhook-endpoints/whe_gone', { key: g.secretKey });
    expect({ status: gone.status, code: gone.body.error.code }).toEqual({ status: 404, code: 'webhook_endpoint_not_found' });

    expect((await http(g.base, 'POST', '/v1/webhook-deliveries/whd_1/redeliver', { key: g.secretKey })).status).toBe(204);
    expect(last()).toMatchObject({ op: 'deliveries.redeliver', call: { params: { id: 'whd_1' } } });
    const busy = await http(g.base, 'POST', '/v1/webhook-deliveries/whd_busy/redeliver', { key: g.secretKey });
    expect({ status: busy.status, code: busy.body.error.code }).toEqual({ status: 409, code: 'delivery_in_flight' });
  });

  it('documents the routes, the payload of each kind, and a secret only in create and rotating responses', async () => {
    const doc = (await http(g.base, 'GET', '/v1/openapi.json')).body;
    for (const [path, method] of [
      ['/webhook-endpoints', 'get'],
      ['/webhook-endpoints', 'post'],
      ['/webhook-endpoints/stats', 'get'],
      ['/webhook-endpoints/{id}', 'patch'],
      ['/webhook-endpoints/{id}', 'delete'],
      ['/webhook-deliveries', 'get'],
      ['/webhook-deliveries/{id}', 'get'],
      ['/webhook-deliveries/{id}/redeliver', 'post'],
    ] as const) {
      expect({ path, method, documented: Boolean(doc.paths[path]?.[method]) }).toEqual({ path, method, documented: true });
    }
    expect(doc.paths['/webhook-deliveries'].get.responses['200'].headers).toHaveProperty('X-Next-Cursor');
    expect(doc.paths['/webhook-deliveries/{id}/redeliver'].post.responses).toHaveProperty('409');
    const s = doc.components.schemas;
    expect(Object.keys(s.WebhookDelivery.properties).sort()).toEqual(
      [
        'id',
        'app',
        'endpointId',
        'url',
        'eventKind',
        'sourceRunId',
        'payload',
        'status',
        'attemptCount',
        'maxAttempts',
        'lastStatusCode',
        'nextAttemptAt',
        'createdAt',
        'updatedAt',
      ].sort(),
    );
    expect(Object.keys(s.WebhookAttempt.properties).sort()).toEqual(
      ['id', 'attempt', 'outcome', 'statusCode', 'responseSnippet', 'error', 'durationMs', 'createdAt'].sort(),
    );
    expect(Object.keys(s.WebhookEndpointStats.properties).sort()).toEqual(
      ['endpointId', 'delivered', 'succeeded', 'failed', 'lastDelivery'].sort(),
    );
    expect(s.WebhookEndpoint.properties).not.toHaveProperty('secret');
    expect(s.CreatedWebhookEndpoint.required).toContain('secret');
    expect(s.UpdatedWebhookEndpoint.required ?? []).not.toContain('secret');
    expect(s.WebhookRunPayload.properties.kind.enum).toEqual(['run.succeeded', 'run.failed', 'run.cancelled']);
    expect(s.WebhookStepFailedPayload.properties.kind.const).toBe('step.failed');
    // No example secret anywhere in the document.
    expect(JSON.stringify(doc)).not.toMatch(/whsec_[A-Za-z0-9_-]{8,}/);
    expect(JSON.stringify(doc)).not.toMatch(/"examples?"/);
  });
});
