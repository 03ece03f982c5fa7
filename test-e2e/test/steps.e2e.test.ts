import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

/**
 * Every kind of step through the whole fleet with the SDK: run, sleep,
 * waitForEvent (woken by POST /events), runWorkflow, emit (starting another
 * workflow exactly once) and ctx.webhook.send (delivered exactly once).
 */
const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];

describe.each(modes)('step kinds end to end on %s', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;
  let hooks: http.Server;
  let hookUrl = '';
  const received: unknown[] = [];
  const listened: unknown[] = [];
  const attempts: number[] = [];

  beforeAll(async () => {
    hooks = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push(JSON.parse(body));
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => hooks.listen(0, '127.0.0.1', () => r()));
    hookUrl = `http://127.0.0.1:${(hooks.address() as { port: number }).port}/hook`;
    dep = await startDeployment(mode);
    runner = await startRunner(dep, (r) => {
      r.workflow<{ n: number }>('double', async ({ event, step }) => step.run('double', () => event.data.n * 2));
      r.workflow('timed', async ({ step }) => {
        const nap = (ms: number) => new Promise((res) => setTimeout(res, ms));
        await step.run('slow', () => nap(300).then(() => 1));
        await step.run('quick', () => 2);
        return step.run('slower', () => nap(400).then(() => 3));
      });
      // Fails twice, then succeeds: its attempts' times show the workflow's backoff (1.2 s, then 1.2 x 1.5 s, not randomized).
      r.workflow('patient', { retry: { maxAttempts: 3, minTimeoutInMs: 1200, factor: 1.5, randomize: false } }, async ({ step }) =>
        step.run('flaky', () => {
          attempts.push(Date.now());
          if (attempts.length < 3) throw new Error(`attempt ${attempts.length} failed`);
          return attempts.length;
        }),
      );
      r.workflow('listener', { triggers: [{ event: 'journey.done' }] }, async ({ event, step }) =>
        step.run('note', () => {
          listened.push(event.data);
          return true;
        }),
      );
      r.workflow<{ who: string }>('journey', { triggers: [{ event: 'journey.start' }] }, async ({ event, step, ctx }) => {
        const greeting = await step.run('greet', () => `hi ${event.data.who}`);
        await step.sleep('nap', 300);
        const approval = await step.waitForEvent<{ orderId: string; by: string }>('approval', {
          event: 'order.approved',
          timeout: '30s',
          if: 'event.data.orderId == "o-1"',
        });
        const doubled = await step.runWorkflow<number>('kid', { workflow: 'double', data: { n: 21 } });
        await step.emit('announce', { name: 'journey.done', data: { who: event.data.who } });
        await ctx.webhook.send('hook', { url: hookUrl, body: { hello: event.data.who } });
        return { greeting, approvedBy: approval?.data.by ?? null, doubled };
      });
    });
  }, 120_000);

  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
    hooks?.close();
  }, 60_000);

  // The console's waterfall draws each step from startedAt to endedAt: a step's start is when its code began.
  it("times each step from when its code began to when its result was stored", async () => {
    const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'timed', data: {} } });
    const runId: string = sent.body.runId;
    await eventually('the timed run to succeed', async () => runReached((await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.secretKey })).body));
    const steps: { name: string; startedAt: string; endedAt: string }[] = (await api(dep.base, 'GET', `/v1/runs/${runId}/steps`, { key: dep.secretKey })).body;
    const t = Object.fromEntries(steps.map((s) => [s.name, { start: Date.parse(s.startedAt), end: Date.parse(s.endedAt) }]));
    expect(Object.keys(t)).toEqual(['slow', 'quick', 'slower']);
    expect(t.slow!.end - t.slow!.start).toBeGreaterThanOrEqual(290);
    expect(t.quick!.end - t.quick!.start).toBeLessThan(250);
    expect(t.slower!.end - t.slower!.start).toBeGreaterThanOrEqual(390);
    // One after another, as they ran.
    expect(t.quick!.start).toBeGreaterThanOrEqual(t.slow!.end - 50);
    expect(t.slower!.start).toBeGreaterThanOrEqual(t.quick!.start);
    expect(t.slower!.end - t.slow!.start).toBeGreaterThanOrEqual(690);
  }, 60_000);

  it("waits between a step's attempts as the workflow's retry policy says, and refuses a setting it would not apply", async () => {
    const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'patient', data: {} } });
    const run = await eventually('the patient run to succeed', async () => runReached((await api(dep.base, 'GET', `/v1/runs/${sent.body.runId}`, { key: dep.secretKey })).body), 30_000);
    expect(run.result).toBe(3);
    expect(attempts).toHaveLength(3);
    // The defaults would have waited 0.5-1 s, then 1-2 s.
    expect(attempts[1]! - attempts[0]!).toBeGreaterThanOrEqual(1200);
    expect(attempts[2]! - attempts[1]!).toBeGreaterThanOrEqual(1800);

    const refused = await api(dep.base, 'POST', '/v1/register', {
      key: dep.secretKey,
      body: { app: 'refused', url: 'http://127.0.0.1:9/invoke', workflows: [{ name: 'w', retry: { maxAttempts: 3, backoff: 'exponential' } }] },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toEqual({
      code: 'invalid_registration',
      message: 'workflows[0].retry.backoff is not a retry setting (maxAttempts, factor, minTimeoutInMs, maxTimeoutInMs, randomize).',
    });
  }, 60_000);

  it('runs a journey through sleep, an awaited event, a child, an emit and a webhook', async () => {
    let runId = '';
    await eventually('the journey to start', async () => {
      const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'journey.start', data: { who: 'ada' } } });
      runId = r.body?.runId;
      return runId || undefined;
    });
    // Parked on the wait: an event that does not satisfy eventIf wakes nothing; the matching one wakes it.
    await eventually('the run to park on the wait', async () => {
      const steps = await api(dep.base, 'GET', `/v1/runs/${runId}/steps`, { key: dep.secretKey });
      return steps.body?.some?.((s: { name: string; status: string }) => s.name === 'approval' && s.status === 'waiting') ? true : undefined;
    });
    const miss = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'order.approved', data: { orderId: 'o-2', by: 'eve' } } });
    expect(miss.body.woke).toBe(0);
    const hit = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'order.approved', data: { orderId: 'o-1', by: 'bob' } } });
    expect(hit.body.woke).toBe(1);
    const run = await eventually('the journey to succeed', async () => {
      const r = await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.secretKey });
      return runReached(r.body);
    });
    expect(run.result).toEqual({ greeting: 'hi ada', approvedBy: 'bob', doubled: 42 });
    const steps = (await api(dep.base, 'GET', `/v1/runs/${runId}/steps`, { key: dep.secretKey })).body;
    expect(steps.map((s: { name: string }) => s.name)).toEqual(['greet', 'nap', 'approval', 'kid', 'announce', 'hook']);
    expect(steps.every((s: { status: string }) => s.status === 'succeeded')).toBe(true);
    // The emit started the listener once; the webhook arrived once.
    await eventually('the listener and the webhook', async () => (listened.length >= 1 && received.length >= 1 ? true : undefined));
    // Deliberately: time for a duplicate listener run or webhook to show, which must not happen.
    await new Promise((r) => setTimeout(r, 500));
    expect(listened).toEqual([{ who: 'ada' }]);
    expect(received).toEqual([{ hello: 'ada' }]);
    const emitted = await api(dep.base, 'GET', '/v1/events?name=journey.done', { key: dep.secretKey });
    expect(emitted.body).toHaveLength(1);
    expect(emitted.body[0]).toMatchObject({ source: 'emit', triggered: [{ workflow: 'listener' }] });
  }, 60_000);
});
