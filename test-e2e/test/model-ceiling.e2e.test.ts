import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { anthropicMessage, startFakeModel } from '../src/fake-model.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

const ADMIN = `admin-${randomBytes(8).toString('hex')}`;
const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];

/**
 * A workspace's monthly model ceiling (admin limits modelTokensPerMonth):
 * the scheduler, which records every step's usage, refuses the model call
 * that would start at or past it (the step fails saying so, the provider is
 * not called) and reports it; the gateway then suspends the workspace
 * (usage_limit) and ingest answers POST /events with suspended true, until
 * the limit is raised. Each model call here costs 110 tokens (60 in, 50 out).
 */
describe.each(modes)('workspace model ceiling on %s', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;
  let model: Awaited<ReturnType<typeof startFakeModel>>;

  beforeAll(async () => {
    model = await startFakeModel(({ body }) => anthropicMessage(body.model, 'ok', { input_tokens: 60, output_tokens: 50 }));
    dep = await startDeployment(mode, {
      env: { SERVICE_ADMIN_TOKEN: ADMIN, SERVICE_ANTHROPIC_BASE_URL: model.url, SERVICE_ANTHROPIC_API_KEY: 'sk-ant-e2e' },
    });
    runner = await startRunner(dep, (r) => {
      // Three model calls in a row; a refused one is caught and reported in the result.
      r.workflow('agent', {}, async ({ step, event }: any) => {
        const made: string[] = [];
        for (const n of ['a', 'b', 'c']) {
          try {
            await step.ai.generate(`call-${n}`, { model: 'claude-e2e', prompt: `${event.data.tag}-${n}`, maxTokens: 8 });
            made.push(n);
          } catch (err) {
            return { made, refused: (err as Error).message };
          }
        }
        return { made };
      });
    });
  }, 180_000);

  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
    await model?.close();
  }, 60_000);

  const admin = (body?: unknown) => api(dep.base, body === undefined ? 'GET' : 'PATCH', '/v1/admin/workspaces/ws_default', { key: ADMIN, body });
  const send = (tag: string) => api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'agent', data: { tag } } });
  const ended = (runId: string) =>
    eventually(`run ${runId} to end`, async () => runReached((await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.secretKey })).body), 30_000);
  const calledFor = (tag: string) => model.calls.filter((c) => String(c.body.messages[0].content).startsWith(`${tag}-`)).length;

  it('refuses the call past modelTokensPerMonth, suspends the workspace, and lifts it when the limit is raised', async () => {
    const set = await admin({ limits: { modelTokensPerMonth: 200 } });
    expect(set.status).toBe(200);
    expect(set.body.limits).toEqual({ modelTokensPerMonth: 200 });

    // a: 0 used; b: 110 < 200; c: 220 >= 200, refused without calling the provider. The scheduler learns
    // the ceiling from the gateway's fact, so a run racing it may make all three: count what was made.
    const month = new Date().toISOString().slice(0, 7);
    const refusal = (used: number, of: number) => `Workspace model usage ceiling reached: this workspace used ${used} model tokens of its ${of} for ${month} (UTC).`;
    let tag = '';
    const first = await eventually('a run refused at the ceiling', async () => {
      tag = `first-${mode}-${randomBytes(3).toString('hex')}`;
      const r = await ended((await send(tag)).body.runId);
      return r.result?.refused ? r : undefined;
    });
    const used = 110 * model.calls.length;
    expect(first.result).toEqual({ made: ['a', 'b', 'c'].slice(0, calledFor(tag)), refused: refusal(used, 200) });
    const steps = (await api(dep.base, 'GET', `/v1/runs/${first.id}/steps`, { key: dep.secretKey })).body as any[];
    expect(steps.find((s) => s.name === `call-${['a', 'b', 'c'][calledFor(tag)]}`)).toMatchObject({
      op: 'Infer',
      status: 'failed',
      error: { message: refusal(used, 200) },
    });

    // The gateway suspends the workspace: no new run starts.
    await eventually('the usage suspension', async () => ((await admin()).body.suspendedReason === 'usage_limit' ? true : undefined));
    expect((await admin()).body).toMatchObject({ suspended: true, usage: { month, model: { tokens: used, cost: 0 } } });
    const refused = await eventually('ingest to refuse runs', async () => {
      const r = await send(`refused-${mode}`);
      return r.body?.suspended === true ? r : undefined;
    });
    expect(refused.status).toBe(202);
    expect(refused.body.runId).toBeUndefined();

    // Raised by 200: runs start again and make two calls (used + 220 >= used + 200). A run racing the
    // scheduler's copy of the new limit is refused at its first call, which spends nothing: try again.
    expect((await admin({ limits: { modelTokensPerMonth: used + 200 } })).body).toMatchObject({ suspended: false, suspendedReason: null });
    const again = await eventually('a run to make calls again', async () => {
      const sent = await send(`again-${mode}`);
      if (!sent.body?.runId) return undefined;
      const r = await ended(sent.body.runId);
      return r.result?.made?.length ? r : undefined;
    });
    expect(again.result).toEqual({ made: ['a', 'b'], refused: refusal(used + 220, used + 200) });
  }, 120_000);
});
