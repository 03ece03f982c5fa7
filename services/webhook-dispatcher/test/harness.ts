import http from 'node:http';
import { connectJetStreamBus, createEmbeddedBus, deleteNamespace, prefixedBus, type Bus } from '@dws/bus';
import { loadConfig } from '@dws/config';
import { openDatabase, type Database } from '@dws/db';
import { createLogger } from '@dws/log';
import { create, RunFinishedSchema, SendWebhookSchema, StepFailedSchema, toBinary } from '@dws/proto';
import { callApi, streams, subjects, type Caller, type ServiceHandle } from '@dws/runtime';
import { openTestDb, testInfra, uniqueName } from '@dws/testing';
import { startWebhookDispatcher, type WebhookDispatcherOptions } from '../src/main.js';

const enc = new TextEncoder();

export const modes = (): ('real' | 'embedded')[] => (testInfra() ? ['real', 'embedded'] : ['embedded']);

/** Poll `pred` until it holds; fail naming `what` at the deadline. */
export async function until<T>(pred: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A scripted answer: a status code, or a behaviour (see Receiver). */
export type Answer = number | 'trickle' | 'hold' | 'redirect';

/** One request as the receiver saw it. */
export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * A real local HTTP receiver. A path's behaviour is scripted per test:
 * `script(path, [500, 200])` answers 500 then 200 (the last entry repeats);
 * 'trickle' sends headers then a byte every 100 ms; 'hold' never answers;
 * 'redirect' is a 302 to /redirected.
 */
export class Receiver {
  readonly got: Received[] = [];
  private readonly scripts = new Map<string, Answer[]>();
  private readonly open = new Set<http.ServerResponse>();
  private server!: http.Server;
  base = '';

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const path = req.url ?? '';
        this.got.push({ path, headers: req.headers, body });
        const s = this.scripts.get(path) ?? [200];
        const next = s.length > 1 ? s.shift()! : s[0]!;
        if (next === 'hold') return void this.open.add(res);
        if (next === 'redirect') return void res.writeHead(302, { location: `${this.base}/redirected` }).end();
        if (next === 'trickle') {
          this.open.add(res);
          res.writeHead(200, { 'content-type': 'text/plain' });
          const t = setInterval(() => (res.writableEnded ? clearInterval(t) : res.write('.')), 100);
          res.on('close', () => clearInterval(t));
          return;
        }
        res.writeHead(next).end(next < 300 ? 'ok' : `answer ${next} ${'x'.repeat(4000)}`);
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.base = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  script(path: string, answers: Answer[]): string {
    this.scripts.set(path, [...answers]);
    return `${this.base}${path}`;
  }

  at(path: string): Received[] {
    return this.got.filter((r) => r.path === path);
  }

  async stop(): Promise<void> {
    for (const r of this.open) r.destroy();
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(() => r(undefined)));
  }
}

export interface Harness {
  mode: 'real' | 'embedded';
  db: Database;
  bus: Bus;
  /** Connection string of the test database (real mode), for a dispatcher in another process. */
  dbUrl: string | null;
  busPrefix: string;
  receiver: Receiver;
  /** The dispatcher the harness started, unless told not to. */
  svc: ServiceHandle | undefined;
  start(opts?: WebhookDispatcherOptions): Promise<ServiceHandle>;
  call(op: string, payload?: { params?: Record<string, string>; query?: Record<string, unknown>; body?: unknown }, ws?: string): Promise<{ status: number; body: any; headers: Record<string, string> }>;
  /** Expect a ServiceError from the op; returns it. */
  fails(op: string, payload: { params?: Record<string, string>; query?: Record<string, unknown>; body?: unknown }, ws?: string): Promise<{ status: number; code: string; message: string }>;
  runFinished(f: { ws?: string; runId: string; app?: string; status?: string; workflow?: string; result?: unknown; error?: unknown; tags?: string[] }): Promise<void>;
  stepFailed(f: { ws?: string; runId: string; app?: string; stepId: string; stepName?: string }): Promise<void>;
  send(f: { deliveryId: string; url: string; runId: string; stepId: string; ws?: string }): Promise<void>;
  /** The delivery's row once its status is one of `statuses`. */
  delivery(id: string, statuses: string[], timeoutMs?: number): Promise<any>;
  /** Deliveries of a run (any endpoint), once there are `n`. */
  deliveriesOf(runId: string, n: number, timeoutMs?: number): Promise<any[]>;
  close(): Promise<void>;
}

export const WS = 'ws_a';
export const OTHER_WS = 'ws_b';

/** Test timings: a short attempt budget and backoff so exhausting 5 attempts takes well under a second of waiting. */
export const FAST: WebhookDispatcherOptions = { attemptTimeoutMs: 800, backoffBaseMs: 20, pollMs: 50 };

