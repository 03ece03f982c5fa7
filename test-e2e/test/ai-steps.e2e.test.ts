import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

/** The shape `extract` asks the model for (step.ai.generate's output). */
const PERSON = {
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer' } },
  required: ['name', 'age'],
  additionalProperties: false,
};

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
  /** Calls of the structured-output models (claude-json*), and of the embeddings route. */
  const jsonCalls: any[] = [];
  const embedCalls: any[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => {
        const body = JSON.parse(raw);
        if (req.url === '/v1/embeddings') {
          // OpenAI's Embeddings API: { model, input: string[] } -> { object: 'list', data: [{ object, index, embedding }], model, usage }.
          embedCalls.push({ path: req.url, auth: req.headers.authorization, body });
          const data = (body.input as string[]).map((s, index) => ({ object: 'embedding', index, embedding: [Number(s.slice(1)), s.length] }));
          return void res
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ object: 'list', data, model: body.model, usage: { prompt_tokens: data.length, total_tokens: data.length } }));
        }
        if (String(body.model).startsWith('claude-json')) {
          // Structured output: the first answer has age as a string; a re-ask (more than one message) is answered right,
          // except by claude-json-never, which never gets it right.
          jsonCalls.push({ path: req.url, body });
          const fixed = body.messages.length > 1 && body.model !== 'claude-json-never';
          const text = fixed ? '{"name":"Ada","age":36}' : '{"name":"Ada","age":"thirty-six"}';
          return void res
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ type: 'message', role: 'assistant', model: body.model, content: [{ type: 'text', text }], usage: { input_tokens: 20, output_tokens: 9 } }));
        }
        calls.push({ path: req.url, key: req.headers['x-api-key'], body });
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({ type: 'message', role: 'assistant', model: body.model, content: [{ type: 'text', text: `echo: ${body.messages[0].content}` }], usage: { input_tokens: 4, output_tokens: 3 } }),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    dep = await startDeployment(mode, {
      env: { SERVICE_ANTHROPIC_BASE_URL: url, SERVICE_ANTHROPIC_API_KEY: 'sk-ant-e2e', SERVICE_OPENAI_BASE_URL: `${url}/v1`, SERVICE_OPENAI_API_KEY: 'sk-oai-e2e' },
    });
    runner = await startRunner(
      dep,
      (r) => {
        r.workflow<{ model: string }>('extract', async ({ step, event }) => {
          const person = await step.ai.generate<{ name: string; age: number }>('extract', { model: event.data.model, prompt: 'Ada Lovelace, 36', maxTokens: 64, output: PERSON });
          return { output: person.output, reasks: person.reasks };
        });
        r.workflow<{ inputs: string[] }>('embed', async ({ step, event }) => {
          const { embeddings, batches } = await step.ai.embed('vec', { provider: 'openai', model: 'emb-e2e', inputs: event.data.inputs });
          return { batches, count: embeddings.length, inOrder: embeddings.every((e, i) => e[0] === i) };
        });
        r.workflow<{ items: number[] }>('grade', async ({ step, event }) =>
          step.ai.eval('double', { name: 'exact', dataset: event.data.items, task: (n) => n * 2, score: (n, out) => (out === n + n && n !== 2 ? 1 : 0) }),
        );
        r.workflow('ask', async ({ step, event }) => {
          const answer = await step.ai.generate<{ text: string }>('ask-model', { model: 'claude-e2e', prompt: String((event.data as { q: string }).q), maxTokens: 16 });
          await step.score('grade', { name: 'length', value: answer.text.length, judge: 'rule' });
          // A model call the runner makes itself: its usage rides on the StepRun.
          await step.ai.wrap('own-call', () => ({ text: 'local' }), () => ({ model: 'local-model', tokensIn: 1, tokensOut: 2 }));
          return step.run('shout', () => answer.text.toUpperCase());
        });
      },
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

  const runOf = async (name: string, data: unknown, want = 'succeeded') => {
    const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name, data } });
    const runId = sent.body.runId as string;
    const run = await eventually(`run ${want}`, async () => runReached((await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.secretKey })).body, want), 30_000);
    const steps = (await api(dep.base, 'GET', `/v1/runs/${runId}/steps`, { key: dep.secretKey })).body as any[];
    return { runId, run, steps };
  };

  it('re-asks once on structured output that does not validate, as a second durable Infer step, and goes on with the parsed output', async () => {
    const before = jsonCalls.length;
    const { run, steps } = await runOf('extract', { model: 'claude-json' });
    expect(run.result).toEqual({ output: { name: 'Ada', age: 36 }, reasks: 1 });
    const [first, reask] = jsonCalls.slice(before);
    expect(jsonCalls.length - before).toBe(2);
    // The schema is told in the system prompt, never sent as a provider field.
    expect(first.body.system).toContain(JSON.stringify(PERSON));
    expect(first.body).not.toHaveProperty('output');
    expect(first.body.messages).toEqual([{ role: 'user', content: 'Ada Lovelace, 36' }]);
    expect(reask.body.system).toBe(first.body.system);
    expect(reask.body.messages).toEqual([
      { role: 'user', content: 'Ada Lovelace, 36' },
      { role: 'assistant', content: '{"name":"Ada","age":"thirty-six"}' },
      { role: 'user', content: 'Your previous answer was refused: /age must be integer. Answer again with JSON only, matching the schema given in the instructions.' },
    ]);
    expect(steps.filter((s) => s.op === 'Infer').map((s) => [s.name, s.status, s.usage?.tokensIn])).toEqual([
      ['extract', 'succeeded', 20],
      ['extract:reask-1', 'succeeded', 20],
    ]);
  });

  it('fails the run with the typed error once the re-ask does not validate either', async () => {
    const { run, steps } = await runOf('extract', { model: 'claude-json-never' }, 'failed');
    expect(run.error).toMatchObject({
      message: `step.ai.generate("extract"): the model's answer does not match the output schema after 2 calls (1 re-ask): /age must be integer`,
    });
    expect(steps.filter((s) => s.op === 'Infer').map((s) => s.name)).toEqual(['extract', 'extract:reask-1']);
  });

  it('embeds 250 inputs in three durable batches (100, 100, 50) through the openai-kind embeddings call, in order, usage metered', async () => {
    const inputs = Array.from({ length: 250 }, (_, i) => `t${i}`);
    const before = embedCalls.length;
    const { run, steps } = await runOf('embed', { inputs });
    expect(run.result).toEqual({ batches: 3, count: 250, inOrder: true });
    const seen = embedCalls.slice(before);
    expect(seen.map((c) => c.body.input.length).sort()).toEqual([100, 100, 50]);
    expect(seen.every((c) => c.path === '/v1/embeddings' && c.auth === 'Bearer sk-oai-e2e' && c.body.model === 'emb-e2e' && !('batchSize' in c.body))).toBe(true);
    const batches = steps.filter((s) => s.op === 'Infer').sort((a, b) => (a.name < b.name ? -1 : 1));
    expect(batches.map((s) => [s.name, s.status, s.usage?.tokensIn])).toEqual([
      ['vec:batch-0', 'succeeded', 100],
      ['vec:batch-1', 'succeeded', 100],
      ['vec:batch-2', 'succeeded', 50],
    ]);
    expect(run.usage).toMatchObject({ calls: 3, tokensIn: 250 });
  });

  it('runs an eval: a durable task and one score row per item, and the summary', async () => {
    const { runId, run } = await runOf('grade', { items: [1, 2, 3, 4] });
    expect(run.result).toEqual({ name: 'exact', count: 4, total: 4, truncated: false, mean: 0.75, scores: [1, 0, 1, 1] });
    const scores = (await api(dep.base, 'GET', `/v1/runs/${runId}/scores`, { key: dep.secretKey })).body as any[];
    expect(scores.map((x) => [x.step, x.name, x.value, x.eval, x.index]).sort()).toEqual([
      ['double:score-0', 'exact', 1, 'double', 0],
      ['double:score-1', 'exact', 0, 'double', 1],
      ['double:score-2', 'exact', 1, 'double', 2],
      ['double:score-3', 'exact', 1, 'double', 3],
    ]);
  });
});
