import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connectJetStreamBus, createEmbeddedBus, deleteNamespace, prefixedBus, type Bus } from '@dws/bus';
import { loadConfig } from '@dws/config';
import { openDatabase, type Database } from '@dws/db';
import { createLogger } from '@dws/log';
import {
  ApprovalListedSchema,
  create,
  fromBinary,
  InvokeRequestSchema,
  InvokeResult_Outcome,
  InvokeResultSchema,
  RouteReplySchema,
  StartRunSchema,
  toBinary,
  WorkflowsRegisteredSchema,
} from '@dws/proto';
import { hashStepId, PROTOCOL_HEADER, PROTOCOL_VERSION, seal, SIGNATURE_HEADER, verifyInvokeSignature } from '@dws/protocol';
import { callApi, ids, streams, subjects, type Infra, type ServiceHandle } from '@dws/runtime';
import { openTestDb, testInfra, uniqueName } from '@dws/testing';
import { startScheduler, type SchedulerOptions } from '../src/main.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
export const WS = 'ws_test';
export const caller = { workspaceId: WS, actor: 'tester', keyKind: 'secret', requestId: '' };

/** One step of a scripted workflow, as a runner with the SDK would report it. */
export type ScriptStep =
  | { run: string; fn?: (attempt: number) => unknown; retriable?: boolean; catchError?: boolean }
  /** A step that executes until `until` settles: the pass stays open (the run holds its slots) meanwhile. */
  | { work: string; until: () => Promise<unknown> }
  | { sleep: string; ms: number }
  | { sleepUntil: string; at: number }
  | { wait: string; event: string; if?: string; timeoutMs?: number }
  | { child: string; workflow: string; data?: unknown }
  | { emit: string; event: string; data?: unknown }
  | { approval: string; timeoutMs?: number }
  | { infer: string; model: string }
  | { score: string; name: string; value: unknown; note?: string }
  | { tag: string; tags: unknown }
  | { parallel: string[] };

export type Script = (event: { name: string; data: any }, ctx: Record<string, any>) => ScriptStep[];

/**
 * The scheduler's peer, played by the test on the real bus: it answers
 * `invoker.invoke` by replaying a scripted workflow against the memo it is
 * sent (what the SDK does), and counts every step execution.
 */
export class ScriptedInvoker {
  readonly executions = new Map<string, number>();
  readonly bodies: any[] = [];
  /** Hold replies for a run (to crash the scheduler between reply and apply). */
  hold: ((runId: string, body: any) => Promise<void>) | undefined;

  constructor(private readonly scripts: Record<string, Script>) {}

  count(runId: string, step: string): number {
    return this.executions.get(`${runId}/${step}`) ?? 0;
  }

  /** Passes that came over the bus (`invoker.invoke`), and over HTTP from the scheduler itself (direct routes). */
  readonly via = { bus: 0, http: 0 };