/** `env` is the service's environment (private addresses allowed unless it says otherwise); `startService: false` leaves the dispatcher to the test (another process, say). */
export async function harness(
  mode: 'real' | 'embedded',
  opts: WebhookDispatcherOptions = FAST,
  startService = true,
  env: Record<string, string> = { SERVICE_WEBHOOK_ALLOW_PRIVATE: 'on' },
): Promise<Harness> {
  let db: Database;
  let bus: Bus;
  let dbUrl: string | null = null;
  let closeDb: () => Promise<void>;
  const busPrefix = uniqueName('whd').replace(/[^A-Za-z0-9_-]/g, '');
  if (mode === 'real') {
    const t = await openTestDb('webhooks');
    db = t.db;
    dbUrl = t.url;
    closeDb = t.close;
    bus = prefixedBus(await connectJetStreamBus({ servers: testInfra()!.natsUrl }), busPrefix);
  } else {
    db = await openDatabase({});
    closeDb = () => db.close();
    bus = await createEmbeddedBus();
  }
  const receiver = new Receiver();
  await receiver.start();
  const cfg = loadConfig(env);
  const log = createLogger({ level: 'silent' });
  const infra = { db, bus, log, mode: { db: db.kind, bus: bus.kind }, close: async () => {} };
  const started: ServiceHandle[] = [];
  const start = async (o: WebhookDispatcherOptions = opts) => {
    const s = await startWebhookDispatcher(cfg, infra, o);
    started.push(s);
    return s;
  };
  const svc = startService ? await start() : undefined;
  const caller = (ws: string): Caller => ({ workspaceId: ws, actor: 'test', keyKind: 'secret', requestId: 'req' });
  const call: Harness['call'] = async (op, p = {}, ws = WS) => {
    const r = await callApi(bus, 'webhook-dispatcher', op, caller(ws), { params: p.params, query: p.query, rawBody: p.body === undefined ? undefined : JSON.stringify(p.body) });
    return { status: r.status, body: r.bodyJson ? JSON.parse(r.bodyJson) : undefined, headers: r.headers };
  };
  const h: Harness = {
    mode,
    db,
    bus,
    dbUrl,
    busPrefix,
    receiver,
    svc,
    start,
    call,
    async fails(op, p, ws = WS) {
      try {
        await call(op, p, ws);
      } catch (err) {
        const e = err as { status: number; code: string; message: string };
        return { status: e.status, code: e.code, message: e.message };
      }
      throw new Error(`${op} succeeded, expected an error`);
    },
    async runFinished(f) {
      const status = f.status ?? 'succeeded';
      await bus.publish(
        subjects.runFinished,
        toBinary(
          RunFinishedSchema,
          create(RunFinishedSchema, {
            workspaceId: f.ws ?? WS,
            runId: f.runId,
            workflow: f.workflow ?? 'wf',
            app: f.app ?? 'shop',
            status,
            result: status === 'succeeded' ? enc.encode(JSON.stringify(f.result ?? { ok: true })) : new Uint8Array(),
            error: status === 'succeeded' ? new Uint8Array() : enc.encode(JSON.stringify(f.error ?? { message: 'boom' })),
            atMs: BigInt(Date.now()),
            tags: f.tags ?? [],
          }),
        ),
      );
    },
    async stepFailed(f) {
      await bus.publish(
        subjects.stepFailed,
        toBinary(
          StepFailedSchema,
          create(StepFailedSchema, { workspaceId: f.ws ?? WS, runId: f.runId, workflow: 'wf', app: f.app ?? 'shop', stepId: f.stepId, stepName: f.stepName ?? 'charge', error: enc.encode('{"message":"declined"}'), attempts: 3, atMs: BigInt(Date.now()) }),
        ),
      );
    },
    async send(f) {
      await bus.publish(
        subjects.sendWebhook,
        toBinary(SendWebhookSchema, create(SendWebhookSchema, { workspaceId: f.ws ?? WS, deliveryId: f.deliveryId, app: 'shop', url: f.url, body: enc.encode('{"hello":1}'), sourceRunId: f.runId, stepId: f.stepId })),
      );
    },
    async delivery(id, statuses, timeoutMs = 10_000) {
      return until(
        async () => {
          const [row] = await db.query<any>('select * from webhook_dispatcher.deliveries where id = $1', [id]);
          if (row && statuses.includes(row.status)) return row;
          // A delivery that succeeded, exhausted or died never moves again: say so now, not at the deadline.
          if (row && ['succeeded', 'exhausted', 'dead'].includes(row.status)) throw new Error(`delivery ${id} ended ${row.status}, not ${statuses.join('|')}`);
          return undefined;
        },
        timeoutMs,
        `delivery ${id} to reach ${statuses.join('|')}`,
      );
    },
    async deliveriesOf(runId, n, timeoutMs = 10_000) {
      return until(
        async () => {
          const rows = await db.query<any>('select * from webhook_dispatcher.deliveries where source_run_id = $1 order by created_at, id', [runId]);
          return rows.length >= n ? rows : undefined;
        },
        timeoutMs,
        `${n} deliveries of ${runId}`,
      );
    },
    async close() {
      for (const s of started.reverse()) await s.stop().catch(() => undefined);
      await receiver.stop();
      await bus.close();
      await closeDb();
      if (mode === 'real') await deleteNamespace(testInfra()!.natsUrl, busPrefix);
    },
  };
  await bus.ensureStream(streams.dispatcherCmds);
  await bus.ensureStream(streams.schedulerFacts);
  return h;
}
