import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { connectJetStreamBus, createEmbeddedBus, deleteNamespace, prefixedBus, type Bus } from '@dws/bus';
import { loadConfig, type Config } from '@dws/config';
import { openDatabase, type Database } from '@dws/db';
import { createLogger } from '@dws/log';
import {
  create,
  fromBinary,
  InvokeRequestSchema,
  InvokeResult_Outcome,
  InvokeResultSchema,
  toBinary,
  WorkspaceUpsertedSchema,
} from '@dws/proto';
import { HOP_HEADER, hopKey, signHop, type InvokeRequestBody } from '@dws/protocol';
import { callApi, sealKeyFor, streams, subjects, type Infra } from '@dws/runtime';
import { createRunner, type Runner, type RunnerOptions } from '@dws/sdk';
import { openTestDb, testInfra, uniqueName } from '@dws/testing';
import { startInvoker, type InvokerHandle, type InvokerOptions } from '../src/main.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

export type Mode = 'real' | 'embedded';

export const modes = (): Mode[] => {
  if (testInfra()) return ['real', 'embedded'];
  console.warn('\n!!! Postgres/NATS missing: invoker tests run on the embedded adapters only !!!\n');
  return ['embedded'];
};

export interface InvokeOutcome {
  outcome: 'reply' | 'no_runner' | 'transport_error';
  status: number;
  body: any;
  raw: string;
  error: string;
  runnerId: string;
}

export interface Workspace {
  id: string;
  signingKey: string;
  caller: { workspaceId: string; actor: string; keyKind: string; requestId: string };
}

export interface TestRunner {
  runner: Runner;
  url: string;
  /** Invokes this runner answered, by run id. */
  seen: string[];
  /** Stops answering: the port refuses connections. */
  close(): Promise<void>;
}

export interface Harness {
  cfg: Config;
  db: Database;
  bus: Bus;
  invoker: InvokerHandle;
  /** A workspace the gateway announced (WorkspaceUpserted) and the invoker stored; `announce` false: not announced yet. */
  workspace(signingKey?: string, announce?: boolean): Promise<Workspace>;
  /** Publish the workspace's WorkspaceUpserted as the gateway does, and wait until the invoker stored it. */
  announce(ws: Workspace): Promise<void>;
  call(ws: Workspace, op: string, payload?: { query?: Record<string, unknown>; body?: unknown }): Promise<{ status: number; body: any }>;
  invoke(ws: Workspace, req: { app: string; workflow: string; runner?: string; runId?: string; steps?: InvokeRequestBody['steps']; data?: unknown }): Promise<InvokeOutcome>;
  /** A serve runner on a real HTTP port, registered through the invoker's API. */
  serveRunner(ws: Workspace, define: (r: Runner) => void, opts?: Partial<RunnerOptions>): Promise<TestRunner>;
  /** Plays the gateway for GET /v1/connect: adds the hop header and hands the upgrade to `target`. */
  gateway(ws: Workspace, target?: InvokerHandle): Promise<{ url: string; close(): Promise<void> }>;
  /** Another invoker replica on the same database and bus namespace. */
  replica(opts?: InvokerOptions): Promise<InvokerHandle>;
  close(): Promise<void>;
}