  /**
   * Also play a serve runner the scheduler may call directly: answer
   * `invoker.route` with this HTTP endpoint (signing key sealed under
   * `sealKey`) and check each POST's signature, as the SDK does.
   */
  async serveDirect(bus: Bus, sealKey: Buffer, signingKey: string): Promise<{ url: string; stopHttp(): Promise<void>; stopRoutes(): Promise<void>; stop(): Promise<void> }> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks);
        if (!verifyInvokeSignature(signingKey, req.headers[SIGNATURE_HEADER], raw).ok) return void res.writeHead(401).end('{}');
        this.via.http++;
        void this.pass(JSON.parse(raw.toString())).then((reply) => {
          res.writeHead(reply.status, { 'content-type': 'application/json', [PROTOCOL_HEADER]: String(PROTOCOL_VERSION) }).end(JSON.stringify(reply.body));
        });
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/invoke`;
    const route = bus.respond(subjects.route, 'invoker-route', async () =>
      toBinary(RouteReplySchema, create(RouteReplySchema, { direct: true, targets: [{ runnerId: 'r1', url }], sealedSigningKey: seal(signingKey, sealKey), ttlMs: 1000 })),
    );
    let open = true;
    const stopHttp = async () => {
      if (!open) return;
      open = false;
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    };
    let routing = true;
    const stopRoutes = async () => {
      if (routing) await route.stop();
      routing = false;
    };
    return { url, stopHttp, stopRoutes, stop: async () => (await stopRoutes(), await stopHttp()) };
  }

  serve(bus: Bus) {
    return bus.respond(subjects.invoke, 'invoker', async (data) => {
      this.via.bus++;
      const req = fromBinary(InvokeRequestSchema, data);
      const body = JSON.parse(dec.decode(req.body));
      this.bodies.push(body);
      const reply = await this.pass(body);
      if (this.hold) await this.hold(req.runId, body);
      return toBinary(
        InvokeResultSchema,
        create(InvokeResultSchema, { outcome: InvokeResult_Outcome.REPLY, status: reply.status, body: enc.encode(JSON.stringify(reply.body)) }),
      );
    });
  }

  private async pass(body: any): Promise<{ status: number; body: any }> {
    const script = this.scripts[body.ctx.workflow];
    if (!script) return { status: 400, body: { error: { message: 'no such workflow' }, logs: [] } };
    const memo = body.steps as Record<string, any>;
    const results: Record<string, unknown> = {};
    const logs = [{ level: 'info', message: 'handler pass', scope: '@root', index: 0, tsMs: Date.now() }];
    const steps = script(body.event, body.ctx);
    for (const [i, step] of steps.entries()) {
      const names = 'parallel' in step ? step.parallel : [Object.values(step)[0] as string];
      const opcodes: any[] = [];
      for (const name of names) {
        const id = hashStepId(name);
        const m = memo[id];
        if (m && 'data' in m) {
          results[name] = m.data;
          continue;
        }
        if (m && 'error' in m) {
          if ('run' in step && step.catchError) {
            results[name] = { caught: m.error.message };
            continue;
          }
          return { status: 400, body: { error: m.error, logs } };
        }
        if (m && m.pending) continue;
        if ('work' in step) await step.until();
        opcodes.push(this.opcode('parallel' in step || 'work' in step ? { run: name } : step, id, name, body.ctx));
      }
      // Like the SDK: finished steps right before the return ride on the 200.
      const last = i === steps.length - 1 && !names.some((n) => memo[hashStepId(n)]?.pending);
      if (opcodes.length > 0 && last && opcodes.every((o) => o.op === 'StepRun' && o.error === undefined)) {
        for (const o of opcodes) results[o.name] = o.data;
        return { status: 200, body: { data: { results, onFailure: body.ctx.onFailure ?? false, error: body.ctx.error }, logs, opcodes } };
      }
      if (opcodes.length > 0) return { status: 206, body: { opcodes, logs } };
      if (names.some((n) => memo[hashStepId(n)]?.pending)) return { status: 206, body: { opcodes: [], logs } };
    }
    return { status: 200, body: { data: { results, onFailure: body.ctx.onFailure ?? false, error: body.ctx.error }, logs } };
  }

  private opcode(step: ScriptStep, id: string, name: string, ctx: any): any {
    if ('run' in step) {
      const key = `${ctx.runId}/${name}`;
      const n = (this.executions.get(key) ?? 0) + 1;
      this.executions.set(key, n);
      try {
        return { op: 'StepRun', id, name, data: step.fn ? step.fn(n) : { step: name } };
      } catch (err) {
        return { op: 'StepRun', id, name, error: { message: (err as Error).message }, ...(step.retriable === false ? { retriable: false } : {}) };
      }
    }
    if ('sleep' in step) return { op: 'Sleep', id, name, sleepMs: step.ms };
    if ('sleepUntil' in step) return { op: 'SleepUntil', id, name, sleepUntilMs: step.at };
    if ('wait' in step) return { op: 'WaitForEvent', id, name, eventName: step.event, eventIf: step.if, timeoutMs: step.timeoutMs };
    if ('child' in step) return { op: 'RunWorkflow', id, name, childName: step.workflow, childData: step.data ?? null };
    if ('emit' in step) return { op: 'Emit', id, name, eventName: step.event, data: step.data ?? null };
    if ('approval' in step) return { op: 'Approval', id, name, data: { title: name }, timeoutMs: step.timeoutMs };
    if ('infer' in step) return { op: 'Infer', id, name, data: { model: step.model, prompt: 'hi' } };
    if ('score' in step) return { op: 'Score', id, name, data: { name: step.name, value: step.value, ...(step.note ? { note: step.note } : {}) } };
    if ('tag' in step) return { op: 'Tag', id, name, tags: step.tags };
    throw new Error('unknown step');
  }
}

export interface Harness {
  bus: Bus;
  db: Database;
  scheduler: ServiceHandle;
  /** Send a StartRun on the stream, or as the direct request ingest tries first (`direct`: resolves once the run is stored). */
  start(workflow: string, data?: unknown, opts?: { app?: string; flow?: Record<string, unknown>; runId?: string; direct?: boolean }): Promise<string>;
  register(app: string, workflows: Record<string, unknown>[]): Promise<void>;
  call(op: string, payload?: { params?: Record<string, string>; query?: Record<string, unknown>; body?: unknown; headers?: Record<string, string> }): Promise<any>;
  waitFor(runId: string, statuses: string[], timeoutMs?: number): Promise<any>;
  /** Stop the harness's own scheduler (gracefully: it drains and hands its runs back); close() then skips it. */
  stopScheduler(): Promise<void>;
  /** Another scheduler replica on the same database and bus (the harness's options); `crash()` cuts its connections without a graceful stop. */
  replica(): Promise<{ handle: ServiceHandle; db: Database; bus: Bus; crash(): Promise<void> }>;
  close(): Promise<void>;
}

/** A scheduler on real Postgres + NATS (`real`) or PGlite + the embedded bus, with its own database and bus namespace. */
export async function startHarness(
  mode: 'real' | 'embedded',
  invoker: ScriptedInvoker,
  env: Record<string, string> = {},
  opts: SchedulerOptions = {},
): Promise<Harness> {
  const cfg = loadConfig({ SERVICE_RUN_LEASE_MS: '1000', LOG_LEVEL: 'silent', ...env });
  const log = createLogger({ level: 'silent' });
  const infra = testInfra();
  const cleanups: (() => Promise<void>)[] = [];
  let db: Database;
  let url: string | undefined;
  let bus: Bus;
  const prefix = uniqueName('sch').replace(/[^A-Za-z0-9_-]/g, '');
  const openBus = async () => {
    if (mode === 'real') return prefixedBus(await connectJetStreamBus({ servers: infra!.natsUrl }), prefix);
    return embeddedBus!;
  };
  let embeddedBus: Bus | undefined;
  if (mode === 'real') {
    if (!infra) throw new Error('real Postgres and NATS are required');
    const t = await openTestDb('sched');
    db = t.db;
    url = t.url;
    cleanups.push(t.close);
  } else {
    db = await openDatabase({});
    embeddedBus = await createEmbeddedBus();
    cleanups.push(() => db.close());
  }
  bus = await openBus();
  const mkInfra = (d: Database, b: Bus): Infra => ({ db: d, bus: b, log, mode: { db: d.kind, bus: b.kind }, close: async () => {} });
  const scheduler = await startScheduler(cfg, mkInfra(db, bus), opts);
  const invokerSub = invoker.serve(bus);
  const replicas: { handle: ServiceHandle; db: Database; bus: Bus; crashed: boolean }[] = [];
  let schedulerStopped: Promise<void> | undefined;
  const h: Harness = {
    bus,
    db,
    scheduler,
    async start(workflow, data = {}, opts = {}) {
      const runId = opts.runId ?? ids.run();
      await bus.ensureStream(streams.schedulerCmds);
      const cmd = create(StartRunSchema, {
        workspaceId: WS, runId, workflow, app: opts.app ?? 'app', runner: '', eventId: ids.event(), eventName: `${workflow}.requested`,
        input: enc.encode(JSON.stringify(data)), triggerKind: 'event', createdAtMs: BigInt(Date.now()),
        ...(opts.flow ?? {}),
      });
      const bytes = toBinary(StartRunSchema, cmd);
      if (opts.direct) await bus.request(subjects.startRunNow, bytes, { timeoutMs: 5000 });
      else await bus.publish(subjects.startRun, bytes, { msgId: runId });
      return runId;
    },
    async register(app, workflows) {
      const fact = create(WorkflowsRegisteredSchema, {
        workspaceId: WS, app, runnerId: 'r1', url: 'http://runner/invoke', registeredAtMs: BigInt(Date.now()),
        workflows: workflows.map((w) => ({ name: w.name as string, config: enc.encode(JSON.stringify(w)) })),
      });
      await bus.publish(subjects.workflowsRegistered, toBinary(WorkflowsRegisteredSchema, fact));
      const deadline = Date.now() + 10_000;
      for (;;) {
        const rows = await db.query('select 1 from scheduler.workflows where workspace_id = $1 and app = $2 and name = $3', [WS, app, workflows[0]!.name]);
        if (rows.length) return;
        if (Date.now() > deadline) throw new Error('workflow projection not updated');
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async call(op, payload = {}) {
      const res = await callApi(bus, 'scheduler', op, caller, {
        params: payload.params,
        query: payload.query,
        headers: payload.headers,
        rawBody: payload.body === undefined ? undefined : JSON.stringify(payload.body),
      });
      return { status: res.status, body: res.bodyJson ? JSON.parse(res.bodyJson) : undefined, headers: res.headers };
    },
    async waitFor(runId, statuses, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      let last: any;
      for (;;) {
        try {
          last = (await h.call('runs.get', { params: { id: runId } })).body;
        } catch {
          /* not created yet */
        }
        if (last && statuses.includes(last.status)) return last;
        // A run that ended otherwise never will: report it now, with its error, not at the deadline.
        if (last && TERMINAL.includes(last.status)) {
          throw new Error(`run ${runId} ended ${last.status} while waiting for ${statuses.join('|')}: ${JSON.stringify(last.error ?? last.result ?? null)}`);
        }
        if (Date.now() > deadline) throw new Error(`run ${runId} not ${statuses.join('|')}: ${JSON.stringify(last)}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    stopScheduler() {
      schedulerStopped ??= scheduler.stop();
      return schedulerStopped;
    },
    async replica() {
      const d = mode === 'real' ? await openDatabase({ url: url! }) : db;
      const b = await openBus();
      const handle = await startScheduler(cfg, mkInfra(d, b), opts);
      const r = { handle, db: d, bus: b, crashed: false };
      replicas.push(r);
      return {
        handle,
        db: d,
        bus: b,
        async crash() {
          r.crashed = true;
          await Promise.all([d.close().catch(() => undefined), b.close().catch(() => undefined)]);
          // Its timers must not outlive the test; the stop finishes once its dead pass settles.
          void handle.stop().catch(() => undefined);
        },
      };
    },
    async close() {
      for (const r of replicas) {
        if (r.crashed) continue; // its passes in flight died with its connections
        await r.handle.stop().catch(() => undefined);
        if (r.bus !== bus) await r.bus.close().catch(() => undefined);
        if (r.db !== db) await r.db.close().catch(() => undefined);
      }
      await invokerSub.stop();
      await (schedulerStopped ?? scheduler.stop()).catch(() => undefined);
      await bus.close();
      for (const c of cleanups) await c();
      if (mode === 'real') await deleteNamespace(infra!.natsUrl, prefix);
    },
  };
  return h;
}

/** What the approvals service sends once it lists a gated approval: the run reads needsAttention from then on. */
export function listApproval(bus: Bus, runId: string, stepId: string, approvalId = 'apr_1'): Promise<unknown> {
  const msg = create(ApprovalListedSchema, { workspaceId: WS, runId, stepId, approvalId });
  return bus.publish(subjects.approvalListed, toBinary(ApprovalListedSchema, msg), { msgId: `listed:${runId}:${stepId}` });
}

/** SPEC Run statuses: a run in one of these never moves again. */
const TERMINAL = ['succeeded', 'failed', 'cancelled'];

/** Poll `pred` until it holds; fail naming `what` at the deadline. */
export async function until(pred: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const modes = (): ('real' | 'embedded')[] => {
  if (testInfra()) return ['real', 'embedded'];
  console.warn('\n!!! Postgres/NATS missing: scheduler tests run on the embedded adapters only !!!\n');
  return ['embedded'];
};
