import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRunner, type Connection } from '@dws/sdk';
import { runTraceIds, startTracing, type Tracing } from '@dws/telemetry';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '@dws/telemetry/testing';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

/**
 * OpenTelemetry across the fleet (docs/tracing.md): a tiny OTLP/HTTP
 * receiver on 127.0.0.1 gets the spans of the six processes (and of `pnpm
 * dev`), and of the runner in this process, and one run's spans from
 * ingest, the scheduler, the invoker and the runner share the run's trace
 * id with parent links that follow the pass.
 */
const modes: Mode[] = realInfra() ? ['fleet', 'embedded'] : ['embedded'];
if (!realInfra()) console.warn('\n!!! Postgres/NATS missing: tracing e2e runs embedded only (fleet SKIPPED) !!!\n');

const KIND = { internal: 1, server: 2, client: 3, producer: 4 };
const CLIENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';

/** The spans of one trace as an indented tree (for failure messages). */
function treeOf(spans: ReceivedSpan[]): string {
  const ids = new Set(spans.map((s) => s.spanId));
  const lines: string[] = [];
  const walk = (parent: string, depth: number) => {
    for (const s of spans.filter((x) => x.parentSpanId === parent).sort((a, b) => a.startMs - b.startMs)) {
      lines.push(`${'  '.repeat(depth)}${s.name} [${s.service}] ${JSON.stringify(s.attributes)}`);
      walk(s.spanId, depth + 1);
    }
  };
  walk('', 0);
  for (const s of spans.filter((x) => x.parentSpanId !== '' && !ids.has(x.parentSpanId))) lines.push(`(parent ${s.parentSpanId} not received) ${s.name} [${s.service}]`);
  return lines.join('\n');
}

