import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import express from 'express';
import type { RegisterBody } from '@dws/protocol';
import { createRunner, type Runner } from '@dws/sdk';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment } from '../src/deployment.js';
import { realInfra, uniquePrefix } from '../src/infra.js';

/**
 * Registration is read-your-writes (issue 11): once POST /v1/register has
 * answered, the very next event, on any gateway and any ingest replica,
 * matches what was registered: no sleep, no retry. The fleet here has two
 * gateways and two ingest replicas; registrations and events alternate
 * between the gateways, so a replica's cached index is what is tested.
 */
const infra = realInfra();
if (!infra && process.env.CI) throw new Error('CI needs real Postgres and NATS for the registration e2e test');
if (!infra) console.warn('\n!!! Postgres/NATS missing: registration read-your-writes on the fleet SKIPPED !!!\n');
const describeFleet = infra ? describe : describe.skip;

describeFleet('registration is read-your-writes on the fleet (2 gateways, 2 ingest)', () => {
  let dep: Deployment;
  let server: Server;
  let runners: Runner[];
  const tag = uniquePrefix('ryw');

  beforeAll(async () => {
    dep = await startDeployment('fleet', { replicas: { gateway: 2, ingest: 2 } });
    const app = express();
    server = await new Promise((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    const addr = server.address();
    const port = typeof addr === 'object' && addr ? addr.port : 0;
    // One runner process reachable through either gateway: the same runner id and invoke URL.
    runners = dep.bases.map((base) =>
      createRunner({
        app: 'ryw',
        runnerId: `runner-${tag}`,
        url: `${base}/v1`,
        apiKey: dep.secretKey,
        signingKey: dep.signingKey,
        publicUrl: `http://127.0.0.1:${port}/invoke`,
      }),
    );
    app.post('/invoke', runners[0]!.serve());
  }, 180_000);

  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    await dep?.stop();
  }, 60_000);

  const gateway = (i: number) => dep.bases[i % dep.bases.length]!;
  const register = async (i: number, body: RegisterBody) => {
    const res = await api(gateway(i), 'POST', '/v1/register', { key: dep.secretKey, body });
    expect(res.status).toBe(200);
  };
  const send = async (i: number, name: string) => {
    const res = await api(gateway(i), 'POST', '/v1/events', { key: dep.secretKey, body: { name } });
    expect(res.status).toBe(202);
    return res.body as { id: string; runId?: string; triggered: { workflow: string; runId: string }[] };
  };

  it('matches a workflow registered a moment ago, 50 times over, alternating gateways', async () => {
    const runIds: string[] = [];
    for (let i = 0; i < 50; i++) {
      const name = `${tag}.wf.${i}`;
      for (const r of runners) r.workflow(name, { triggers: [{ event: `${tag}.ev.${i}` }] }, async ({ step }) => step.run('one', () => i));
      await runners[i % 2]!.register();
      // No sleep: the next gateway's event must see it.
      const out = await send(i + 1, `${tag}.ev.${i}`);
      expect(out.triggered.map((t) => t.workflow)).toEqual([name]);
      runIds.push(out.triggered[0]!.runId);
    }
    // Each event started exactly one run, and it runs.
    for (const id of runIds) {
      const run = await eventually(`run ${id} to succeed`, async () => {
        const r = await api(dep.base, 'GET', `/v1/runs/${id}`, { key: dep.secretKey });
        return r.status === 200 ? runReached(r.body) : undefined;
      });
      const byEvent = await api(dep.base, 'GET', `/v1/runs?eventId=${run.eventId}`, { key: dep.secretKey });
      expect(byEvent.body.map((r: { id: string }) => r.id)).toEqual([id]);
    }
  }, 180_000);

  it('a changed trigger matches at once, and the old one no longer does', async () => {
    const name = `${tag}.moving`;
    const base = runners[0]!.registerBody();
    const withTrigger = (event: string): RegisterBody => ({
      ...base,
      workflows: [...base.workflows.filter((w) => w.name !== name), { name, triggers: [{ event }] }],
    });
    for (let k = 0; k < 20; k++) {
      await register(k, withTrigger(`${tag}.moving.v${k}`));
      const now = await send(k + 1, `${tag}.moving.v${k}`);
      expect(now.triggered.map((t) => t.workflow)).toEqual([name]);
      if (k > 0) {
        const old = await send(k, `${tag}.moving.v${k - 1}`);
        expect(old.triggered).toEqual([]);
      }
    }
  }, 120_000);

  it('a workflow the runner no longer declares stops matching at once', async () => {
    const name = `${tag}.dropped`;
    const base = runners[0]!.registerBody();
    await register(0, { ...base, workflows: [...base.workflows, { name, triggers: [{ event: `${tag}.dropped` }] }] });
    expect((await send(1, `${tag}.dropped`)).triggered.map((t) => t.workflow)).toEqual([name]);
    await register(1, { ...base, workflows: base.workflows.filter((w) => w.name !== name) });
    expect((await send(0, `${tag}.dropped`)).triggered).toEqual([]);
    const listed = await api(gateway(1), 'GET', '/v1/workflows?app=ryw', { key: dep.secretKey });
    expect(listed.body.map((w: { name: string }) => w.name)).not.toContain(name);
  }, 60_000);
});
