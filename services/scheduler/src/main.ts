import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Config } from '@dws/config';
import { migrate } from '@dws/db';
import { followRetention, gauge, Outbox, Retention, RunnerHttp, sealKeyFor, serveApi, streams, type Infra, type ServiceHandle } from '@dws/runtime';
import { Engine } from './engine/engine.js';
import { WorkflowConfigs } from './engine/workflow-configs.js';
import { DirectRoutes } from './engine/direct-routes.js';
import {
  consumeApiCommands,
  consumeApprovalsListed,
  consumeResolves,
  consumeStartRuns,
  consumeWorkflowFacts,
  serveDirectStarts,
} from './handlers/commands.js';
import { schedulerApi } from './handlers/api.js';
import { controlActions, controlApi, type ControlDeps } from './handlers/control-api.js';
import { RunTimeouts } from './engine/run-timeouts.js';
import { publishFrames } from './engine/live.js';
import { checkpointApi, replicaService } from './handlers/checkpoint-api.js';
import { CHECKPOINT_SOCKET_PATH, checkpointSocket } from './handlers/checkpoint-socket.js';
import { CheckpointTokens } from './domain/checkpoint-token.js';
import { releaseAllLeases } from './store/runs.js';
import { schedulerRetention } from './store/retention.js';
import { saveModelCeilings } from './store/ai-spend.js';

const MIGRATIONS = fileURLToPath(new URL('./store/migrations', import.meta.url));

/** Composition root of the scheduler: the run state machine, its timers and its reads. */
export interface SchedulerOptions {
  /** The longest the claim loop sleeps (tests set a long one to show it is woken). @default 2000 */
  claimPollMs?: number;
}

