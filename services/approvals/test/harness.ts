import { connectJetStreamBus, createEmbeddedBus, deleteNamespace, prefixedBus, type Bus, type Subscription } from '@dws/bus';
import { loadConfig } from '@dws/config';
import { openDatabase, type Database } from '@dws/db';
import { createLogger } from '@dws/log';
import { ApprovalListedSchema, create, fromBinary, ResolveStepSchema, RunFinishedSchema, StepHandoffSchema, toBinary } from '@dws/proto';
import { hashStepId } from '@dws/protocol';
import { callApi, ids, streams, subjects, type Caller, type Infra, type ServiceHandle } from '@dws/runtime';
import { openTestDb, testInfra, uniqueName } from '@dws/testing';
import { startApprovals } from '../src/main.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A ResolveStep as the played scheduler received it. */
export interface Resolved {
  runId: string;
  stepId: string;
  data?: any;
  error?: string;
}

export interface Replica {
  handle: ServiceHandle;
  /** ResolveStep publishes this replica made, by msgId (eager and relayed alike). */
  published: Map<string, number>;
  /** Deliveries this replica's consumer `durable` finished (handler resolved): a repeat leaves no other trace. */
  handled(durable: string): number;
  stop(): Promise<void>;
  /** Cut its connections without a graceful stop (kill -9 as far as this process can play it). */
  crash(): Promise<void>;
}

export interface ReplicaOptions {
  /** Called instead of publishing a ResolveStep; the publish then never completes (a process stuck there until it dies). */
  holdResolve?: () => void;
  /** Its timers' longest sleep. @default 20 */
  pollMs?: number;
}

export interface Harness {
  mode: 'real' | 'embedded';
  bus: Bus;
  db: Database;
  ws: string;
  primary: Replica;
  /** Every ResolveStep the played scheduler consumed, by `runId/stepId`, in arrival order (repeats included). */
  resolves: Map<string, Resolved[]>;
  /** Every ApprovalListed the played scheduler consumed, as `runId/stepId -> approvalId`, in arrival order. */
  listed: [string, string][];
  /** Hand an Approval opcode over as the scheduler does; returns the run and hashed step ids. */
  handoff(opcode: Record<string, unknown>, o?: { runId?: string; step?: string; ws?: string; msgId?: string }): Promise<{ runId: string; stepId: string }>;
  /** The approval of a hand-off, once recorded. */
  approvalOf(runId: string): Promise<any>;
  /** The ResolveSteps of a step, once at least one arrived. */
  resolved(runId: string, stepId: string): Promise<Resolved[]>;
  call(op: string, payload?: { params?: Record<string, string>; query?: Record<string, unknown>; body?: unknown }, caller?: Partial<Caller>): Promise<{ status: number; body: any }>;
  runFinished(runId: string, status?: string, ws?: string): Promise<void>;
  replica(opts?: ReplicaOptions): Promise<Replica>;
  close(): Promise<void>;
}

export const modes = (): ('real' | 'embedded')[] => {
  if (testInfra()) return ['real', 'embedded'];
  console.warn('\n!!! Postgres/NATS missing: approvals tests run on the embedded adapters only !!!\n');
  return ['embedded'];
};

