import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import WebSocket from 'ws';
import type { Bus } from '@dws/bus';
import { createHttpApp, errorMiddleware, listen, notFoundHandler, type HttpListener } from '@dws/http';
import { createLogger } from '@dws/log';
import { create, fromBinary, InvokeRequestSchema, InvokeResult_Outcome, InvokeResultSchema, toBinary } from '@dws/proto';
import { hashStepId } from '@dws/protocol';
import { modes, ScriptedInvoker, startHarness, type Harness } from './harness.js';

jest.setTimeout(60_000);

const enc = new TextEncoder();
const dec = new TextDecoder();

type Pass = (body: any) => Promise<{ status: number; body: any }>;

const stepRun = (name: string, data: unknown) => ({ op: 'StepRun', id: hashStepId(name), name, data });

async function post(url: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

/** A runner's checkpoint socket: frames out, answers matched by id. */
async function openSocket(url: string) {
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const answers: any[] = [];
  const waiting = new Map<unknown, (a: any) => void>();
  ws.on('message', (d) => {
    const a = JSON.parse(d.toString());
    answers.push(a);
    waiting.get(a.id)?.(a);
  });
  let next = 1;
  return {
    ws,
    answers,
    send(frame: Record<string, unknown> | string, id = next++): Promise<any> {
      return new Promise((resolve) => {
        waiting.set(typeof frame === 'string' ? null : id, resolve);
        ws.send(typeof frame === 'string' ? frame : JSON.stringify({ id, ...frame }));
      });
    },
  };
}

/**
 * Direct checkpoints: with SERVICE_SCHEDULER_URL set, each invoke offers
 * `ctx.checkpointUrl` on the replica driving the pass, and that replica
 * stores checkpoints POSTed there with no gateway, API key or bus on the way:
 * the token's MAC (bound to the run and the pass) is the credential.
 */
describe.each(modes())('direct checkpoints to the scheduler replica (%s)', (mode) => {
  let h: Harness;
  let http: HttpListener;
  let pass: Pass;
  const bodies: any[] = [];
  beforeAll(async () => {
    const app = createHttpApp();
    http = await listen(app, '127.0.0.1', 0);
    const invoker = new ScriptedInvoker({});
    invoker.serve = (bus: Bus) =>
      bus.respond('invoker.invoke', 'invoker', async (data) => {
        const body = JSON.parse(dec.decode(fromBinary(InvokeRequestSchema, data).body));
        bodies.push(body);
        const reply = await pass(body);
        return toBinary(InvokeResultSchema, create(InvokeResultSchema, { outcome: InvokeResult_Outcome.REPLY, status: reply.status, body: enc.encode(JSON.stringify(reply.body)) }));
      });
    h = await startHarness(mode, invoker, { SERVICE_SCHEDULER_URL: `http://127.0.0.1:${http.port}/` });
    // As runStandalone mounts them on the replica's own port.
    h.scheduler.routes!(app);
    http.server.on('upgrade', h.scheduler.upgrade!);
    app.use(notFoundHandler);
    app.use(errorMiddleware(createLogger({ level: 'silent' })));
  });
  afterAll(async () => {
    await h?.close();
    await http?.close();
  });

  const passesOf = (runId: string) => bodies.filter((b) => b.ctx.runId === runId);

  it('stores each step POSTed to ctx.checkpointUrl at once; the whole run takes one pass', async () => {
    const seen: number[] = [];
    pass = async (body) => {
      expect(body.ctx.checkpointUrl).toBe(`http://127.0.0.1:${http.port}/checkpoints/${body.ctx.runId}`);
      for (let i = 0; i < 3; i++) {
        const r = await post(body.ctx.checkpointUrl, { token: body.ctx.checkpoint, opcodes: [stepRun(`s${i}`, { i })], logs: [] });
        expect(r).toEqual({ status: 200, body: { stored: true } });
        seen.push((await h.call('runs.steps', { params: { id: body.ctx.runId } })).body.length);
      }
      return { status: 200, body: { data: 'done', logs: [] } };
    };
    const id = await h.start('direct');
    await h.waitFor(id, ['succeeded']);
    expect(passesOf(id)).toHaveLength(1);
    expect(seen).toEqual([1, 2, 3]);
    const steps = (await h.call('runs.steps', { params: { id } })).body;
    expect(steps.map((s: any) => [s.name, s.output])).toEqual([0, 1, 2].map((i) => [`s${i}`, { i }]));
  });

  it('refuses a token of another run, a forged MAC, another replica and a pass that is over, storing nothing', async () => {
    const answers: Record<string, { status: number; body: any }> = {};
    let first: any;
    pass = async (body) => {
      if (!first) {
        // The first run's pass: tried by the second run's checkpoints below once it is over.
        first = body;
        return { status: 200, body: { data: 1, logs: [] } };
      }
      const ops = { opcodes: [stepRun('x', 1)], logs: [] };
      const [replica, n, mac] = (body.ctx.checkpoint as string).split('.');
      const forged = `${replica}.${n}.${mac!.startsWith('A') ? 'B' : 'A'}${mac!.slice(1)}`;
      answers.otherRun = await post(body.ctx.checkpointUrl, { token: first.ctx.checkpoint, ...ops });
      answers.forged = await post(body.ctx.checkpointUrl, { token: forged, ...ops });
      answers.otherReplica = await post(body.ctx.checkpointUrl, { token: `scheduler-elsewhere.${n}.${mac}`, ...ops });
      answers.noToken = await post(body.ctx.checkpointUrl, ops);
      answers.notJson = await post(body.ctx.checkpointUrl, '{"token":');
      answers.passOver = await post(first.ctx.checkpointUrl, { token: first.ctx.checkpoint, ...ops });
      return { status: 200, body: { data: 2, logs: [] } };
    };
    const a = await h.start('direct');
    await h.waitFor(a, ['succeeded']);
    const b = await h.start('direct');
    await h.waitFor(b, ['succeeded']);
    expect(answers.otherRun).toMatchObject({ status: 400, body: { error: { code: 'invalid_checkpoint' } } });
    expect(answers.forged).toMatchObject({ status: 400, body: { error: { code: 'invalid_checkpoint' } } });
    expect(answers.otherReplica).toMatchObject({ status: 409, body: { error: { code: 'pass_not_current' } } });
    expect(answers.noToken).toMatchObject({ status: 400, body: { error: { code: 'invalid_checkpoint' } } });
    expect(answers.notJson).toMatchObject({ status: 400, body: { error: { code: 'invalid_json' } } });
    expect(answers.passOver).toMatchObject({ status: 409, body: { error: { code: 'pass_not_current' } } });
    for (const id of [a, b]) expect((await h.call('runs.steps', { params: { id } })).body).toEqual([]);
  });

  it('stores each step sent as a frame on ctx.checkpointSocket, answering by id; the whole run takes one pass', async () => {
    let socket: Awaited<ReturnType<typeof openSocket>> | undefined;
    const seen: number[] = [];
    pass = async (body) => {
      expect(body.ctx.checkpointSocket).toBe(`ws://127.0.0.1:${http.port}/checkpoints`);
      socket ??= await openSocket(body.ctx.checkpointSocket);
      for (let i = 0; i < 3; i++) {
        const a = await socket.send({ runId: body.ctx.runId, token: body.ctx.checkpoint, opcodes: [stepRun(`s${i}`, { i })], logs: [] }, 10 + i);
        expect(a).toEqual({ id: 10 + i, status: 200 });
        seen.push((await h.call('runs.steps', { params: { id: body.ctx.runId } })).body.length);
      }
      return { status: 200, body: { data: 'done', logs: [] } };
    };
    const id = await h.start('direct');
    await h.waitFor(id, ['succeeded']);
    expect(passesOf(id)).toHaveLength(1);
    expect(seen).toEqual([1, 2, 3]);
    const steps = (await h.call('runs.steps', { params: { id } })).body;
    expect(steps.map((s: any) => [s.name, s.output])).toEqual([0, 1, 2].map((i) => [`s${i}`, { i }]));
    socket!.ws.close();
  });

  it('answers a refused or unreadable frame on the socket with the route\'s error and keeps the socket open, storing nothing', async () => {
    const answers: Record<string, any> = {};
    let first: any;
    pass = async (body) => {
      if (!first) {
        first = body;
        return { status: 200, body: { data: 1, logs: [] } };
      }
      const socket = await openSocket(body.ctx.checkpointSocket);
      const ops = { opcodes: [stepRun('x', 1)], logs: [] };
      const [, n, mac] = (body.ctx.checkpoint as string).split('.');
      answers.otherRun = await socket.send({ runId: body.ctx.runId, token: first.ctx.checkpoint, ...ops });
      answers.otherReplica = await socket.send({ runId: body.ctx.runId, token: `scheduler-elsewhere.${n}.${mac}`, ...ops });
      answers.noRunId = await socket.send({ token: 'x' }, 7);
      answers.notJson = await socket.send('{"id":');
      answers.passOver = await socket.send({ runId: first.ctx.runId, token: first.ctx.checkpoint, ...ops });
      answers.open = socket.ws.readyState === WebSocket.OPEN;
      socket.ws.close();
      return { status: 200, body: { data: 2, logs: [] } };
    };
    const a = await h.start('direct');
    await h.waitFor(a, ['succeeded']);
    const b = await h.start('direct');
    await h.waitFor(b, ['succeeded']);
    expect(answers.otherRun).toMatchObject({ status: 400, error: { code: 'invalid_checkpoint' } });
    expect(answers.otherReplica).toMatchObject({ status: 409, error: { code: 'pass_not_current' } });
    expect(answers.noRunId).toMatchObject({ id: 7, status: 400, error: { code: 'invalid_checkpoint' } });
    expect(answers.notJson).toMatchObject({ id: null, status: 400, error: { code: 'invalid_checkpoint' } });
    expect(answers.passOver).toMatchObject({ status: 409, error: { code: 'pass_not_current' } });
    expect(answers.open).toBe(true);
    for (const id of [a, b]) expect((await h.call('runs.steps', { params: { id } })).body).toEqual([]);
  });

  it('refuses a WebSocket upgrade on any other path with the error body', async () => {
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${http.port}/elsewhere`);
      ws.on('unexpected-response', (_req, r) => {
        let body = '';
        r.on('data', (c) => (body += c));
        r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
      });
      ws.on('error', reject);
    });
    expect(res.status).toBe(404);
    expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'route_not_found' } });
  });

  it("a checkpoint that reached another replica (replicas behind one address) is relayed to the one driving the pass and stored", async () => {
    // A second replica on its own port: each pass's steps go to both ports, one of them not the pass's replica.
    const other = await h.replica();
    const app2 = createHttpApp();
    const http2 = await listen(app2, '127.0.0.1', 0);
    other.handle.routes!(app2);
    http2.server.on('upgrade', other.handle.upgrade!);
    app2.use(notFoundHandler);
    app2.use(errorMiddleware(createLogger({ level: 'silent' })));
    try {
      const answers: { status: number; body: any }[] = [];
      pass = async (body) => {
        for (const [i, port] of [http.port, http2.port, http.port, http2.port].entries()) {
          answers.push(await post(`http://127.0.0.1:${port}/checkpoints/${body.ctx.runId}`, { token: body.ctx.checkpoint, opcodes: [stepRun(`s${i}`, { i })], logs: [] }));
        }
        // And on the other port's socket.
        const socket = await openSocket(`ws://127.0.0.1:${http2.port}/checkpoints`);
        const viaSocket = await socket.send({ runId: body.ctx.runId, token: body.ctx.checkpoint, opcodes: [stepRun('s4', { i: 4 })], logs: [] });
        socket.ws.close();
        const viaFirst = await openSocket(`ws://127.0.0.1:${http.port}/checkpoints`);
        const viaSocket2 = await viaFirst.send({ runId: body.ctx.runId, token: body.ctx.checkpoint, opcodes: [stepRun('s5', { i: 5 })], logs: [] });
        viaFirst.ws.close();
        answers.push({ status: viaSocket.status, body: viaSocket }, { status: viaSocket2.status, body: viaSocket2 });
        return { status: 200, body: { data: 'done', logs: [] } };
      };
      const id = await h.start('direct');
      await h.waitFor(id, ['succeeded']);
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
      expect(passesOf(id)).toHaveLength(1);
      const steps = (await h.call('runs.steps', { params: { id } })).body;
      expect(steps.map((s: any) => s.output)).toEqual([0, 1, 2, 3, 4, 5].map((i) => ({ i })));
    } finally {
      await other.handle.stop();
      await http2.close();
    }
  });
});
