import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Gates } from '@dws/testing';
import { api, eventually } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];

/**
 * Runs ended by something other than their code, each a cancel audited in
 * GET /v1/control-actions:
 * - cancelOn (Inngest's shape): an event matching a workflow's cancelOn
 *   cancels its active runs that the entry's `if` selects (`event` is the
 *   run's own triggering event, `async` the incoming one), within its
 *   `timeout` of their start; the event ingest stored carries the command,
 *   the scheduler applies it.
 * - timeouts: a run still queued `start` after it was created, or not ended
 *   `finish` after it, is cancelled by system:timeout; the runs the
 *   scheduler starts itself (a child here) get their workflow's timeouts too.
 * - bulk cancel: POST /v1/runs/bulk-cancel cancels the runs that have not
 *   ended matching its filter and its CEL `if` over each run's event.
 */
describe.each(modes)('runs ended by cancelOn, timeouts and bulk cancel on %s', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;
  const gates = new Gates();

  beforeAll(async () => {
    dep = await startDeployment(mode);
    runner = await startRunner(dep, (r) => {
      const sleeper = async ({ step }: any) => {
        await step.run('first', () => 1);
        await step.sleep('wait', '1h');
        return 2;
      };
      r.workflow(
        'order-flow',
        {
          triggers: [{ event: 'order.created' }],
          cancelOn: [{ event: 'order.cancelled', if: 'async.data.orderId == event.data.orderId' }],
        },
        sleeper,
      );
      r.workflow('recent-only', { triggers: [{ event: 'recent.go' }], cancelOn: { event: 'recent.stop', timeout: '1500ms' } }, sleeper);
      r.workflow('self-stopping', { triggers: [{ event: 'loop.tick' }], cancelOn: { event: 'loop.tick' } }, sleeper);
      r.workflow('slow', { timeouts: { finish: '1500ms' } }, sleeper);
      r.workflow('nightly-import', { triggers: [{ event: 'import.go' }] }, sleeper);
      // Its first run holds the one slot inside a step (a sleeping run would give it back) until the test opens the gate.
      r.workflow('one-at-a-time', { concurrency: { limit: 1 }, timeouts: { start: '1s' } }, async ({ step }: any) => {
        await step.run('first', () => 1);
        return step.run('hold', async () => (await gates.wait('one-at-a-time'), 2));
      });
      r.workflow('parent', {}, async ({ step }: any) => {
        try {
          await step.runWorkflow('child', { workflow: 'slow', data: {} });
          return { child: 'ended' };
        } catch (err) {
          return { child: (err as Error).message };
        }
      });
    });
  }, 180_000);

  afterAll(async () => {
    gates.openAll();
    await runner?.close();
    await dep?.stop();
  }, 60_000);

  const send = async (name: string, data: unknown = {}) => {
    const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name, data } });
    expect(r.status).toBe(202);
    return r.body as { id: string; runId?: string };
  };
  const get = async (id: string) => (await api(dep.base, 'GET', `/v1/runs/${id}`, { key: dep.secretKey })).body;
  const reached = (id: string, status: string) =>
    eventually(
      `run ${id} ${status}`,
      async () => {
        const r = await get(id);
        return r.status === status ? r : undefined;
      },
      20_000,
    );
  const sleeping = (id: string) => reached(id, 'waiting');
  const cancelled = (id: string) => reached(id, 'cancelled');
  const audit = async (runId: string) =>
    (await api(dep.base, 'GET', `/v1/control-actions?runId=${runId}`, { key: dep.secretKey })).body as any[];

  describe('cancelOn', () => {
    it('cancels the runs whose if holds for the incoming event, and audits each cancel', async () => {
      const o1 = (await send('order.created', { orderId: `o1-${mode}` })).runId!;
      const o2 = (await send('order.created', { orderId: `o2-${mode}` })).runId!;
      await sleeping(o1);
      await sleeping(o2);

      const stop = await send('order.cancelled', { orderId: `o1-${mode}` });
      await cancelled(o1);
      expect((await get(o1)).error).toMatchObject({
        message: `Cancelled by event order.cancelled (${stop.id}): it matched the workflow's cancelOn.`,
      });
      expect(await audit(o1)).toEqual([
        expect.objectContaining({ action: 'cancel', runId: o1, detail: { cancelOn: { event: 'order.cancelled', eventId: stop.id } } }),
      ]);

      // o2's orderId differs: it sleeps on (the same command would have cancelled it with o1).
      await new Promise((r) => setTimeout(r, 300));
      expect((await get(o2)).status).toBe('waiting');
      await send('order.cancelled', { orderId: `o2-${mode}` });
      await cancelled(o2);
    }, 60_000);

    it('cancels only runs started within its timeout', async () => {
      const old = (await send('recent.go')).runId!;
      await sleeping(old);
      await new Promise((r) => setTimeout(r, 1800));
      const young = (await send('recent.go')).runId!;
      await sleeping(young);
      await send('recent.stop');
      await cancelled(young);
      await new Promise((r) => setTimeout(r, 500));
      expect((await get(old)).status).toBe('waiting');
      await api(dep.base, 'POST', `/v1/runs/${old}/cancel`, { key: dep.secretKey });
    }, 60_000);

    it('never cancels the run its own event started', async () => {
      const first = (await send('loop.tick')).runId!;
      await sleeping(first);
      const second = (await send('loop.tick')).runId!;
      await cancelled(first);
      await sleeping(second);
      expect((await get(second)).status).toBe('waiting');
    }, 60_000);

    it('refuses a malformed cancelOn at registration with a 400', async () => {
      const bad = await api(dep.base, 'POST', '/v1/register', {
        key: dep.secretKey,
        body: {
          app: 'refused',
          url: 'http://127.0.0.1:9/invoke',
          workflows: [{ name: 'w', cancelOn: [{ event: 'x', if: 'async.data.' }] }],
        },
      });
      expect(bad.status).toBe(400);
      expect(bad.body.error).toEqual({ code: 'invalid_registration', message: expect.stringContaining('cancelOn[0].if does not compile') });
    });
  });

  describe('timeouts', () => {
    it('cancels a run that does not finish within timeouts.finish, and audits it', async () => {
      const t0 = Date.now();
      const id = (await send('slow')).runId!;
      await reached(id, 'waiting');
      const run = await reached(id, 'cancelled');
      expect(Date.now() - t0).toBeGreaterThanOrEqual(1400);
      expect(run.error).toMatchObject({ message: 'Timed out: the run did not finish within 1500 ms (timeouts.finish).' });
      expect(await audit(id)).toEqual([
        expect.objectContaining({
          action: 'cancel',
          runId: id,
          actor: 'system:timeout',
          detail: { timeout: { which: 'finish', ms: 1500 } },
        }),
      ]);
    });

    it('cancels a run still queued after timeouts.start, and leaves the one that started', async () => {
      const holder = (await send('one-at-a-time')).runId!;
      await reached(holder, 'running');
      const queued = (await send('one-at-a-time')).runId!;
      expect((await get(queued)).status).toBe('queued');
      const run = await reached(queued, 'cancelled');
      expect(run.error).toMatchObject({ message: 'Timed out: the run did not start within 1 s (timeouts.start).' });
      await new Promise((r) => setTimeout(r, 300));
      expect((await get(holder)).status).toBe('running');
      gates.open('one-at-a-time');
      await reached(holder, 'succeeded');
    });

    it("times out a child run by its own workflow's timeouts", async () => {
      const parent = (await send('parent')).runId!;
      const done = await reached(parent, 'succeeded');
      expect(done.result).toEqual({ child: 'Timed out: the run did not finish within 1500 ms (timeouts.finish).' });
    });

    it('refuses malformed timeouts at registration with a 400', async () => {
      const bad = await api(dep.base, 'POST', '/v1/register', {
        key: dep.secretKey,
        body: { app: 'refused', url: 'http://127.0.0.1:9/invoke', workflows: [{ name: 'w', timeouts: { finish: 'soon' } }] },
      });
      expect(bad.status).toBe(400);
      expect(bad.body.error).toEqual({
        code: 'invalid_registration',
        message: expect.stringContaining('timeouts.finish must be a duration'),
      });
    });
  });

  describe('bulk cancel', () => {
    it("cancels the runs matching the filter whose if holds for the run's event, each audited as its cancel", async () => {
      const tenants = ['acme', 'acme', 'globex'];
      const runs = [];
      for (const tenant of tenants) runs.push((await send('import.go', { tenant, mode })).runId!);
      for (const id of runs) await sleeping(id);

      const body = { workflow: 'nightly-import', since: new Date(Date.now() - 60_000).toISOString(), if: `event.data.tenant == 'acme' && event.data.mode == '${mode}'` };
      const res = await api(dep.base, 'POST', '/v1/runs/bulk-cancel', { key: dep.secretKey, body });
      expect(res).toMatchObject({ status: 200, body: { matched: 2, cancelled: 2, skipped: 0, failed: 0, capped: false } });
      for (const id of runs.slice(0, 2)) {
        expect(await get(id)).toMatchObject({ status: 'cancelled', error: { message: 'Cancelled by dev-secret in a bulk cancel.' } });
        expect(await audit(id)).toEqual([expect.objectContaining({ action: 'cancel', runId: id, actor: 'dev-secret', detail: { bulkCancel: body } })]);
      }
      expect((await get(runs[2]!)).status).toBe('waiting');

      // Without the if, the rest of the workflow's runs; a repeat finds none.
      const rest = await api(dep.base, 'POST', '/v1/runs/bulk-cancel', { key: dep.secretKey, body: { workflow: 'nightly-import', status: 'running' } });
      expect(rest.body).toEqual({ matched: 1, cancelled: 1, skipped: 0, failed: 0, capped: false });
      await cancelled(runs[2]!);
      const again = await api(dep.base, 'POST', '/v1/runs/bulk-cancel', { key: dep.secretKey, body: { workflow: 'nightly-import' } });
      expect(again.body).toMatchObject({ matched: 0, cancelled: 0 });
    }, 60_000);

    it('refuses a filter that would widen it, or none, with a 400 and cancels nothing', async () => {
      const id = (await send('import.go', { tenant: 'initech', mode })).runId!;
      await sleeping(id);
      for (const body of [{}, { workflow: 'nightly-import', tenant: 'initech' }, { workflow: 'nightly-import', status: 'succeeded' }, { if: 'event.data.tenant ==' }, { until: 'soon' }]) {
        const r = await api(dep.base, 'POST', '/v1/runs/bulk-cancel', { key: dep.secretKey, body });
        expect({ body, status: r.status }).toEqual({ body, status: 400 });
        expect(r.body.error).toEqual({ code: expect.stringMatching(/^[a-z_]+$/), message: expect.any(String) });
      }
      expect((await api(dep.base, 'POST', '/v1/runs/bulk-cancel', { key: dep.publicKey, body: { workflow: 'nightly-import' } })).status).toBe(403);
      expect((await get(id)).status).toBe('waiting');
      await api(dep.base, 'POST', `/v1/runs/${id}/cancel`, { key: dep.secretKey });
    });
  });
});
