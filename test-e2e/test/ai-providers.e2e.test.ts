import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { anthropicMessage, startFakeModel } from '../src/fake-model.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

const ADMIN = `admin-${randomBytes(8).toString('hex')}`;
const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];

/** A local server speaking Anthropic's Messages API that answers `name` and records which key called it. */
async function fakeAnthropic(name: string) {
  const model = await startFakeModel(({ body }) => anthropicMessage(body.model, name));
  return { ...model, keys: () => model.calls.map((c) => String(c.headers['x-api-key'])) };
}

/**
 * A workspace's own model provider, set through the admin API: the service
 * calls the workspace's base URL with the workspace's key instead of the
 * environment's default, the key is never shown back, and removing the
 * entry falls back to the default.
 */
describe.each(modes)('per-workspace model providers (%s)', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;
  let fallback: Awaited<ReturnType<typeof fakeAnthropic>>;
  let own: Awaited<ReturnType<typeof fakeAnthropic>>;

  beforeAll(async () => {
    fallback = await fakeAnthropic('from the default');
    own = await fakeAnthropic('from the workspace');
    dep = await startDeployment(mode, { env: { SERVICE_ADMIN_TOKEN: ADMIN, SERVICE_ANTHROPIC_BASE_URL: fallback.url, SERVICE_ANTHROPIC_API_KEY: 'sk-env' } });
    runner = await startRunner(
      dep,
      (r) => r.workflow('ask', async ({ step }) => ((await step.ai.generate('ask', { model: 'm', prompt: 'hi', maxTokens: 4 })) as { text: string }).text),
      { app: 'providers' },
    );
  }, 120_000);
  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
    for (const s of [fallback, own]) await s?.close();
  }, 60_000);

  const admin = (body?: unknown) => api(dep.base, body === undefined ? 'GET' : 'PATCH', '/v1/admin/workspaces/ws_default', { key: ADMIN, body });
  const ask = async () => {
    const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'ask' } });
    const id = sent.body.runId as string;
    return (await eventually('run ended', async () => runReached((await api(dep.base, 'GET', `/v1/runs/${id}`, { key: dep.secretKey })).body), 30_000)).result;
  };

  it('calls the workspace provider with its key, shows no key, and falls back once it is removed', async () => {
    expect(await ask()).toBe('from the default');
    expect(fallback.keys()).toEqual(['sk-env']);

    const set = await admin({ providers: { anthropic: { baseUrl: own.url, apiKey: 'sk-workspace' } } });
    expect(set.status).toBe(200);
    expect(set.body.providers).toEqual({ anthropic: { baseUrl: own.url, apiKeySet: true } });
    expect(JSON.stringify((await admin()).body)).not.toContain('sk-workspace');
    // The invoker learns it from the workspace fact: the next call may race it, so ask until it lands.
    await eventually('the workspace provider answers', async () => ((await ask()) === 'from the workspace' ? true : undefined), 30_000);
    expect(own.keys().every((k) => k === 'sk-workspace')).toBe(true);

    // A field at a time: the key alone changes, the base URL stays.
    expect((await admin({ providers: { anthropic: { apiKey: 'sk-rotated' } } })).body.providers).toEqual({ anthropic: { baseUrl: own.url, apiKeySet: true } });
    await eventually('the rotated key is used', async () => ((await ask(), own.keys().at(-1) === 'sk-rotated') ? true : undefined), 30_000);

    expect((await admin({ providers: { anthropic: null } })).body.providers).toEqual({});
    await eventually('back to the default', async () => ((await ask()) === 'from the default' ? true : undefined), 30_000);
  });

  it('refuses a malformed provider with a 400 and changes nothing', async () => {
    for (const providers of [{ anthropic: { baseUrl: 'ftp://x' } }, { gemini: { apiKey: 'k' } }, { openai: { apiKey: '' } }, { anthropic: 'k' }]) {
      const res = await admin({ providers });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toEqual(expect.any(String));
    }
    expect((await admin()).body.providers).toEqual({});
  });
});
