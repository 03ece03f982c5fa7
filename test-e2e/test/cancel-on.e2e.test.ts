import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { api, eventually } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];

/**
 * cancelOn (Inngest's shape): an event matching a workflow's cancelOn
 * cancels its active runs that the entry's `if` selects (`event` is the
 * run's own triggering event, `async` the incoming one), within its
 * `timeout` of their start; the event ingest stored carries the command, the
 * scheduler applies it and audits each cancel.
 */
describe.each(modes)('cancelOn on %s', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;

  beforeAll(async () => {
    dep = await startDeployment(mode);
    runner = await startRunner(dep, (r) => {
      const sleeper = async ({ step }: any) => {
        await step.run('first', () => 1);
        await step.sleep('wait', '1h');
        return step.run('after', () => 2);
      };
      r.workflow(
        'order-flow',
        { triggers: [{ event: 'order.created' }], cancelOn: [{ event: 'order.cancelled', if: 'async.data.orderId == event.data.orderId' }] },
        sleeper,
      );
      r.workflow('recent-only', { triggers: [{ event: 'recent.go' }], cancelOn: { event: 'recent.stop', timeout: '1500ms' } }, sleeper);
      r.workflow('self-stopping', { triggers: [{ event: 'loop.tick' }], cancelOn: { event: 'loop.tick' } }, sleeper);
    });
  }, 180_000);

  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
  }, 60_000);

  const send = async (name: string, data: unknown) => {
    const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name, data } });
    expect(r.status).toBe(202);
    return r.body as { id: string; runId?: string };
  };
  const get = async (id: string) => (await api(dep.base, 'GET', `/v1/runs/${id}`, { key: dep.secretKey })).body;
  const sleeping = (id: string) => eventually(`run ${id} asleep`, async () => ((await get(id)).status === 'waiting' ? true : undefined));
  const cancelled = (id: string) => eventually(`run ${id} cancelled`, async () => ((await get(id)).status === 'cancelled' ? true : undefined));

  it('cancels the runs whose if holds for the incoming event, and audits each cancel', async () => {
    const o1 = (await send('order.created', { orderId: `o1-${mode}` })).runId!;
    const o2 = (await send('order.created', { orderId: `o2-${mode}` })).runId!;
    await sleeping(o1);
    await sleeping(o2);

    const stop = await send('order.cancelled', { orderId: `o1-${mode}` });
    await cancelled(o1);
    expect((await get(o1)).error).toMatchObject({ message: `Cancelled by event order.cancelled (${stop.id}): it matched the workflow's cancelOn.` });
    const audit = (await api(dep.base, 'GET', `/v1/control-actions?runId=${o1}`, { key: dep.secretKey })).body as any[];
    expect(audit).toEqual([expect.objectContaining({ action: 'cancel', runId: o1, detail: { cancelOn: { event: 'order.cancelled', eventId: stop.id } } })]);

    // o2's orderId differs: it sleeps on (the same command would have cancelled it with o1).
    await new Promise((r) => setTimeout(r, 300));
    expect((await get(o2)).status).toBe('waiting');
    await send('order.cancelled', { orderId: `o2-${mode}` });
    await cancelled(o2);
  }, 60_000);

  it('cancels only runs started within its timeout', async () => {
    const old = (await send('recent.go', {})).runId!;
    await sleeping(old);
    await new Promise((r) => setTimeout(r, 1800));
    const young = (await send('recent.go', {})).runId!;
    await sleeping(young);
    await send('recent.stop', {});
    await cancelled(young);
    await new Promise((r) => setTimeout(r, 500));
    expect((await get(old)).status).toBe('waiting');
    await api(dep.base, 'POST', `/v1/runs/${old}/cancel`, { key: dep.secretKey });
  }, 60_000);

  it('never cancels the run its own event started', async () => {
    const first = (await send('loop.tick', {})).runId!;
    await sleeping(first);
    const second = (await send('loop.tick', {})).runId!;
    await cancelled(first);
    await sleeping(second);
    expect((await get(second)).status).toBe('waiting');
  }, 60_000);

  it('refuses a malformed cancelOn at registration with a 400', async () => {
    const bad = await api(dep.base, 'POST', '/v1/register', {
      key: dep.secretKey,
      body: { app: 'refused', url: 'http://127.0.0.1:9/invoke', workflows: [{ name: 'w', cancelOn: [{ event: 'x', if: 'async.data.' }] }] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toEqual({ code: 'invalid_registration', message: expect.stringContaining('cancelOn[0].if does not compile') });
  });
});
