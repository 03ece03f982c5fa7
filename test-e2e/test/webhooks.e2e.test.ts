import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { api, eventually } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { ROOT } from '../src/processes.js';
import { startRunner, type TestRunner } from '../src/runner.js';

/**
 * Outbound webhooks through the public API: an endpoint subscribed to
 * run.succeeded (a plain HTTP receiver in this test) gets exactly one signed
 * delivery per run for 100 runs, each verified with the README's snippet,
 * which this test reads out of README.md and runs as is, so the two cannot
 * drift. Then the key and tenancy rules of the routes (403, 404). On the
 * six-process fleet, and on `pnpm dev` (embedded).
 */
const modes: Mode[] = realInfra() ? ['fleet', 'embedded'] : ['embedded'];
if (!realInfra()) console.warn('\n!!! Postgres/NATS missing: only the embedded webhooks test runs (fleet SKIPPED) !!!\n');

const ADMIN = `admin-${randomBytes(8).toString('hex')}`;
const RUNS = 100;

type Verify = (secret: string, header: string | undefined, rawBody: Buffer | string) => boolean;

/** The ```js block of README.md's "Webhooks" section that defines verifyWebhook, loaded as a module. */
async function readmeVerifier(): Promise<{ verify: Verify; cleanup: () => void }> {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const block = [...readme.matchAll(/```js\n([\s\S]*?)```/g)]
    .map((m) => m[1]!)
    .find((code) => code.includes('export function verifyWebhook'));
  if (!block) throw new Error('README.md has no ```js block exporting verifyWebhook');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dws-verify-'));
  const file = path.join(dir, 'verify-webhook.mjs');
  writeFileSync(file, block);
  const mod = (await import(pathToFileURL(file).href)) as { verifyWebhook: Verify };
  return { verify: mod.verifyWebhook, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

interface Received {
  headers: IncomingHttpHeaders;
  raw: Buffer;
}

/** A partner's endpoint: records every POST with its exact bytes and answers 200. */
async function startReceiver(): Promise<{ url: string; got: Received[]; close(): Promise<void> }> {
  const got: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers, raw: Buffer.concat(chunks) });
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    got,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const header = (h: IncomingHttpHeaders, name: string): string | undefined => {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
};

describe.each(modes)('webhooks on %s', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let verifier: Awaited<ReturnType<typeof readmeVerifier>>;
  let endpoint: { id: string; secret: string };
  const app = `wh${randomBytes(3).toString('hex')}`;

  beforeAll(async () => {
    verifier = await readmeVerifier();
    receiver = await startReceiver();
    dep = await startDeployment(mode, { env: { SERVICE_WEBHOOK_ALLOW_PRIVATE: 'on', SERVICE_ADMIN_TOKEN: ADMIN } });
    runner = await startRunner(
      dep,
      (r) => {
        r.workflow<{ n: number }>('wh-ping', { triggers: [{ event: 'wh.ping' }] }, async ({ event, step }) =>
          step.run('double', () => event.data.n * 2),
        );
      },
      { app },
    );
  }, 120_000);

  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
    await receiver?.close();
    verifier?.cleanup();
  }, 60_000);

  it('subscribes an endpoint; its secret is shown once, never by a read', async () => {
    const created = await api(dep.base, 'POST', '/v1/webhook-endpoints', {
      key: dep.secretKey,
      body: { name: 'partner', app, url: receiver.url, eventKinds: ['run.succeeded'] },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'partner', app, url: receiver.url, eventKinds: ['run.succeeded'], enabled: true });
    expect(typeof created.body.secret).toBe('string');
    expect(created.body.secret.length).toBeGreaterThanOrEqual(32);
    endpoint = { id: created.body.id as string, secret: created.body.secret as string };

    const list = await api(dep.base, 'GET', '/v1/webhook-endpoints', { key: dep.publicKey });
    expect(list.status).toBe(200);
    expect(list.body.map((e: { id: string }) => e.id)).toContain(endpoint.id);
    expect(JSON.stringify(list.body)).not.toContain(endpoint.secret);
    expect(list.body.find((e: { id: string }) => e.id === endpoint.id)).not.toHaveProperty('secret');
  });

  it(`delivers exactly one signed run.succeeded per run for ${RUNS} runs, each verified with the README snippet`, async () => {
    const events = Array.from({ length: RUNS }, (_, n) => ({ name: 'wh.ping', app, data: { n }, tags: [`n:${n}`] }));
    const ingested = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: events });
    expect(ingested.status).toBe(202);
    const runIdsInOrder = (ingested.body as { results: { runId?: string }[] }).results.map((r) => r.runId!);
    const runIds = new Set<string>(runIdsInOrder.filter(Boolean));
    expect(runIds.size).toBe(RUNS);

    // Every delivery settles succeeded after one attempt: the receiver answered 200 at once, so nothing is retried.
    const deliveries = await eventually(
      `${RUNS} succeeded deliveries`,
      async () => {
        const all: Record<string, any>[] = [];
        let cursor: string | undefined;
        do {
          const page = await api(
            dep.base,
            'GET',
            `/v1/webhook-deliveries?app=${app}&limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
            { key: dep.publicKey },
          );
          if (page.status !== 200) return undefined;
          all.push(...(page.body as Record<string, any>[]));
          cursor = page.headers['x-next-cursor'] as string | undefined;
        } while (cursor);
        return all.length >= RUNS && all.every((d) => d.status === 'succeeded') && receiver.got.length >= RUNS ? all : undefined;
      },
      120_000,
    );
    expect(deliveries).toHaveLength(RUNS);
    for (const d of deliveries) {
      expect(d).toMatchObject({
        app,
        endpointId: endpoint.id,
        url: receiver.url,
        eventKind: 'run.succeeded',
        status: 'succeeded',
        attemptCount: 1,
        lastStatusCode: 200,
      });
    }
    expect(new Set(deliveries.map((d) => d.sourceRunId))).toEqual(runIds);

    const byId = new Map(deliveries.map((d) => [d.id as string, d]));
    expect(receiver.got).toHaveLength(RUNS);
    const seen = new Set<string>();
    for (const r of receiver.got) {
      const id = header(r.headers, 'x-service-delivery-id');
      expect(id && byId.has(id)).toBeTruthy();
      expect(seen.has(id!)).toBe(false);
      seen.add(id!);
      expect(verifier.verify(endpoint.secret, header(r.headers, 'x-service-signature'), r.raw)).toBe(true);
      // The same snippet refuses a tampered body and another secret.
      expect(verifier.verify(endpoint.secret, header(r.headers, 'x-service-signature'), Buffer.concat([r.raw, Buffer.from(' ')]))).toBe(
        false,
      );
      expect(verifier.verify(`${endpoint.secret}x`, header(r.headers, 'x-service-signature'), r.raw)).toBe(false);
      expect(header(r.headers, 'authorization')).toBeUndefined();
      const body = JSON.parse(r.raw.toString('utf8'));
      expect(body).toEqual(byId.get(id!)!.payload);
      // The run's tags ride along, so a partner can route a tenant's deliveries.
      expect(body.data.tags).toEqual([`n:${runIdsInOrder.indexOf(body.data.runId)}`]);
    }

    // The single read carries the attempt log.
    const one = await api(dep.base, 'GET', `/v1/webhook-deliveries/${deliveries[0]!.id}`, { key: dep.publicKey });
    expect(one.status).toBe(200);
    expect(one.body.attempts).toHaveLength(1);
    expect(one.body.attempts[0]).toMatchObject({ attempt: 1, outcome: 'succeeded', statusCode: 200 });

    const stats = await api(dep.base, 'GET', '/v1/webhook-endpoints/stats', { key: dep.publicKey });
    expect(stats.status).toBe(200);
    expect(stats.body.find((row: { endpointId: string }) => row.endpointId === endpoint.id)).toMatchObject({
      delivered: RUNS,
      succeeded: RUNS,
      failed: 0,
    });
  }, 240_000);

  it('refuses writes with a public key (403) and ids it does not have or another workspace owns (404)', async () => {
    const pub = { key: dep.publicKey };
    expect(
      (await api(dep.base, 'POST', '/v1/webhook-endpoints', { ...pub, body: { url: receiver.url, eventKinds: ['run.failed'] } })).status,
    ).toBe(403);
    expect((await api(dep.base, 'PATCH', `/v1/webhook-endpoints/${endpoint.id}`, { ...pub, body: { enabled: false } })).status).toBe(403);
    expect((await api(dep.base, 'DELETE', `/v1/webhook-endpoints/${endpoint.id}`, pub)).status).toBe(403);
    const page = await api(dep.base, 'GET', `/v1/webhook-deliveries?app=${app}&limit=1`, pub);
    const deliveryId = page.body[0].id as string;
    expect((await api(dep.base, 'POST', `/v1/webhook-deliveries/${deliveryId}/redeliver`, pub)).status).toBe(403);

    const bad = await api(dep.base, 'POST', '/v1/webhook-endpoints', {
      key: dep.secretKey,
      body: { url: receiver.url, eventKinds: ['run.exploded'] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain('eventKinds');

    const missing = await api(dep.base, 'GET', '/v1/webhook-deliveries/whd_missing', pub);
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('webhook_delivery_not_found');
    const noEndpoint = await api(dep.base, 'PATCH', '/v1/webhook-endpoints/whe_missing', { key: dep.secretKey, body: { enabled: false } });
    expect(noEndpoint.status).toBe(404);
    expect(noEndpoint.body.error.code).toBe('webhook_endpoint_not_found');

    const ws = await api(dep.base, 'POST', '/v1/admin/workspaces', { key: ADMIN, body: { name: `tenant-${app}` } });
    expect(ws.status).toBe(201);
    const other = { key: ws.body.secretKey as string };
    expect((await api(dep.base, 'GET', `/v1/webhook-deliveries/${deliveryId}`, other)).status).toBe(404);
    expect((await api(dep.base, 'POST', `/v1/webhook-deliveries/${deliveryId}/redeliver`, other)).status).toBe(404);
    expect((await api(dep.base, 'PATCH', `/v1/webhook-endpoints/${endpoint.id}`, { ...other, body: { enabled: false } })).status).toBe(404);
    expect((await api(dep.base, 'DELETE', `/v1/webhook-endpoints/${endpoint.id}`, other)).status).toBe(404);
    const theirs = await api(dep.base, 'GET', '/v1/webhook-endpoints', other);
    expect(theirs.status).toBe(200);
    expect(theirs.body).toEqual([]);

    // Still ours, still enabled: the refused calls changed nothing.
    const mine = await api(dep.base, 'GET', '/v1/webhook-endpoints', pub);
    expect(mine.body.find((e: { id: string }) => e.id === endpoint.id)).toMatchObject({ enabled: true });
  });

  it('redelivers a succeeded delivery with the same id, its attempt log kept, and a signature the snippet verifies', async () => {
    const page = await api(dep.base, 'GET', `/v1/webhook-deliveries?app=${app}&limit=1`, { key: dep.publicKey });
    const id = page.body[0].id as string;
    const before = receiver.got.length;
    const res = await api(dep.base, 'POST', `/v1/webhook-deliveries/${id}/redeliver`, { key: dep.secretKey });
    expect(res.status).toBe(204);
    const again = await eventually('the redelivery', async () =>
      receiver.got.slice(before).find((r) => header(r.headers, 'x-service-delivery-id') === id),
    );
    expect(verifier.verify(endpoint.secret, header(again.headers, 'x-service-signature'), again.raw)).toBe(true);
    const one = await eventually('two attempts logged', async () => {
      const r = await api(dep.base, 'GET', `/v1/webhook-deliveries/${id}`, { key: dep.publicKey });
      return r.body.status === 'succeeded' && r.body.attempts.length === 2 ? r.body : undefined;
    });
    expect(one.attempts.map((a: { outcome: string }) => a.outcome)).toEqual(['succeeded', 'succeeded']);
  });
});