export async function startScheduler(cfg: Config, infra: Infra, opts: SchedulerOptions = {}): Promise<ServiceHandle> {
  const log = infra.log.child({ service: 'scheduler' });
  const { db, bus } = infra;
  await migrate(db, { schema: 'scheduler', migrationsDir: MIGRATIONS, log });
  await bus.ensureStream(streams.schedulerCmds);
  await bus.ensureStream(streams.invokerFacts);
  for (const s of [streams.ingestCmds, streams.dispatcherCmds, streams.approvalsCmds, streams.invokerCmds, streams.schedulerFacts, streams.gatewayFacts]) await bus.ensureStream(s);
  // PGlite admits one process per data directory, so a previous process's leases are void at once.
  if (db.kind === 'pglite') await releaseAllLeases(db);

  const owner = `scheduler-${randomUUID()}`;
  const workflows = new WorkflowConfigs(db);
  const outbox = new Outbox({ db, bus, schema: 'scheduler', log });
  outbox.start();
  // Passes to serve runners skip the invoker's hop; the invoker says where (DirectRoutes).
  const http = new RunnerHttp(cfg.SERVICE_INVOKE_TIMEOUT_MS);
  const direct = { routes: new DirectRoutes(bus, sealKeyFor(cfg), log), http };
  const tokens = new CheckpointTokens(owner);
  const base = cfg.SERVICE_SCHEDULER_URL?.replace(/\/+$/, '');
  const engine = new Engine({
    db, bus, log, outbox, owner, workflows, direct, tokens,
    ...(base ? { checkpointBaseUrl: base, checkpointSocket: `${base.replace(/^http/, 'ws')}${CHECKPOINT_SOCKET_PATH}` } : {}),
    leaseMs: cfg.SERVICE_RUN_LEASE_MS,
    maxConcurrent: cfg.SERVICE_MAX_ACTIVE_RUNS,
    invokeTimeoutMs: cfg.SERVICE_INVOKE_TIMEOUT_MS,
    ...(opts.claimPollMs ? { pollMs: opts.claimPollMs } : {}),
  });
  const reads = schedulerApi(db);
  const controlDeps: ControlDeps = {
    db,
    log,
    nudge: () => engine.nudge(),
    outbox,
    live: (run, frames) => publishFrames(bus, run, frames),
    // The record a control action returns is the one GET /runs/{id} reads.
    runRecord: async (workspaceId, id) =>
      (await reads['runs.get']!({ caller: { workspaceId, actor: '', keyKind: '', requestId: '' }, params: { id }, query: {}, body: undefined, headers: {} }))
        .body as Record<string, unknown>,
  };
  // Workflow timeouts cancel runs past them, on every replica.
  const timeouts = new RunTimeouts({ db, log, cancel: controlActions(controlDeps).cancel });
  timeouts.start();
  const facts = await consumeWorkflowFacts({ bus, workflows });
  const startDeps = { bus, db, engine, outbox, onTimed: (ms: number) => timeouts.within(ms) };
  const starts = await consumeStartRuns(startDeps);
  const directStarts = serveDirectStarts(startDeps);
  engine.start();
  gauge('dws_scheduler_held_runs', 'Runs this replica is driving now.', () => (cfg.SERVICE_MAX_ACTIVE_RUNS - engine.capacity));
  // Runs not yet ended, by status, sampled from the scheduler's own table when scraped.
  gauge('dws_scheduler_runs', 'Runs not yet ended, by status (queued, running, waiting, paused).', async () =>
    (await db.query<{ status: string; n: number }>(`select status, count(*)::int as n from scheduler.runs where status in ('queued', 'running', 'waiting', 'paused') group by status`)).map(
      (r) => ({ labels: { status: r.status }, value: Number(r.n) }),
    ),
  );
  // Runs whose time has come (sleeps over, backoffs done, leases lapsed) and no replica holds yet: a backlog when it stays high.
  gauge('dws_scheduler_timers_due', 'Runs due now that no replica has claimed yet.', async () =>
    Number((await db.query<{ n: number }>(`select count(*)::int as n from scheduler.runs where status in ('queued', 'running', 'waiting') and lease_until <= now()`))[0]?.n ?? 0),
  );
  const control = controlApi(controlDeps);
  const checkpoints = checkpointApi({ bus, engine, tokens });
  const checkpointSockets = checkpointSocket({ direct: checkpoints.direct, log });
  const api = serveApi(bus, 'scheduler', log, { ...reads, ...control, ...checkpoints.bus });
  // Checkpoints relayed by another replica to the one driving the pass.
  const replicaApi = serveApi(bus, replicaService(owner), log, { ...checkpoints.bus, ...checkpoints.relayed });
  const commands = await consumeApiCommands({ bus, log, handlers: { 'waiters.wake': control['waiters.wake']!, 'runs.cancelOn': control['runs.cancelOn']! } });
  const resolves = await consumeResolves({ bus, db, nudge: () => engine.nudge() });
  const listed = await consumeApprovalsListed({ bus, db });
  // Ended runs and audit rows past each workspace's window go, in small batches, on every replica (docs/retention.md).
  // The same consumer keeps the monthly model ceilings a pass with a model call checks.
  const retentionFacts = await followRetention({
    bus,
    db,
    schema: 'scheduler',
    durable: 'scheduler-retention',
    also: (fact) => saveModelCeilings(db, fact.workspaceId, fact.modelTokensPerMonth, fact.modelCostPerMonth),
  });
  const retention = new Retention({ db, log, schema: 'scheduler', targets: schedulerRetention });
  retention.start();

  return {
    name: 'scheduler',
    ready: async () => true,
    routes: checkpoints.routes,
    upgrade: checkpointSockets.upgrade,
    async stop() {
      await timeouts.stop();
      await retention.stop();
      await retentionFacts.stop();
      await api.stop();
      await replicaApi.stop();
      await directStarts.stop();
      await starts.stop();
      await commands.stop();
      await resolves.stop();
      await listed.stop();
      await Promise.all(facts.map((f) => f.stop()));
      await engine.stop();
      await checkpointSockets.close();
      await http.close();
      await outbox.stop();
    },
  };
}
