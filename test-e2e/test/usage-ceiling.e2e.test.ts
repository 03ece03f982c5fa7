import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

const ADMIN = `admin-${randomBytes(8).toString('hex')}`;
const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];

/**
 * SPEC Limits, "Usage or plan ceiling | metered | Workspace becomes
 * suspended": runs end in the scheduler, the gateway meters their
 * RunFinished facts, suspends the workspace at `runsPerMonth`, and ingest
 * (told by WorkspaceUpserted) answers POST /events with suspended true.
 */
describe.each(modes)('usage ceiling on %s', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;

  beforeAll(async () => {
    dep = await startDeployment(mode, { env: { SERVICE_ADMIN_TOKEN: ADMIN } });
    runner = await startRunner(dep, (r) => {
      r.workflow('metered', { triggers: [{ event: 'metered.go' }] }, async ({ step }) => step.run('one', () => 1));
    });
  }, 180_000);

  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
  }, 60_000);

  const admin = (body?: unknown) => api(dep.base, body === undefined ? 'GET' : 'PATCH', '/v1/admin/workspaces/ws_default', { key: ADMIN, body });
  const send = () => api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'metered.go' } });
  const succeeded = (runId: string) =>
    eventually(`run ${runId} to succeed`, async () => (runReached((await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.secretKey })).body) ? true : undefined));

  it('suspends the workspace once its runs reach runsPerMonth, and raising the limit lets runs start again', async () => {
    expect((await admin({ limits: { runsPerMonth: 2 } })).status).toBe(200);
    for (let i = 0; i < 2; i++) {
      const r = await send();
      expect(r.body).toMatchObject({ suspended: false });
      await succeeded(r.body.runId);
    }
    await eventually('the usage suspension', async () => ((await admin()).body.suspendedReason === 'usage_limit' ? true : undefined));
    expect((await admin()).body).toMatchObject({ suspended: true, usage: { runs: 2 } });
    const refused = await eventually('ingest to refuse runs', async () => {
      const r = await send();
      return r.body?.suspended === true ? r : undefined;
    });
    expect(refused.status).toBe(202);
    expect(refused.body.runId).toBeUndefined();

    expect((await admin({ limits: { runsPerMonth: 10 } })).body).toMatchObject({ suspended: false, suspendedReason: null });
    const again = await eventually('runs to start again', async () => {
      const r = await send();
      return r.body?.runId ? r : undefined;
    });
    await succeeded(again.body.runId);
  }, 120_000);
});
