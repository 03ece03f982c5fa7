import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { api, eventually } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];

/**
 * Workflow `timeouts` (Inngest's shape): a run still queued `start` after it
 * was created, or not ended `finish` after it, is cancelled, audited as a
 * cancel by system:timeout; the runs the scheduler starts itself (a child
 * here) get their workflow's timeouts too.
 */
describe.each(modes)('run timeouts on %s', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;

  beforeAll(async () => {
    dep = await startDeployment(mode);
    runner = await startRunner(dep, (r) => {
      const sleeper = async ({ step }: any) => {
        await step.run('first', () => 1);
        await step.sleep('wait', '1h');
        return 2;
      };
      r.workflow('slow', { timeouts: { finish: '1500ms' } }, sleeper);
      r.workflow('one-at-a-time', { concurrency: { limit: 1 }, timeouts: { start: '1s' } }, sleeper);
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
    await runner?.close();
    await dep?.stop();
  }, 60_000);

  const send = async (name: string) => {
    const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name, data: {} } });
    expect(r.status).toBe(202);
    return r.body.runId as string;
  };
  const get = async (id: string) => (await api(dep.base, 'GET', `/v1/runs/${id}`, { key: dep.secretKey })).body;
  const reached = (id: string, status: string) =>
    eventually(`run ${id} ${status}`, async () => {
      const r = await get(id);
      return r.status === status ? r : undefined;
    }, 20_000);

  it('cancels a run that does not finish within timeouts.finish, and audits it', async () => {
    const t0 = Date.now();
    const id = await send('slow');
    await reached(id, 'waiting');
    const run = await reached(id, 'cancelled');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1400);
    expect(run.error).toMatchObject({ message: 'Timed out: the run did not finish within 1500 ms (timeouts.finish).' });
    const audit = (await api(dep.base, 'GET', `/v1/control-actions?runId=${id}`, { key: dep.secretKey })).body as any[];
    expect(audit).toEqual([
      expect.objectContaining({ action: 'cancel', runId: id, actor: 'system:timeout', detail: { timeout: { which: 'finish', ms: 1500 } } }),
    ]);
  });

  it('cancels a run still queued after timeouts.start, and leaves the one that started', async () => {
    const holder = await send('one-at-a-time');
    await reached(holder, 'waiting');
    const queued = await send('one-at-a-time');
    expect((await get(queued)).status).toBe('queued');
    const run = await reached(queued, 'cancelled');
    expect(run.error).toMatchObject({ message: 'Timed out: the run did not start within 1 s (timeouts.start).' });
    await new Promise((r) => setTimeout(r, 300));
    expect((await get(holder)).status).toBe('waiting');
    await api(dep.base, 'POST', `/v1/runs/${holder}/cancel`, { key: dep.secretKey });
  });

  it("times out a child run by its own workflow's timeouts", async () => {
    const parent = await send('parent');
    const done = await reached(parent, 'succeeded');
    expect(done.result).toEqual({ child: 'Timed out: the run did not finish within 1500 ms (timeouts.finish).' });
  });

  it('refuses malformed timeouts at registration with a 400', async () => {
    const bad = await api(dep.base, 'POST', '/v1/register', {
      key: dep.secretKey,
      body: { app: 'refused', url: 'http://127.0.0.1:9/invoke', workflows: [{ name: 'w', timeouts: { finish: 'soon' } }] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toEqual({ code: 'invalid_registration', message: expect.stringContaining('timeouts.finish must be a duration') });
  });
});
