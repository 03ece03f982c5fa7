import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { anthropicMessage, startFakeModel } from '../src/fake-model.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

/**
 * AI spend ceilings (SPEC Limits: per-run and rolling-window, opt-in): a
 * workflow registered with `aiSpend` has the model call that would start
 * past a ceiling refused: the Infer step fails with a clear error (the
 * handler may catch it) and the provider is not called. Each model call
 * here costs 110 tokens (60 in, 50 out).
 */
const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];

describe.each(modes)('AI spend ceilings (%s)', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;
  let model: Awaited<ReturnType<typeof startFakeModel>>;

  beforeAll(async () => {
    model = await startFakeModel(({ body }) => anthropicMessage(body.model, 'ok', { input_tokens: 60, output_tokens: 50 }));
    dep = await startDeployment(mode, { env: { SERVICE_ANTHROPIC_BASE_URL: model.url, SERVICE_ANTHROPIC_API_KEY: 'sk-ant-e2e' } });
    /** Three model calls in a row; a refused one is caught and reported in the result. */
    const threeCalls = async ({ step, event }: any) => {
      const tag = String(event.data.tag);
      const made: string[] = [];
      for (const n of ['a', 'b', 'c']) {
        try {
          await step.ai.generate(`call-${n}`, { model: 'claude-e2e', prompt: `${tag}-${n}`, maxTokens: 8 });
          made.push(n);
        } catch (err) {
          return { made, refused: (err as Error).message };
        }
      }
      return { made };
    };
    runner = await startRunner(
      dep,
      (r) => {
        r.workflow('per-run', { aiSpend: { perRun: { tokens: 200 } } }, threeCalls);
        r.workflow('per-window', { aiSpend: { perWindow: { tokens: 300, windowMs: 3_600_000 } } }, threeCalls);
        r.workflow('unlimited', {}, threeCalls);
      },
      { app: 'spend' },
    );
  }, 120_000);
  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
    await model?.close();
  }, 60_000);

  const run = async (workflow: string, tag: string) => {
    const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: workflow, data: { tag } } });
    expect(sent.status).toBe(202);
    const id = sent.body.runId as string;
    return eventually(`${workflow} run succeeded`, async () => runReached((await api(dep.base, 'GET', `/v1/runs/${id}`, { key: dep.secretKey })).body), 30_000);
  };
  const calledFor = (tag: string) =>
    model.calls
      .map((c) => c.body.messages[0].content as string)
      .filter((p) => p.startsWith(`${tag}-`))
      .sort();

  it('refuses the call that would start past a run ceiling, without calling the provider', async () => {
    const tag = `run-${mode}`;
    // a: 0 spent; b: 110 < 200; c: 220 >= 200, refused.
    const r = await run('per-run', tag);
    expect(r.result).toEqual({ made: ['a', 'b'], refused: 'AI spend ceiling reached: this run used 220 tokens of its 200.' });
    expect(calledFor(tag)).toEqual([`${tag}-a`, `${tag}-b`]);
    const steps = (await api(dep.base, 'GET', `/v1/runs/${r.id}/steps`, { key: dep.secretKey })).body as any[];
    expect(steps.find((s) => s.name === 'call-c')).toMatchObject({ op: 'Infer', status: 'failed', error: { message: expect.stringContaining('AI spend ceiling reached') } });
    // The ceiling is per run: the next run starts from zero.
    expect((await run('per-run', `${tag}-again`)).result).toEqual({ made: ['a', 'b'], refused: expect.any(String) });
  });

  it('counts a rolling window over the workflow runs, and leaves other workflows alone', async () => {
    const tag = `win-${mode}`;
    expect((await run('per-window', `${tag}-1`)).result).toEqual({ made: ['a', 'b', 'c'] }); // 0, 110, 220 < 300
    const second = await run('per-window', `${tag}-2`); // 330 >= 300 before its first call
    expect(second.result).toEqual({ made: [], refused: "AI spend ceiling reached: this workflow's runs over the last 3600 s used 330 tokens of its 300." });
    expect(calledFor(`${tag}-2`)).toEqual([]);
    expect((await run('unlimited', `${tag}-free`)).result).toEqual({ made: ['a', 'b', 'c'] });
  });

  it('refuses a malformed ceiling at registration with a 400', async () => {
    const res = await api(dep.base, 'POST', '/v1/register', {
      key: dep.secretKey,
      body: { app: 'spend-bad', url: 'http://127.0.0.1:9/invoke', workflows: [{ name: 'w', aiSpend: { perRun: { tokens: -1 } } }] },
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({ code: 'invalid_registration', message: 'workflows[0].aiSpend.perRun.tokens must be a positive number.' });
  });
});
