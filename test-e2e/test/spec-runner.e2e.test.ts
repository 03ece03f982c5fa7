import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket from 'ws';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';

/**
 * A runner written from SPEC.md alone, with node:http and node:crypto and no
 * SDK: what someone porting the runner protocol to another language builds
 * (README "Runners in other languages"), over HTTP (serve) and over a
 * WebSocket it dials (Connect). It checks the invoke signature and
 * the protocol version, replays the memo (step ids hashed, a reused id
 * suffixed), reports one new step per pass as a 206 and the result as a
 * 200, both wrapped with their logs. Against it the service must drive runs
 * to the end: stored steps never re-run, a retriable failure retried, a
 * sleep slept, and an opcode it does not know failing the step instead of
 * re-invoking forever.
 */
const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];

interface MemoEntry {
  data?: unknown;
  error?: { message: string };
  pending?: boolean;
}
interface Invoke {
  event: { name: string; data: { x: number } };
  steps: Record<string, MemoEntry>;
  ctx: { runId: string; workflow: string; attempt: number; app: string };
}
type Opcode = Record<string, unknown> & { op: string; id: string; name: string };

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

/** The reply that ends this pass, thrown from wherever the handler found a step not in the memo. */
class Reply {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {}
}

/** One pass of a workflow: steps come from the memo when there, else the pass ends reporting the new one. */
class Pass {
  private readonly uses = new Map<string, number>();
  constructor(
    private readonly memo: Record<string, MemoEntry>,
    private readonly executions: Map<string, number>,
  ) {}

  /**
   * The step named `name`: its stored result when the memo has it, else the pass ends with the
   * opcode `discover` makes for it. SPEC "Step id hashing": the first use of a name is `x`, then
   * `x:1`, `x:2`; the memo key is the SHA-256 hex of that id.
   */
  private step(name: string, discover: (id: string, hash: string) => Opcode): unknown {
    const n = this.uses.get(name) ?? 0;
    this.uses.set(name, n + 1);
    const id = n === 0 ? name : `${name}:${n}`;
    const hash = sha256(id);
    const entry = this.memo[hash];
    if (!entry) throw new Reply(206, { opcodes: [discover(id, hash)], logs: [] });
    if (entry.pending) throw new Reply(206, { opcodes: [], logs: [] });
    // A failed step the handler does not catch fails the run: a 4xx, the step's error in the body.
    if (entry.error) throw new Reply(400, { error: entry.error, logs: [] });
    return entry.data;
  }

  run<T>(name: string, fn: (attempt: number) => T): T {
    return this.step(name, (id, hash) => {
      const attempt = (this.executions.get(id) ?? 0) + 1;
      this.executions.set(id, attempt);
      try {
        return { op: 'StepRun', id: hash, name: id, data: fn(attempt) };
      } catch (err) {
        return { op: 'StepRun', id: hash, name: id, error: { message: (err as Error).message }, retryAfterMs: 10 };
      }
    }) as T;
  }

  sleep(name: string, ms: number): void {
    this.step(name, (id, hash) => ({ op: 'Sleep', id: hash, name: id, sleepMs: ms }));
  }

  /** An opcode from a protocol newer than the service's. */
  teleport(name: string): void {
    this.step(name, (id, hash) => ({ op: 'Teleport', id: hash, name: id }));
  }
}

const workflows: Record<string, (p: Pass, x: number) => unknown> = {
  'spec.raw': (p, x) => {
    const a = p.run('add', () => x + 1);
    // The same step id again: stored under `add:1`. Its work takes 150 ms (this runner is synchronous).
    const b = p.run('add', () => (Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 150), a * 10));
    p.sleep('nap', 20);
    const c = p.run('flaky', (attempt) => {
      if (attempt === 1) throw new Error('first attempt fails');
      return `ok after ${attempt}`;
    });
    return { a, b, c };
  },
  'spec.future': (p) => {
    p.teleport('beam');
    return 'never';
  },
};

/** What one runner saw, whichever transport brought its invokes. */
interface Seen {
  /** Step executions by step id (`add`, `add:1`, ...). */
  executions: Map<string, number>;
  invokes: Invoke[];
  /** Invokes refused: a signature that did not verify, or another protocol version. */
  refused: string[];
}

interface SpecRunner extends Seen {
  close(): Promise<void>;
}