describe.each(modes)('tracing on %s', (mode) => {
  let receiver: OtlpReceiver;
  let runnerTracing: Tracing;
  let dep: Deployment;
  let conn: Connection;
  let served: TestRunner;
  let provider: Server;
  /** Receives ctx.webhook.send deliveries: the traceparent of each. */
  let hooks: Server;
  const hookParents: string[] = [];
  const svc = (name: 'gateway' | 'ingest' | 'scheduler' | 'invoker') => (mode === 'fleet' ? name : 'dws');

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    // A model provider speaking Anthropic's Messages API, for an Infer step.
    provider = createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => {
        const body = JSON.parse(raw) as { model: string };
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ type: 'message', role: 'assistant', model: body.model, content: [{ type: 'text', text: 'hi' }], usage: { input_tokens: 4, output_tokens: 3 } }));
      });
    });
    await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));
    const providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;
    hooks = createServer((req, res) => {
      hookParents.push(String(req.headers.traceparent ?? ''));
      req.resume().on('end', () => res.writeHead(204).end());
    });
    await new Promise<void>((r) => hooks.listen(0, '127.0.0.1', r));
    const hookUrl = `http://127.0.0.1:${(hooks.address() as AddressInfo).port}/hook`;
    // Every service process exports to the receiver; a short batch delay keeps the test quick.
    dep = await startDeployment(mode, {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100', SERVICE_ANTHROPIC_BASE_URL: providerUrl, SERVICE_ANTHROPIC_API_KEY: 'sk-ant-e2e' },
    });
    // The runners live in this process: its OTel SDK exports their spans to the same receiver.
    runnerTracing = await startTracing({ serviceName: 'runner', env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url } });
    expect(runnerTracing.enabled).toBe(true);

    // A Connect runner: the invoker relays every pass over its socket.
    const runner = createRunner({ url: `${dep.base}/v1`, apiKey: dep.secretKey, signingKey: dep.signingKey, app: 'traced', runnerId: 'traced-1' });
    runner.workflow<{ n: number }>('relayed', { triggers: [{ event: 'trace/relayed' }] }, async ({ event, step }) => {
      const a = await step.run('a', () => event.data.n + 1);
      const b = await step.run('b', () => a * 10);
      await step.sleep('nap', 50);
      const c = await step.run('c', () => b + 1);
      return { c };
    });
    conn = runner.connect();
    await conn.ready;
    // A fresh fleet's invoker learns the workspace's signing key from the gateway's fact a moment after it
    // starts; until then its invokes wait for it, up to 5 s, and then fail and are retried. This file is about
    // each pass's spans: wait for it (the runner's keyMatch is the invoker's comparison with the key it knows).
    await eventually(
      'the invoker to know the workspace signing key',
      async () => ((await api(dep.base, 'GET', '/v1/runners', { key: dep.secretKey })).body as { id: string; keyMatch?: boolean }[]).some((r) => r.id === 'traced-1' && r.keyMatch) || undefined,
      60_000,
    );
    // A serve runner: the scheduler POSTs its passes itself on the route the invoker names.
    served = await startRunner(
      dep,
      (r) => {
        r.workflow('direct', { triggers: [{ event: 'trace/direct' }] }, async ({ step }) => step.run('only', () => 'done'));
        r.workflow('parent', { triggers: [{ event: 'trace/parent' }] }, async ({ step }) => step.runWorkflow('kid', { workflow: 'child', data: { x: 1 } }));
        r.workflow<{ x: number }>('child', async ({ event, step }) => step.run('double', () => event.data.x * 2));
        r.workflow(
          'doomed',
          { triggers: [{ event: 'trace/doomed' }], onFailure: async ({ step }) => step.run('mop', () => 'mopped') },
          async ({ step }) =>
            step.run('boom', () => {
              throw new Error('doomed');
            }),
        );
        r.workflow('gated', { triggers: [{ event: 'trace/gated' }] }, async ({ step }) => {
          const asked = await step.approval('ask', { tool: 'refund', args: { amount: 5 }, risk: 'high' });
          const timed = await step.approval('timed', { tool: 'deploy', args: { v: 1 }, risk: 'high', timeout: '1s', onTimeout: 'approve' });
          return [asked.status, timed.status];
        });
        r.workflow('hook', { triggers: [{ event: 'trace/hook' }] }, async ({ ctx }) => {
          await ctx.webhook.send('ping', { url: hookUrl, body: { hi: 1 } });
          return 'sent';
        });
        r.workflow('think', { triggers: [{ event: 'trace/think' }] }, async ({ step }) => (await step.ai.generate('ask', { model: 'claude-e2e', prompt: 'hello', maxTokens: 8 })).text);
      },
      { app: 'traced-serve' },
    );
  }, 180_000);

  afterAll(async () => {
    await conn?.close();
    await served?.close();
    await dep?.stop();
    await runnerTracing?.shutdown();
    await receiver?.close();
    await new Promise((r) => provider?.close(r));
    await new Promise((r) => hooks?.close(r));
  }, 60_000);

  const runToEnd = async (body: Record<string, unknown>, headers: Record<string, string> = {}) => {
    const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body, headers });
    expect(sent.status).toBe(202);
    const runId = sent.body.runId as string;
    await eventually(`run ${runId} to succeed`, async () => runReached((await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.publicKey })).body), 60_000);
    return runId;
  };

  /**
   * The run's trace once it is whole: the pass that succeeded it arrived,
   * every span's parent arrived (processes export on their own schedules),
   * and `ready` says what else the test needs is there.
   */
  const traceOf = (runId: string, ready: (spans: ReceivedSpan[]) => boolean) => {
    const { traceId } = runTraceIds(runId);
    return eventually(
      `the spans of run ${runId}`,
      async () => {
        await runnerTracing.flush();
        const spans = receiver.spans.filter((s) => s.traceId === traceId);
        const ids = new Set(spans.map((s) => s.spanId));
        const whole = spans.some((s) => s.name === 'run.pass' && s.attributes['dws.decision'] === 'succeed') && spans.every((s) => s.parentSpanId === '' || ids.has(s.parentSpanId));
        return whole && ready(spans) ? spans : undefined;
      },
      30_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\nreceived so far:\n${treeOf(receiver.spans.filter((s) => s.traceId === traceId))}`);
    });
  };

  /** The gateway's span of a request the client sent with CLIENT_TRACE's traceparent (one per route in this file). */
  const requestSpan = (name: string) =>
    eventually(`the gateway's span of ${name}`, async () => receiver.spans.find((s) => s.traceId === CLIENT_TRACE && s.name === name));

  it('puts one run relayed by the invoker under one trace id: ingest -> scheduler -> invoker -> runner -> apply, every pass', async () => {
    const runId = await runToEnd({ name: 'trace/relayed', data: { n: 1 } }, { traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` });
    const ids = runTraceIds(runId);
    const steps = (spans: ReceivedSpan[]) => spans.filter((s) => s.name === 'step.run').map((s) => s.attributes['dws.step.name']);
    const spans = await traceOf(runId, (s) => {
      const passes = s.filter((x) => x.name === 'run.pass').length;
      return passes >= 2 && s.filter((x) => x.name === 'workflow.pass').length === passes && s.filter((x) => x.name === 'pass.apply').length === passes;
    });
    const tree = treeOf(spans);
    if (process.env.DWS_PRINT_TRACE) process.stderr.write(`\n${mode}, run ${runId}, trace ${ids.traceId}:\n${tree}\n`);
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const parentOf = (s: ReceivedSpan) => byId.get(s.parentSpanId);

    // In the client's own trace: the gateway's span of the POST, under the client's span; ingest continued it.
    const gateway = await requestSpan('POST /v1/events');
    expect(gateway).toMatchObject({ service: svc('gateway'), kind: KIND.server, parentSpanId: CLIENT_SPAN, attributes: expect.objectContaining({ 'http.response.status_code': 202 }) });

    // The root: ingest's event.ingest, with the run's own ids, linked to the request.
    const root = spans.find((s) => s.parentSpanId === '');
    expect(root).toMatchObject({ name: 'event.ingest', service: svc('ingest'), spanId: ids.rootSpanId, kind: KIND.producer });
    expect(root!.attributes).toMatchObject({ 'dws.run.id': runId, 'dws.workflow': 'relayed', 'dws.event.name': 'trace/relayed' });
    expect(root!.links).toEqual([{ traceId: CLIENT_TRACE, spanId: gateway.spanId }]);
    expect(spans.filter((s) => s.parentSpanId === '')).toHaveLength(1);

    // Every pass: run.pass under the root; runner.invoke (client) -> invoker.invoke (server) -> workflow.pass (the runner).
    const passes = spans.filter((s) => s.name === 'run.pass');
    for (const pass of passes) {
      expect(pass).toMatchObject({ service: svc('scheduler'), parentSpanId: ids.rootSpanId, attributes: expect.objectContaining({ 'dws.run.id': runId }) });
      const children = spans.filter((s) => s.parentSpanId === pass.spanId);
      const invoke = children.find((s) => s.name === 'runner.invoke');
      expect(invoke).toMatchObject({ service: svc('scheduler'), kind: KIND.client, attributes: expect.objectContaining({ 'dws.invoke.path': 'invoker', 'dws.invoke.outcome': 'reply' }) });
      expect(children.find((s) => s.name === 'pass.apply')).toMatchObject({ service: svc('scheduler') });
      // The scheduler asks the invoker for a direct route first (none for a Connect runner) when it has none cached.
      const underInvoke = spans.filter((s) => s.parentSpanId === invoke!.spanId);
      expect(underInvoke.filter((s) => s.name !== 'invoker.invoke').map((s) => [s.name, s.service])).toEqual(
        underInvoke.length > 1 ? [['invoker.route', svc('invoker')]] : [],
      );
      const relayed = underInvoke.filter((s) => s.name === 'invoker.invoke');
      expect(relayed).toEqual([expect.objectContaining({ service: svc('invoker'), kind: KIND.server })]);
      expect(relayed[0]!.attributes).toMatchObject({ 'dws.run.id': runId, 'dws.runner.id': 'traced-1', 'dws.runner.transport': 'connect' });
      const onRunner = spans.filter((s) => s.parentSpanId === relayed[0]!.spanId);
      expect(onRunner).toEqual([expect.objectContaining({ name: 'workflow.pass', service: 'runner', kind: KIND.server })]);
      expect(onRunner[0]!.attributes).toMatchObject({ 'dws.run.id': runId, 'dws.workflow': 'relayed' });
      // The reply is applied after the runner answered, inside the pass.
      const apply = children.find((s) => s.name === 'pass.apply')!;
      expect(apply.startMs).toBeGreaterThanOrEqual(onRunner[0]!.endMs - 5);
      expect(pass.endMs).toBeGreaterThanOrEqual(apply.endMs - 1);
    }
    // Each step ran once, in a step.run span under the runner's pass span.
    expect(steps(spans).sort()).toEqual(['a', 'b', 'c']);
    for (const s of spans.filter((x) => x.name === 'step.run')) expect(parentOf(s)).toMatchObject({ name: 'workflow.pass', service: 'runner' });
    // a was stored before b started (a checkpoint, relayed by the invoker over the bus): durable before the
    // handler went past it. b and c rode their passes' replies.
    const firstPass = [...passes].sort((x, y) => x.startMs - y.startMs)[0]!;
    const stored = spans.filter((s) => s.name === 'pass.checkpoint');
    expect(stored).toEqual([
      expect.objectContaining({
        service: svc('scheduler'),
        parentSpanId: firstPass.spanId,
        attributes: expect.objectContaining({ 'dws.checkpoint.path': 'bus', 'dws.checkpoint.steps': 1, 'dws.checkpoint.stored': true }),
      }),
    ]);
    expect(spans.find((s) => s.attributes['dws.step.name'] === 'b')!.startMs).toBeGreaterThanOrEqual(stored[0]!.endMs - 2);
    // The later pass (after the sleep) joined the same trace: c ran in it.
    const lastPass = passes.sort((a, b) => a.startMs - b.startMs).at(-1)!;
    const cSpan = spans.find((s) => s.attributes['dws.step.name'] === 'c')!;
    expect(parentOf(parentOf(parentOf(parentOf(cSpan)!)!)!)).toBe(lastPass);

    // In the client's own trace: the gateway's span, and under it ingest's, linked to the run's root.
    const inClient = receiver.spans.filter((s) => s.traceId === CLIENT_TRACE).sort((a, b) => a.startMs - b.startMs);
    expect(inClient).toEqual([
      expect.objectContaining({ name: 'POST /v1/events', spanId: gateway.spanId }),
      expect.objectContaining({ name: 'event.ingest', service: svc('ingest'), parentSpanId: gateway.spanId, links: [{ traceId: ids.traceId, spanId: ids.rootSpanId }] }),
    ]);
  }, 90_000);

  it('traces a serve runner\'s pass the scheduler POSTs itself, and the invoker\'s route lookup that let it', async () => {
    const runId = await runToEnd({ name: 'trace/direct', data: {} });
    const ids = runTraceIds(runId);
    const spans = await traceOf(runId, (s) => s.some((x) => x.name === 'workflow.pass') && s.some((x) => x.name === 'pass.apply'));
    const tree = treeOf(spans);
    expect(spans.find((s) => s.parentSpanId === '')).toMatchObject({ name: 'event.ingest', service: svc('ingest'), spanId: ids.rootSpanId });
    const invoke = spans.find((s) => s.name === 'runner.invoke')!;
    expect(invoke.attributes).toMatchObject({ 'dws.invoke.path': 'direct', 'dws.invoke.outcome': 'reply' });
    expect(spans.find((s) => s.spanId === invoke.parentSpanId)).toMatchObject({ name: 'run.pass', parentSpanId: ids.rootSpanId });
    const under = spans.filter((s) => s.parentSpanId === invoke.spanId);
    // The first pass of a workflow finds no route cached: the invoker answers the lookup inside it.
    expect(under.map((s) => [s.name, s.service]).sort()).toEqual([
      ['invoker.route', svc('invoker')],
      ['workflow.pass', 'runner'],
    ]);
    expect(spans.filter((s) => s.name === 'step.run').map((s) => s.attributes['dws.step.name'])).toEqual(['only']);
    if (process.env.DWS_PRINT_TRACE) process.stderr.write(`\n${mode}, run ${runId}, trace ${ids.traceId}:\n${tree}\n`);
  }, 90_000);

  it("puts a client's run stream in the run's trace, under its root and linked to the client's request", async () => {
    const runId = await runToEnd({ name: 'trace/direct' });
    // Followed once it ended: the timeline is replayed and the stream ends by itself after the end frame.
    const streamSpanId = 'a0f067aa0ba902b7';
    const res = await fetch(`${dep.base}/v1/runs/${runId}/stream`, {
      headers: { authorization: `Bearer ${dep.publicKey}`, traceparent: `00-${CLIENT_TRACE}-${streamSpanId}-01` },
    });
    expect(res.status).toBe(200);
    const frames = (await res.text()).split('\n').filter((l) => l.startsWith('id: ')).length;
    expect(frames).toBeGreaterThanOrEqual(3);
    const spans = await traceOf(runId, (x) => x.some((y) => y.name === 'run.stream'));
    const stream = spans.find((x) => x.name === 'run.stream')!;
    expect(stream).toMatchObject({
      service: svc('gateway'),
      kind: KIND.server,
      parentSpanId: runTraceIds(runId).rootSpanId,
      links: [{ traceId: CLIENT_TRACE, spanId: streamSpanId }],
    });
    expect(stream.attributes).toMatchObject({ 'dws.run.id': runId, 'dws.stream.from': 0, 'dws.stream.ended': 'run_ended', 'dws.stream.frames': frames });
    expect(['tail', 'memory', 'read']).toContain(stream.attributes['dws.stream.began']);
  });

  it('gives a child run a trace of its own, rooted by the scheduler and linked to the parent\'s pass', async () => {
    const parentId = await runToEnd({ name: 'trace/parent', data: {} });
    const steps = await api(dep.base, 'GET', `/v1/runs/${parentId}/steps`, { key: dep.secretKey });
    const childId = (steps.body as { name: string; childRunId?: string }[]).find((s) => s.name === 'kid')?.childRunId;
    expect(childId).toMatch(/^run_/);
    const child = runTraceIds(childId!);
    const spans = await traceOf(childId!, (s) => s.some((x) => x.name === 'workflow.pass'));
    const parentPasses = await traceOf(parentId, () => true);
    const root = spans.find((s) => s.parentSpanId === '');
    expect(root).toMatchObject({ name: 'run.start', service: svc('scheduler'), spanId: child.rootSpanId, attributes: expect.objectContaining({ 'dws.parent.run.id': parentId, 'dws.trigger': 'invoke' }) });
    // The link points at the parent's pass that started it.
    const [link] = root!.links;
    expect(parentPasses.find((s) => s.spanId === link?.spanId)).toMatchObject({ name: 'run.pass', traceId: runTraceIds(parentId).traceId });
    expect(spans.filter((s) => s.name === 'run.pass').every((s) => s.parentSpanId === child.rootSpanId)).toBe(true);
    expect(spans.find((s) => s.name === 'step.run')!.attributes['dws.step.name']).toBe('double');
  }, 90_000);

  it('roots the traces of an onFailure run and of a replay at the scheduler, which creates them', async () => {
    const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'trace/doomed', data: {} } });
    const failedId = sent.body.runId as string;
    await eventually('the doomed run to fail', async () => runReached((await api(dep.base, 'GET', `/v1/runs/${failedId}`, { key: dep.secretKey })).body, 'failed'));
    const followOn = await eventually('its onFailure run to succeed', async () => {
      const runs = (await api(dep.base, 'GET', '/v1/runs?q=doomed', { key: dep.secretKey })).body as { id: string; status: string }[];
      return runs.find((r) => r.id !== failedId && r.status === 'succeeded');
    });
    const spans = await traceOf(followOn.id, (s) => s.some((x) => x.name === 'workflow.pass'));
    const root = spans.find((s) => s.parentSpanId === '');
    expect(root).toMatchObject({
      name: 'run.start',
      service: svc('scheduler'),
      spanId: runTraceIds(followOn.id).rootSpanId,
      attributes: expect.objectContaining({ 'dws.trigger': 'onFailure', 'dws.failed.run.id': failedId, 'dws.workflow': 'doomed' }),
    });
    expect(spans.filter((s) => s.name === 'run.pass').every((s) => s.parentSpanId === root!.spanId)).toBe(true);
    // Linked to the failed run's pass whose reply failed it.
    const [link] = root!.links;
    expect(link?.traceId).toBe(runTraceIds(failedId).traceId);
    const linked = await eventually('the failed run\'s pass span', async () => receiver.spans.find((s) => s.traceId === link!.traceId && s.spanId === link!.spanId));
    expect(linked).toMatchObject({ name: 'run.pass', attributes: expect.objectContaining({ 'dws.decision': 'fail' }) });

    const sourceId = await runToEnd({ name: 'trace/direct', data: {} });
    const replay = await api(dep.base, 'POST', `/v1/runs/${sourceId}/replay`, { key: dep.secretKey });
    expect(replay.status).toBe(201);
    const replayId = replay.body.id as string;
    await eventually('the replay to succeed', async () => runReached((await api(dep.base, 'GET', `/v1/runs/${replayId}`, { key: dep.secretKey })).body));
    const replaySpans = await traceOf(replayId, (s) => s.some((x) => x.name === 'workflow.pass'));
    expect(replaySpans.filter((s) => s.parentSpanId === '')).toEqual([
      expect.objectContaining({
        name: 'run.start',
        service: svc('scheduler'),
        spanId: runTraceIds(replayId).rootSpanId,
        attributes: expect.objectContaining({ 'dws.trigger': 'replay', 'dws.replay.of': sourceId, 'dws.workflow': 'direct' }),
        // Linked to the root of the run it replays.
        links: [{ traceId: runTraceIds(sourceId).traceId, spanId: runTraceIds(sourceId).rootSpanId }],
      }),
    ]);
  }, 90_000);

  it('shows in the run\'s trace what it waited on: the approval requested, a human\'s decision, a timeout', async () => {
    const sent = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'trace/gated', data: {} } });
    const runId = sent.body.runId as string;
    const listed = await eventually('the approval to be listed', async () => {
      const r = await api(dep.base, 'GET', `/v1/approvals?runId=${runId}`, { key: dep.secretKey });
      return (r.body as { id: string; status: string }[])?.find((a) => a.status === 'pending');
    });
    const decided = await api(dep.base, 'POST', `/v1/approvals/${listed.id}/decision`, {
      key: dep.secretKey,
      body: { status: 'approved' },
      headers: { traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` },
    });
    expect(decided.status).toBe(200);
    await eventually(`run ${runId} to succeed`, async () => runReached((await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.secretKey })).body), 60_000);
    const ids = runTraceIds(runId);
    const spans = await traceOf(runId, (s) => s.filter((x) => x.name === 'approval.request').length === 2 && s.some((x) => x.name === 'approval.timeout'));
    const svcName = mode === 'fleet' ? 'approvals' : 'dws';
    const of = (name: string) => spans.filter((s) => s.name === name).sort((a, b) => a.startMs - b.startMs);
    expect(of('approval.request').map((s) => [s.service, s.parentSpanId, s.attributes['dws.step.name'], s.attributes['dws.approval.status']])).toEqual([
      [svcName, ids.rootSpanId, 'ask', 'pending'],
      [svcName, ids.rootSpanId, 'timed', 'pending'],
    ]);
    // The decision's request: the gateway's span under the client's; the decision links to it.
    const gateway = await requestSpan('POST /v1/approvals/:id/decision');
    expect(gateway).toMatchObject({ service: svc('gateway'), parentSpanId: CLIENT_SPAN, attributes: expect.objectContaining({ 'http.response.status_code': 200 }) });
    expect(of('approval.decide')).toEqual([
      expect.objectContaining({
        service: svcName,
        kind: KIND.server,
        parentSpanId: ids.rootSpanId,
        links: [{ traceId: CLIENT_TRACE, spanId: gateway.spanId }],
        attributes: expect.objectContaining({ 'dws.approval.id': listed.id, 'dws.step.name': 'ask', 'dws.approval.status': 'approved', 'dws.approval.via': 'api' }),
      }),
    ]);
    expect(of('approval.timeout')).toEqual([
      expect.objectContaining({ service: svcName, parentSpanId: ids.rootSpanId, attributes: expect.objectContaining({ 'dws.step.name': 'timed', 'dws.approval.status': 'approved' }) }),
    ]);
  }, 90_000);

  it('puts each webhook delivery attempt in the run\'s trace, and hands the receiver its context', async () => {
    const runId = await runToEnd({ name: 'trace/hook', data: {} });
    const ids = runTraceIds(runId);
    const spans = await traceOf(runId, (s) => s.some((x) => x.name === 'webhook.deliver'));
    const deliver = spans.find((s) => s.name === 'webhook.deliver')!;
    expect(deliver).toMatchObject({
      service: mode === 'fleet' ? 'webhook-dispatcher' : 'dws',
      kind: KIND.client,
      parentSpanId: ids.rootSpanId,
      attributes: expect.objectContaining({ 'dws.run.id': runId, 'dws.webhook.attempt': 1, 'dws.webhook.outcome': 'succeeded', 'http.response.status_code': 204 }),
    });
    expect(hookParents).toContain(`00-${ids.traceId}-${deliver.spanId}-01`);
  }, 90_000);

  it('puts the invoker\'s model call of an Infer step in the run\'s trace', async () => {
    const runId = await runToEnd({ name: 'trace/think', data: {} });
    const ids = runTraceIds(runId);
    const spans = await traceOf(runId, (s) => s.some((x) => x.name === 'step.infer'));
    expect(spans.find((s) => s.name === 'step.infer')).toMatchObject({
      service: svc('invoker'),
      kind: KIND.client,
      parentSpanId: ids.rootSpanId,
      attributes: expect.objectContaining({ 'dws.run.id': runId, 'dws.step.name': 'ask', 'dws.infer.model': 'claude-e2e', 'dws.infer.tokens_in': 4, 'dws.infer.tokens_out': 3 }),
    });
  }, 90_000);
});
