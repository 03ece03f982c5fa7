import { connectJetStreamBus, createEmbeddedBus, deleteNamespace, prefixedBus, type Bus, type Subscription } from '@dws/bus';
import { loadConfig } from '@dws/config';
import { openDatabase, type Database } from '@dws/db';
import { createLogger } from '@dws/log';
import { create, fromBinary, StartRunSchema, toBinary, WorkflowsRegisteredSchema, WorkspaceUpsertedSchema, type StartRun } from '@dws/proto';
import { callApi, ids, serveApi, streams, subjects, type ApiHandler, type Infra, type ServiceHandle } from '@dws/runtime';
import { openTestDb, testInfra, uniqueName } from '@dws/testing';
import { startIngest, type IngestOptions } from '../src/main.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A StartRun as the test's scheduler received it, with its input parsed. */
export interface Started {
  cmd: StartRun;
  input: any;
  at: number;
}

export interface Harness {
  mode: 'real' | 'embedded';
  /** The ingest started with the harness (on its own connections). */
  primary: Replica;
  bus: Bus;
  db: Database;
  ws: string;
  /** Every StartRun the played scheduler consumed, once per run id (a redelivery is counted in `deliveries`). */
  starts: Map<string, Started>;
  deliveries: number;
  /**
   * The played scheduler's `waiters.wake`, `waiters.wakeMany` (each event through `waiters.wake`),
   * `runs.activeForKey` (absent: answered 404 like a scheduler without the op).
   */
  scheduler: Record<string, ApiHandler>;
  /** How many events each `waiters.wakeMany` call carried, in order. */
  wakeBatches: number[];
  /** Publish a registration (WorkflowsRegistered) and wait until ingest applied it. */
  register(app: string, workflows: Record<string, unknown>[], ws?: string): Promise<void>;
  /** events.ingest as the gateway calls it. */
  send(body: unknown, opts?: { ws?: string; suspended?: boolean }): Promise<any>;
  call(op: string, payload?: { params?: Record<string, string>; query?: Record<string, unknown> }, ws?: string): Promise<any>;
  /** gateway.fact.workspace with the suspension flag; waits until ingest stored it. */
  suspend(ws: string, suspended: boolean): Promise<void>;
  waitStarts(pred: (s: Started[]) => boolean, timeoutMs?: number, what?: string): Promise<Started[]>;
  startsOf(workflow: string): Started[];
  /**
   * Deliveries the primary replica's consumer `durable` has finished with (its
   * handler resolved, so the message is acked): a test waits for this to know
   * a command was handled, including one that leaves no trace (a repeat).
   */
  handled(durable: string): number;
  /** Another ingest replica on the same database and bus namespace (own connections on real infra). */
  replica(): Promise<Replica>;
  close(): Promise<void>;
}

export interface Replica {
  handle: ServiceHandle;
  /** Stop gracefully. */
  stop(): Promise<void>;
  /** Cut its connections without a graceful stop (kill -9 as far as this process can play it). */
  crash(): Promise<void>;
}

export const modes = (): ('real' | 'embedded')[] => {
  if (testInfra()) return ['real', 'embedded'];
  console.warn('\n!!! Postgres/NATS missing: ingest tests run on the embedded adapters only !!!\n');
  return ['embedded'];
};

/**
 * Ingest on real Postgres + NATS (`real`) or PGlite + the embedded bus,
 * with its own database and bus namespace. The test plays the scheduler:
 * it consumes `scheduler.cmd.start` and answers its API ops.
 */