/**
 * One invoke, from its signature, its protocol version and its exact bytes
 * to the status and wrapped body of the reply: the same over HTTP and Connect.
 */
function answerer(signingKey: string, seen: Seen) {
  // SPEC Authentication 7: `t=<unix seconds>&s=<hex HMAC-SHA256 of "<t>.<raw body>">`, t within 5 minutes.
  const verified = (header: string | undefined, raw: Buffer): boolean => {
    const parts = new URLSearchParams(header ?? '');
    const t = parts.get('t') ?? '';
    const s = Buffer.from(parts.get('s') ?? '', 'hex');
    if (!/^\d+$/.test(t) || Math.abs(Date.now() / 1000 - Number(t)) > 300) return false;
    const want = createHmac('sha256', signingKey).update(`${t}.`).update(raw).digest();
    return s.length === want.length && timingSafeEqual(s, want);
  };
  return (signature: string | undefined, version: string | undefined, raw: Buffer): { status: number; body: unknown } => {
    if (!verified(signature, raw)) {
      seen.refused.push('signature');
      return { status: 401, body: { data: null, logs: [] } };
    }
    if (version !== undefined && version !== '1') {
      seen.refused.push(`protocol ${version}`);
      return { status: 400, body: { data: null, logs: [] } };
    }
    const invoke = JSON.parse(raw.toString('utf8')) as Invoke;
    seen.invokes.push(invoke);
    const workflow = workflows[invoke.ctx.workflow];
    if (!workflow) return { status: 404, body: { data: null, logs: [] } };
    try {
      return { status: 200, body: { data: workflow(new Pass(invoke.steps, seen.executions), invoke.event.data.x), logs: [] } };
    } catch (end) {
      if (end instanceof Reply) return { status: end.status, body: end.body };
      return { status: 500, body: { error: { message: (end as Error).message }, logs: [] } };
    }
  };
}

const newSeen = (): Seen => ({ executions: new Map(), invokes: [], refused: [] });

