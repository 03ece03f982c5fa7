import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { FAST, harness, type Harness } from './harness.js';

jest.setTimeout(30_000);

// The check is the dispatcher's own, above the storage and the bus: the embedded adapters are enough.
describe('outbound webhooks with SERVICE_WEBHOOK_ALLOW_PRIVATE=off (embedded)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness('embedded', FAST, true, { SERVICE_WEBHOOK_ALLOW_PRIVATE: 'off' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('refuses an endpoint on a loopback, private or link-local address with a 400 naming url', async () => {
    for (const url of [`${h.receiver.base}/x`, 'http://localhost:8080/x', 'http://10.0.0.5/x', 'http://169.254.169.254/latest/meta-data', 'http://[::1]:9/x']) {
      expect(await h.fails('endpoints.create', { body: { url, eventKinds: ['run.succeeded'] } })).toMatchObject({ status: 400, code: 'invalid_webhook_endpoint', message: expect.stringMatching(/^url: .*private address/) });
    }
    const ok = await h.call('endpoints.create', { body: { url: 'https://8.8.8.8/hook', eventKinds: ['run.succeeded'] } });
    expect(await h.fails('endpoints.update', { params: { id: ok.body.id }, body: { url: 'http://192.168.1.1/x' } })).toMatchObject({ status: 400, message: expect.stringMatching(/^url:/) });
    await h.call('endpoints.delete', { params: { id: ok.body.id } });
  });

  it('never sends a custom send to a private address: dead at once, outcome skipped', async () => {
    await h.send({ deliveryId: 'dlv_private', url: h.receiver.script('/private', [200]), runId: 'run_p', stepId: 'b'.repeat(64) });
    const d = await h.delivery('dlv_private', ['dead']);
    expect(d.attempt_count).toBe(1);
    const { body } = await h.call('deliveries.get', { params: { id: 'dlv_private' } });
    expect(body.attempts).toEqual([expect.objectContaining({ attempt: 1, outcome: 'skipped', error: expect.stringContaining('private address') })]);
    expect(h.receiver.at('/private')).toHaveLength(0);
  });
});
