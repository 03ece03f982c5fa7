import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

/**
 * An AI step through the public API with the SDK: step.ai.generate hands the
 * model request to the service, which calls the provider (a local server
 * speaking Anthropic's Messages API) and completes the step; the run goes on
 * with the text, and the step read shows its usage; a Score step's row is
 * read back from GET /v1/runs/{id}/scores.
 */
const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];

describe.each(modes)('AI steps (%s)', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;
  let server: Server;
  const calls: any[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => {
        const body = JSON.parse(raw);
        calls.push({ path: req.url, key: req.headers['x-api-key'], body });
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({ type: 'message', role: 'assistant', model: body.model, content: [{ type: 'text', text: `echo: ${body.messages[0].content}` }], usage: { input_tokens: 4, output_tokens: 3 } }),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    dep = await startDeployment(mode, { env: { SERVICE_ANTHROPIC_BASE_URL: url, SERVICE_ANTHROPIC_API_KEY: 'sk-ant-e2e' } });
    runner = await startRunner(
      dep,
      (r) =>
        r.workflow('ask', async ({ step, event }) => {
          const answer = await step.ai.generate<{ text: string }>('ask-model', { model: 'claude-e2e', prompt: String((event.data as { q: string }).q), maxTokens: 16 });
          await step.score('grade', { name: 'length', value: answer.text.length, judge: 'rule' });
          // A model call the runner makes itself: its usage rides on the StepRun.
          await step.ai.wrap('own-call', () => ({ text: 'local' }), () => ({ model: 'local-model', tokensIn: 1, tokensOut: 2 }));
          return step.run('shout', () => answer.text.toUpperCase());
        }),
      { app: 'ai' },
    );
  }, 120_000);
  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
    await new Promise((r) => server?.close(r));
  }, 60_000);

  it('groups the runs of a session: GET /v1/sessions with their runs, model usage and scores', async () => {
    const session = `s-${mode}-${Date.now()}`;
    const ids: string[] = [];
    for (const q of ['one', 'three']) {
      const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'ask', data: { q }, session } });
      ids.push(sent.body.runId as string);
    }
    for (const id of ids) await eventually('run succeeded', async () => runReached((await api(dep.base, 'GET', `/v1/runs/${id}`, { key: dep.secretKey })).body), 30_000);
    expect((await api(dep.base, 'GET', `/v1/runs/${ids[0]}`, { key: dep.secretKey })).body.session).toBe(session);
    const list = await api(dep.base, 'GET', '/v1/sessions', { key: dep.secretKey });
    expect(list.status).toBe(200);
    expect(list.body[0]).toEqual({
      id: session,
      runs: 2,
      firstSeenAt: expect.any(String),
      lastSeenAt: expect.any(String),
      // Two runs, each with the service's call (4 in, 3 out) and its own wrapped one (1 in, 2 out).
      usage: { calls: 4, tokensIn: 10, tokensOut: 10 },
      // 'echo: one' and 'echo: three': lengths 9 and 11.
      scores: [{ name: 'length', count: 2, average: 10 }],
    });
    expect((await api(dep.base, 'GET', '/v1/sessions?limit=100000', { key: dep.secretKey })).status).toBe(200);
    const bad = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'ask', data: { q: 'x' }, session: 'x'.repeat(257) } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_event');
  });

  it('runs step.ai.generate through the provider and goes on with its text; the step records usage', async () => {
    const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'ask', data: { q: 'hello' } } });
    const runId = sent.body.runId as string;
    const run = await eventually('run succeeded', async () => runReached((await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.secretKey })).body), 30_000);
    expect(run.result).toBe('ECHO: HELLO');
    const hello = calls.filter((c) => c.body.messages[0].content === 'hello');
    expect(hello).toHaveLength(1);
    expect(hello[0]).toMatchObject({ path: '/v1/messages', key: 'sk-ant-e2e', body: { model: 'claude-e2e', max_tokens: 16, messages: [{ role: 'user', content: 'hello' }] } });
    const steps = (await api(dep.base, 'GET', `/v1/runs/${runId}/steps`, { key: dep.secretKey })).body as any[];
    expect(steps.find((s) => s.name === 'own-call')).toMatchObject({ op: 'StepRun', usage: { model: 'local-model', tokensIn: 1, tokensOut: 2 } });
    expect(steps.find((s) => s.name === 'ask-model')).toMatchObject({ op: 'Infer', status: 'succeeded', output: { text: 'echo: hello' }, usage: { model: 'claude-e2e', tokensIn: 4, tokensOut: 3 } });
    // Usage per run (its steps' calls) and per workspace (GET /v1/usage, this month by default, per model).
    expect(run.usage).toEqual({ calls: 2, tokensIn: 5, tokensOut: 5 });
    const usage = (await api(dep.base, 'GET', '/v1/usage', { key: dep.secretKey })).body;
    expect(usage).toMatchObject({ since: expect.any(String), calls: expect.any(Number) });
    expect(usage.models.map((m: any) => m.model)).toEqual(['claude-e2e', 'local-model']);
    expect(usage.calls).toBe(usage.models.reduce((a: number, m: any) => a + m.calls, 0));
    expect((await api(dep.base, 'GET', '/v1/usage?since=2999-01-01T00:00:00Z', { key: dep.secretKey })).body).toMatchObject({ calls: 0, tokensIn: 0, models: [] });
    expect((await api(dep.base, 'GET', '/v1/usage?since=yesterday', { key: dep.secretKey })).status).toBe(400);
    const scores = await api(dep.base, 'GET', `/v1/runs/${runId}/scores`, { key: dep.secretKey });
    expect(scores.status).toBe(200);
    expect(scores.body).toEqual([{ id: expect.stringMatching(/^scr_/), runId, step: 'grade', name: 'length', value: 11, judge: 'rule', createdAt: expect.any(String) }]);
  });
});