/** Serve: the service POSTs each invoke to the runner's URL, registered with POST /v1/register. */
async function serveRunner(dep: Deployment, app: string, registered: unknown[]): Promise<SpecRunner> {
  const seen = newSeen();
  const answer = answerer(dep.signingKey, seen);
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const version = req.headers['x-service-protocol'];
      const reply = answer(
        req.headers['x-service-signature'] as string | undefined,
        typeof version === 'string' ? version : undefined,
        Buffer.concat(chunks),
      );
      res.writeHead(reply.status, { 'content-type': 'application/json' }).end(JSON.stringify(reply.body));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/invoke`;
  const reg = await api(dep.base, 'POST', '/v1/register', {
    key: dep.secretKey,
    body: { app, url, runtime: 'node', language: 'javascript', protocolVersion: 1, workflows: registered },
  });
  expect(reg.status).toBeLessThan(300);
  return { ...seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/**
 * Connect: the runner dials the service (no inbound address) and gets each
 * invoke as a frame `{ type, id, payload }` (SPEC Transports; the payloads are
 * libs/protocol/src/connect.ts): hello both ways, runner.register answered
 * with the same frame id, then `invoke` { body, signature, protocolVersion }
 * answered by `invoke.result` { status, body } with the invoke's id. The
 * service's pings are answered by the WebSocket library.
 */
async function connectRunner(dep: Deployment, app: string, registered: unknown[]): Promise<SpecRunner> {
  const seen = newSeen();
  const answer = answerer(dep.signingKey, seen);
  const url = new URL('/v1/connect', dep.base.replace(/^http/, 'ws')).href;
  const ws = new WebSocket(url, 'service.connect.v0', { headers: { authorization: `Bearer ${dep.secretKey}` } });
  const frames: { type: string; id: string; payload: Record<string, unknown> }[] = [];
  ws.on('message', (data: Buffer) => {
    const f = JSON.parse(data.toString('utf8')) as { type: string; id: string; payload: Record<string, unknown> };
    if (f.type === 'invoke') {
      const p = f.payload as { body: string; signature: string; protocolVersion: number };
      const reply = answer(p.signature, String(p.protocolVersion), Buffer.from(p.body, 'utf8'));
      ws.send(JSON.stringify({ type: 'invoke.result', id: f.id, payload: { status: reply.status, body: JSON.stringify(reply.body) } }));
      return;
    }
    frames.push(f);
  });
  const frame = (type: string) =>
    eventually(`a ${type} frame`, async () => {
      const f = frames.find((x) => x.type === type || x.type === 'error');
      if (f?.type === 'error') throw new Error(JSON.stringify(f.payload));
      return f;
    });
  await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject));
  ws.send(JSON.stringify({ type: 'hello', id: 'h1', payload: { protocolVersion: 1, runtime: 'node' } }));
  expect((await frame('hello')).payload.protocolVersion).toBe(1);
  ws.send(
    JSON.stringify({
      type: 'runner.register',
      id: 'r1',
      payload: { app, runner: `${app}-1`, runtime: 'node', protocolVersion: 1, workflows: registered },
    }),
  );
  const done = await frame('runner.register');
  expect(done.id).toBe('r1');
  return {
    ...seen,
    close: async () => {
      ws.close();
      await new Promise<void>((r) => (ws.readyState === WebSocket.CLOSED ? r() : ws.once('close', () => r())));
    },
  };
}

const cases = modes.flatMap((mode) => (['serve', 'connect'] as const).map((transport) => [mode, transport] as const));

describe.each(cases)('a runner written from SPEC.md alone, on %s, over %s', (mode, transport) => {
  let dep: Deployment;
  let runner: SpecRunner;
  beforeAll(async () => {
    dep = await startDeployment(mode);
    const registered = [{ name: 'spec.raw', retry: { maxAttempts: 3 } }, { name: 'spec.future' }];
    runner = await (transport === 'serve' ? serveRunner : connectRunner)(dep, `spec-${transport}`, registered);
  }, 120_000);
  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
  });
  const start = async (name: string): Promise<string> => {
    const res = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name, data: { x: 4 } } });
    expect(res.status).toBe(202);
    return res.body.runId as string;
  };

  it('is driven to the end, one new step per pass, each stored step run once', async () => {
    const runId = await start('spec.raw');
    const run = await eventually('the run succeeded', async () =>
      runReached((await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.secretKey })).body, ['succeeded']),
    );
    expect(run.result).toEqual({ a: 5, b: 50, c: 'ok after 2' });
    expect(runner.refused).toEqual([]);
    // add, add:1, nap, flaky (failed), flaky (retried), and the pass that returned.
    const passes = runner.invokes.filter((i) => i.ctx.runId === runId);
    expect(passes).toHaveLength(6);
    expect(Object.fromEntries(runner.executions)).toEqual({ add: 1, 'add:1': 1, flaky: 2 });
    // The last pass's memo: every step under the SHA-256 of its id; no retried error kept in it.
    const memo = passes.at(-1)!.steps;
    expect(Object.keys(memo).sort()).toEqual(['add', 'add:1', 'nap', 'flaky'].map(sha256).sort());
    expect(memo[sha256('add')]).toEqual({ data: 5 });
    expect(memo[sha256('add:1')]).toEqual({ data: 50 });
    expect(memo[sha256('flaky')]).toEqual({ data: 'ok after 2' });
    expect(memo[sha256('nap')]!.pending).not.toBe(true);
    expect(passes.every((p) => p.ctx.workflow === 'spec.raw' && p.ctx.app === `spec-${transport}` && p.event.data.x === 4)).toBe(true);
    // It sends no startedAtMs: a step is timed from the start of the pass that ran it.
    const steps: { name: string; startedAt: string; endedAt: string }[] = (await api(dep.base, 'GET', `/v1/runs/${runId}/steps`, { key: dep.secretKey })).body;
    const slow = steps.find((st) => st.name === 'add:1')!;
    expect(Date.parse(slow.endedAt) - Date.parse(slow.startedAt)).toBeGreaterThanOrEqual(140);
  });

  it('fails the step of an opcode the service does not know instead of re-invoking forever', async () => {
    const runId = await start('spec.future');
    const run = await eventually('the run failed', async () =>
      runReached((await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.secretKey })).body, ['failed']),
    );
    expect(JSON.stringify(run.error)).toMatch(/Teleport/);
    await new Promise((r) => setTimeout(r, 200));
    // The pass that sent it, and the one that found the step failed in its memo and gave up (a 400).
    const passes = runner.invokes.filter((i) => i.ctx.runId === runId);
    expect(passes).toHaveLength(2);
    expect(passes[1]!.steps[sha256('beam')]!.error?.message).toMatch(/Teleport/);
  });
});