/** An invoker on real Postgres + NATS (`real`) or PGlite + the embedded bus, with its own database and bus namespace. */
export async function startHarness(mode: Mode, opts: InvokerOptions = {}, env: Record<string, string> = {}): Promise<Harness> {
  const cfg = loadConfig({ LOG_LEVEL: 'silent', SERVICE_INVOKE_TIMEOUT_MS: '10000', ...env });
  const log = createLogger({ level: 'silent' });
  const cleanups: (() => Promise<void>)[] = [];
  const prefix = uniqueName('inv').replace(/[^A-Za-z0-9_-]/g, '');
  let db: Database;
  let dbUrl: string | undefined;
  let embeddedBus: Bus | undefined;
  if (mode === 'real') {
    const infra = testInfra();
    if (!infra) throw new Error('real Postgres and NATS are required');
    const t = await openTestDb('invoker');
    db = t.db;
    dbUrl = t.url;
    cleanups.push(t.close);
  } else {
    db = await openDatabase({});
    embeddedBus = await createEmbeddedBus();
    cleanups.push(() => db.close());
  }
  const openBus = async (): Promise<Bus> =>
    mode === 'real' ? prefixedBus(await connectJetStreamBus({ servers: testInfra()!.natsUrl }), prefix) : embeddedBus!;
  const bus = await openBus();
  // Play ingest and the scheduler for the registration's read-your-writes confirmation
  // (their own tests apply the fact; here only the invoker is under test).
  const projections = [subjects.applyWorkflowsIngest, subjects.applyWorkflowsScheduler].map((s) => bus.respond(s, s, async () => new Uint8Array()));
  cleanups.push(async () => void (await Promise.all(projections.map((p) => p.stop()))));
  const mkInfra = (d: Database, b: Bus): Infra => ({ db: d, bus: b, log, mode: { db: d.kind, bus: b.kind }, close: async () => {} });
  const invoker = await startInvoker(cfg, mkInfra(db, bus), { connectHeartbeatMs: 200, ...opts });
  const extra: { handle: InvokerHandle; db: Database; bus: Bus }[] = [];
  const closers: (() => Promise<void>)[] = [];
  const key = hopKey(sealKeyFor(cfg));

  const h: Harness = {
    cfg,
    db,
    bus,
    invoker,
    async workspace(signingKey = `sk_sign_${uniqueName('k')}`, announce = true) {
      const id = uniqueName('ws');
      const ws = { id, signingKey, caller: { workspaceId: id, actor: 'tester', keyKind: 'secret', requestId: '' } };
      if (announce) await h.announce(ws);
      return ws;
    },
    async announce(ws) {
      await bus.ensureStream(streams.gatewayFacts);
      const fact = create(WorkspaceUpsertedSchema, { workspaceId: ws.id, name: ws.id, signingKey: ws.signingKey, suspended: false });
      await bus.publish(subjects.workspaceUpserted, toBinary(WorkspaceUpsertedSchema, fact), { msgId: `ws-${ws.id}` });
      const deadline = Date.now() + 10_000;
      while ((await db.query('select 1 from invoker.workspaces where id = $1', [ws.id])).length === 0) {
        if (Date.now() > deadline) throw new Error('the invoker never stored the workspace');
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async call(ws, op, payload = {}) {
      const res = await callApi(bus, 'invoker', op, ws.caller, {
        query: payload.query,
        rawBody: payload.body === undefined ? undefined : JSON.stringify(payload.body),
      });
      return { status: res.status, body: res.bodyJson ? JSON.parse(res.bodyJson) : undefined };
    },
    async invoke(ws, r) {
      const runId = r.runId ?? uniqueName('run');
      const body: InvokeRequestBody = {
        event: { name: r.workflow, data: r.data ?? {} },
        steps: r.steps ?? {},
        ctx: { runId, workflow: r.workflow, attempt: 0, app: r.app, runner: r.runner ?? '' },
      };
      const req = create(InvokeRequestSchema, {
        workspaceId: ws.id,
        runId,
        app: r.app,
        runner: r.runner ?? '',
        workflow: r.workflow,
        pass: 1n,
        body: enc.encode(JSON.stringify(body)),
      });
      const res = fromBinary(InvokeResultSchema, await bus.request(subjects.invoke, toBinary(InvokeRequestSchema, req), { timeoutMs: 20_000 }));
      const raw = dec.decode(res.body);
      let parsed: unknown;
      try {
        parsed = raw ? JSON.parse(raw) : undefined;
      } catch {
        parsed = raw;
      }
      const outcome = res.outcome === InvokeResult_Outcome.REPLY ? 'reply' : res.outcome === InvokeResult_Outcome.NO_RUNNER ? 'no_runner' : 'transport_error';
      return { outcome, status: res.status, body: parsed, raw, error: res.error, runnerId: res.runnerId };
    },
    async serveRunner(ws, define, ropts = {}) {
      const seen: string[] = [];
      let handler: ((req: IncomingMessage, res: ServerResponse) => Promise<void>) | undefined;
      const server: Server = createServer((req, res) => void handler!(req, res));
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/invoke`;
      const runner = createRunner({ apiKey: 'sk_unused', env: {}, signingKey: ws.signingKey, publicUrl: url, app: 'app', ...ropts });
      define(runner);
      const serve = runner.serve();
      handler = async (req, res) => {
        // Remember which run reached this runner (the body names it) before handing the raw bytes to serve().
        const chunks: Buffer[] = [];
        for await (const c of req) chunks.push(c as Buffer);
        const raw = Buffer.concat(chunks);
        seen.push((JSON.parse(raw.toString()) as InvokeRequestBody).ctx.runId);
        (req as IncomingMessage & { body?: unknown }).body = raw;
        await serve(req, res);
      };
      const reg = await h.call(ws, 'register', { body: runner.registerBody() });
      if (reg.status !== 200) throw new Error(`register failed: ${JSON.stringify(reg)}`);
      const close = async () => {
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
      };
      closers.push(close);
      return { runner, url, seen, close };
    },
    async gateway(ws, target = invoker) {
      const server = createServer((_req, res) => res.writeHead(404).end());
      server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
        req.headers[HOP_HEADER] = signHop(key, { workspaceId: ws.id, actor: 'tester' });
        target.upgrade(req, socket, head);
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const close = async () => {
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
      };
      closers.push(close);
      return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, close };
    },
    async replica(ropts = {}) {
      const d = mode === 'real' ? await openDatabase({ url: dbUrl! }) : db;
      const b = await openBus();
      const handle = await startInvoker(cfg, mkInfra(d, b), { connectHeartbeatMs: 200, ...ropts });
      extra.push({ handle, db: d, bus: b });
      return handle;
    },
    async close() {
      for (const c of closers) await c().catch(() => undefined);
      for (const r of extra) {
        await r.handle.stop().catch(() => undefined);
        if (r.bus !== bus) await r.bus.close().catch(() => undefined);
        if (r.db !== db) await r.db.close().catch(() => undefined);
      }
      await invoker.stop().catch(() => undefined);
      await bus.close();
      for (const c of cleanups) await c();
      if (mode === 'real') await deleteNamespace(testInfra()!.natsUrl, prefix);
    },
  };
  return h;
}

/** Polls until `check` returns a value. */
export async function until<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