/** Poll `pred` until it holds; fail naming `what` at the deadline. */
export async function until(pred: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The bus, with this replica's ResolveStep publishes counted (and held, when asked). */
/** What a crash does to a replica's bus from outside: held publishes fail, answers are never sent. */
interface CrashSwitch {
  crashed: boolean;
  held: ((err: Error) => void)[];
}

function instrumented(bus: Bus, published: Map<string, number>, handled: Map<string, number>, opts: ReplicaOptions, sw: CrashSwitch): Bus {
  return new Proxy(bus, {
    get(target, prop) {
      if (prop === 'respond') {
        const respond: Bus['respond'] = (subject, group, handler) =>
          target.respond(subject, group, async (data, subj) => {
            const out = await handler(data, subj);
            // A dead process answers nobody.
            if (sw.crashed) throw new Error('replica crashed');
            return out;
          });
        return respond;
      }
      if (prop === 'consume') {
        const consume: Bus['consume'] = (spec, handler) =>
          target.consume(spec, async (msg) => {
            const out = await handler(msg);
            handled.set(spec.durable, (handled.get(spec.durable) ?? 0) + 1);
            return out;
          });
        return consume;
      }
      if (prop === 'publish') {
        const publish: Bus['publish'] = async (subject, data, o) => {
          if (subject === subjects.resolveStep) {
            if (opts.holdResolve) {
              opts.holdResolve();
              // Stuck until the process dies; then the publish fails with its connection.
              return new Promise<void>((_resolve, reject) => sw.held.push(reject));
            }
            await target.publish(subject, data, o);
            const key = o?.msgId ?? '';
            published.set(key, (published.get(key) ?? 0) + 1);
            return;
          }
          return target.publish(subject, data, o);
        };
        return publish;
      }
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/**
 * The approvals service on real Postgres + NATS (`real`) or PGlite + the
 * embedded bus, with its own database and bus namespace. The test plays the
 * scheduler: it publishes the hand-offs and run ends, and consumes
 * `scheduler.cmd.resolve`.
 */
export async function startHarness(mode: 'real' | 'embedded'): Promise<Harness> {
  const cfg = loadConfig({ LOG_LEVEL: 'silent' });
  const log = createLogger({ level: (process.env.HARNESS_LOG as 'error') ?? 'silent' });
  const infra = testInfra();
  const prefix = uniqueName('apr').replace(/[^A-Za-z0-9_-]/g, '');
  let db: Database;
  let url: string | undefined;
  let closeDb: () => Promise<void>;
  let embeddedBus: Bus | undefined;
  if (mode === 'real') {
    if (!infra) throw new Error('real Postgres and NATS are required');
    const t = await openTestDb('approvals', { poolSize: 10 });
    db = t.db;
    url = t.url;
    closeDb = t.close;
  } else {
    db = await openDatabase({});
    embeddedBus = await createEmbeddedBus();
    closeDb = () => db.close();
  }
  const openBus = async () => (mode === 'real' ? prefixedBus(await connectJetStreamBus({ servers: infra!.natsUrl }), prefix) : embeddedBus!);
  const bus = await openBus();
  const mkInfra = (d: Database, b: Bus): Infra => ({ db: d, bus: b, log, mode: { db: d.kind, bus: b.kind }, close: async () => {} });
  const replicas: Replica[] = [];

  const startReplica = async (d: Database, b: Bus, opts: ReplicaOptions = {}): Promise<Replica> => {
    const published = new Map<string, number>();
    const handled = new Map<string, number>();
    const sw: CrashSwitch = { crashed: false, held: [] };
    const handle = await startApprovals(cfg, mkInfra(d, instrumented(b, published, handled, opts, sw)), { pollMs: opts.pollMs ?? 20 });
    let gone = false;
    const own = d !== db;
    const r: Replica = {
      handle,
      published,
      handled: (durable) => handled.get(durable) ?? 0,
      async stop() {
        if (gone) return;
        gone = true;
        await handle.stop();
        if (b !== bus) await b.close();
        if (own) await d.close();
      },
      async crash() {
        if (gone) return;
        gone = true;
        if (!own) {
          // One PGlite and one in-process bus cannot be cut: played as a stop.
          void handle.stop().catch(() => undefined);
          return;
        }
        sw.crashed = true;
        // The database first: nothing more commits. Then what was in flight fails with the connections.
        await d.close().catch(() => undefined);
        for (const reject of sw.held.splice(0)) reject(new Error('connection closed'));
        await b.close().catch(() => undefined);
        void handle.stop().catch(() => undefined);
      },
    };
    replicas.push(r);
    return r;
  };
  const primary = await startReplica(db, bus);
  const ws = uniqueName('ws');
  const resolves = new Map<string, Resolved[]>();
  const consumer: Subscription = await bus.consume(
    { stream: streams.schedulerCmds.name, durable: 'scheduler-resolves', filterSubject: subjects.resolveStep, concurrency: 16 },
    async (msg) => {
      const r = fromBinary(ResolveStepSchema, msg.data);
      const key = `${r.runId}/${r.stepId}`;
      const list = resolves.get(key) ?? [];
      list.push({ runId: r.runId, stepId: r.stepId, ...(r.errorMessage ? { error: r.errorMessage } : { data: JSON.parse(dec.decode(r.data)) }) });
      resolves.set(key, list);
    },
  );

  const listed: [string, string][] = [];
  const listings: Subscription = await bus.consume(
    { stream: streams.schedulerCmds.name, durable: 'scheduler-attention', filterSubject: subjects.approvalListed, concurrency: 1 },
    async (msg) => {
      const l = fromBinary(ApprovalListedSchema, msg.data);
      listed.push([`${l.runId}/${l.stepId}`, l.approvalId]);
    },
  );

  const h: Harness = {
    mode, bus, db, ws, primary, resolves, listed,
    async handoff(opcode, o = {}) {
      const runId = o.runId ?? ids.run();
      const step = o.step ?? 'sign-off';
      const stepId = hashStepId(step);
      const msg = create(StepHandoffSchema, {
        workspaceId: o.ws ?? ws, runId, stepId, stepName: step, workflow: 'agent', app: 'app',
        opcode: enc.encode(JSON.stringify({ op: 'Approval', id: stepId, name: step, ...opcode })),
      });
      await bus.publish(subjects.requestApproval, toBinary(StepHandoffSchema, msg), { msgId: o.msgId ?? `${runId}:${stepId}` });
      return { runId, stepId };
    },
    async approvalOf(runId) {
      let found: any;
      await until(async () => {
        const rows = await db.query<{ id: string; workspace_id: string }>('select id, workspace_id from approvals.approvals where run_id = $1', [runId]);
        if (!rows[0]) return false;
        found = (await h.call('approvals.get', { params: { id: rows[0].id } }, { workspaceId: rows[0].workspace_id })).body;
        return true;
      }, 10_000, `the approval of ${runId}`);
      return found;
    },
    async resolved(runId, stepId) {
      await until(() => (resolves.get(`${runId}/${stepId}`)?.length ?? 0) > 0, 15_000, `the ResolveStep of ${runId}`);
      return resolves.get(`${runId}/${stepId}`)!;
    },
    async call(op, payload = {}, caller = {}) {
      try {
        const res = await callApi(bus, 'approvals', op, { workspaceId: ws, actor: 'key-ci', keyKind: 'secret', requestId: '', ...caller }, {
          params: payload.params,
          query: payload.query,
          rawBody: payload.body === undefined ? undefined : JSON.stringify(payload.body),
        });
        return { status: res.status, body: res.bodyJson ? JSON.parse(res.bodyJson) : undefined };
      } catch (err) {
        const e = err as { status?: number; code?: string; message: string };
        if (e.status) return { status: e.status, body: { error: { code: e.code, message: e.message } } };
        throw err;
      }
    },
    async runFinished(runId, status = 'cancelled', w = ws) {
      const fact = create(RunFinishedSchema, { workspaceId: w, runId, workflow: 'agent', app: 'app', status, atMs: BigInt(Date.now()) });
      // What the scheduler sends approvals for a run that ended with a step open (runEndMessages).
      await bus.publish(subjects.closeApprovals, toBinary(RunFinishedSchema, fact), { msgId: `close-approvals:${runId}` });
    },
    async replica(opts) {
      return startReplica(mode === 'real' ? await openDatabase({ url: url!, poolSize: 5 }) : db, await openBus(), opts);
    },
    async close() {
      for (const r of replicas) await r.stop().catch(() => undefined);
      await consumer.stop();
      await listings.stop();
      await bus.close();
      await closeDb();
      if (mode === 'real') await deleteNamespace(infra!.natsUrl, prefix);
    },
  };
  return h;
}