export async function startHarness(mode: 'real' | 'embedded', opts: IngestOptions = {}): Promise<Harness> {
  const cfg = loadConfig({ LOG_LEVEL: 'silent' });
  const log = createLogger({ level: (process.env.HARNESS_LOG as 'error') ?? 'silent' });
  const infra = testInfra();
  let closeDb: () => Promise<void>;
  const prefix = uniqueName('ing').replace(/[^A-Za-z0-9_-]/g, '');
  let db: Database;
  let url: string | undefined;
  let embeddedBus: Bus | undefined;
  if (mode === 'real') {
    if (!infra) throw new Error('real Postgres and NATS are required');
    const t = await openTestDb('ingest', { poolSize: 10 });
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
  const ingestOpts: IngestOptions = { pollMs: 50, ...opts };
  const replicas: Replica[] = [];
  const handledBy = new Map<string, number>();
  // The primary's view of the harness's bus: the same connection, its consumers counted.
  const countedBus = countingHandled(bus, handledBy);
  const startReplica = async (d: Database, b: Bus): Promise<Replica> => {
    const handle = await startIngest(cfg, mkInfra(d, b), ingestOpts);
    let gone = false;
    const own = d !== db;
    const r: Replica = {
      handle,
      async stop() {
        if (gone) return;
        gone = true;
        await handle.stop();
        if (b !== bus && b !== countedBus) await b.close();
        if (own) await d.close();
      },
      async crash() {
        if (gone) return;
        gone = true;
        if (!own) {
          // The harness's own connections (or one PGlite and one in-process bus) cannot be cut: played as a stop.
          await handle.stop();
          return;
        }
        await Promise.all([d.close().catch(() => undefined), b.close().catch(() => undefined)]);
        void handle.stop().catch(() => undefined);
      },
    };
    replicas.push(r);
    return r;
  };
  const primary = await startReplica(db, countedBus);

  const ws = uniqueName('ws');
  const starts = new Map<string, Started>();
  const wakeBatches: number[] = [];
  const scheduler: Record<string, ApiHandler> = {
    'waiters.wake': async () => ({ body: { woke: 0 } }),
    // As the scheduler does: each event in order, through whatever `waiters.wake` the test set.
    'waiters.wakeMany': async (call) => {
      const events = (call.body as { events: unknown[] }).events;
      wakeBatches.push(events.length);
      const woke: number[] = [];
      for (const body of events) woke.push(((await scheduler['waiters.wake']!({ ...call, body })).body as { woke: number }).woke);
      return { body: { woke } };
    },
  };
  // Dispatch through the map so a test can swap handlers at any time.
  const api = serveApi(bus, 'scheduler', log, new Proxy({} as Record<string, ApiHandler>, {
    get: (_t, op: string) => scheduler[op],
  }));
  await bus.ensureStream(streams.schedulerCmds);
  const h: Harness = {
    mode, primary, bus, db, ws, starts, deliveries: 0, scheduler, wakeBatches,
    async register(app, workflows, w = ws) {
      const fact = create(WorkflowsRegisteredSchema, {
        workspaceId: w, app, runnerId: 'r1', url: 'http://runner/invoke', registeredAtMs: BigInt(Date.now()),
        workflows: workflows.map((x) => ({ name: x.name as string, config: enc.encode(JSON.stringify(x)) })),
      });
      await bus.publish(subjects.workflowsRegistered, toBinary(WorkflowsRegisteredSchema, fact));
      const last = workflows.at(-1)!;
      await until(async () => {
        const rows = await db.query('select 1 from ingest.workflows where workspace_id = $1 and app = $2 and name = $3 and config = $4::jsonb', [
          w, app, last.name, JSON.stringify(last),
        ]);
        return rows.length === 1;
      }, 10_000, 'registration applied');
    },
    async send(body, o = {}) {
      try {
        const res = await callApi(bus, 'ingest', 'events.ingest', { workspaceId: o.ws ?? ws, actor: 'tester', keyKind: 'secret', requestId: '', suspended: o.suspended }, {
          rawBody: JSON.stringify(body),
        }, 60_000);
        return { status: res.status, body: res.bodyJson ? JSON.parse(res.bodyJson) : undefined };
      } catch (err) {
        const e = err as { status?: number; code?: string; message: string };
        if (e.status) return { status: e.status, body: { error: { code: e.code, message: e.message } } };
        throw err;
      }
    },
    async call(op, payload = {}, w = ws) {
      try {
        const res = await callApi(bus, 'ingest', op, { workspaceId: w, actor: 'tester', keyKind: 'secret', requestId: '' }, payload);
        return { status: res.status, body: res.bodyJson ? JSON.parse(res.bodyJson) : undefined };
      } catch (err) {
        const e = err as { status?: number; code?: string; message: string };
        if (e.status) return { status: e.status, body: { error: { code: e.code, message: e.message } } };
        throw err;
      }
    },
    async suspend(w, suspended) {
      await bus.ensureStream(streams.gatewayFacts);
      await bus.publish(subjects.workspaceUpserted, toBinary(WorkspaceUpsertedSchema, create(WorkspaceUpsertedSchema, { workspaceId: w, name: w, signingKey: 'k', suspended })));
      await until(async () => {
        const rows = await db.query<{ suspended: boolean }>('select suspended from ingest.workspaces where id = $1', [w]);
        return rows[0]?.suspended === suspended;
      }, 10_000, 'suspension applied');
    },
    async waitStarts(pred, timeoutMs = 15_000, what = 'starts') {
      await until(async () => pred([...starts.values()]), timeoutMs, `${what} (have ${starts.size})`);
      return [...starts.values()];
    },
    startsOf(workflow) {
      return [...starts.values()].filter((s) => s.cmd.workflow === workflow);
    },
    handled(durable) {
      return handledBy.get(durable) ?? 0;
    },
    async replica() {
      return startReplica(mode === 'real' ? await openDatabase({ url: url!, poolSize: 5 }) : db, await openBus());
    },
    async close() {
      for (const r of replicas) await r.stop().catch(() => undefined);
      await consumer.stop();
      await api.stop();
      await bus.close();
      await closeDb();
      if (mode === 'real') await deleteNamespace(infra!.natsUrl, prefix);
    },
  };
  const consumer: Subscription = await bus.consume(
    { stream: streams.schedulerCmds.name, durable: 'scheduler-start', filterSubject: subjects.startRun, concurrency: 64 },
    async (msg) => {
      const cmd = fromBinary(StartRunSchema, msg.data);
      h.deliveries++;
      if (!starts.has(cmd.runId)) starts.set(cmd.runId, { cmd, input: cmd.input.length ? JSON.parse(dec.decode(cmd.input)) : null, at: Date.now() });
    },
  );
  return h;
}

/**
 * Every StartRun ingest has published so far: its outbox is drained first,
 * then a fresh ordered reader reads the stream up to a marker published
 * after them, so a duplicate cannot hide behind a slow consumer (the test
 * then filters, e.g. by event id or app).
 */
export async function storedStarts(h: Harness): Promise<StartRun[]> {
  await until(async () => (await h.db.query('select 1 from ingest.outbox limit 1')).length === 0, 20_000, "ingest's outbox to drain");
  const marker = ids.event();
  const seen: StartRun[] = [];
  let reached = false;
  const sub = await h.bus.consume(
    { stream: streams.schedulerCmds.name, durable: uniqueName('count').replace(/[^A-Za-z0-9_-]/g, ''), filterSubject: subjects.startRun, concurrency: 1 },
    async (m) => {
      const cmd = fromBinary(StartRunSchema, m.data);
      if (cmd.eventId === marker) reached = true;
      else seen.push(cmd);
    },
  );
  try {
    // The marker names another workspace: the harness's played scheduler records it there, nowhere a test looks.
    await h.bus.publish(subjects.startRun, toBinary(StartRunSchema, create(StartRunSchema, { workspaceId: uniqueName('marker'), runId: ids.run(), eventId: marker })));
    await until(() => reached, 20_000, 'the marker StartRun');
  } finally {
    await sub.stop();
  }
  return seen;
}

/** How many stored StartRun commands carry each of `eventIds` (see storedStarts). */
export async function startsStored(h: Harness, eventIds: string[]): Promise<Map<string, number>> {
  const all = await storedStarts(h);
  return new Map(eventIds.map((id) => [id, all.filter((c) => c.eventId === id).length]));
}

/** The same bus, counting per durable the deliveries whose handler resolved (see Harness.handled). */
function countingHandled(bus: Bus, counts: Map<string, number>): Bus {
  return new Proxy(bus, {
    get(target, prop) {
      if (prop === 'consume') {
        const consume: Bus['consume'] = (spec, handler) =>
          target.consume(spec, async (msg) => {
            const out = await handler(msg);
            // A retry request is not a finished delivery: the message comes again.
            if (!out) counts.set(spec.durable, (counts.get(spec.durable) ?? 0) + 1);
            return out;
          });
        return consume;
      }
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

export async function until(pred: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
