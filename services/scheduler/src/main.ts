import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Config } from '@dws/config';
import { migrate } from '@dws/db';
import { Outbox, serveApi, streams, type Infra, type ServiceHandle } from '@dws/runtime';
import { Engine } from './engine/engine.js';
import { WorkflowConfigs } from './engine/workflow-configs.js';
import { consumeDeferredWakes, consumeStartRuns, consumeWorkflowFacts } from './handlers/commands.js';
import { schedulerApi } from './handlers/api.js';
import { controlApi } from './handlers/control-api.js';
import { releaseAllLeases } from './store/runs.js';

const MIGRATIONS = fileURLToPath(new URL('./store/migrations', import.meta.url));

/** Composition root of the scheduler: the run state machine, its timers and its reads. */
export async function startScheduler(cfg: Config, infra: Infra): Promise<ServiceHandle> {
  const log = infra.log.child({ service: 'scheduler' });
  const { db, bus } = infra;
  await migrate(db, { schema: 'scheduler', migrationsDir: MIGRATIONS });
  await bus.ensureStream(streams.schedulerCmds);
  await bus.ensureStream(streams.invokerFacts);
  for (const s of [streams.ingestCmds, streams.dispatcherCmds, streams.approvalsCmds, streams.invokerCmds, streams.schedulerFacts]) await bus.ensureStream(s);
  // PGlite admits one process per data directory, so a previous process's leases are void at once.
  if (db.kind === 'pglite') await releaseAllLeases(db);

  const owner = `scheduler-${randomUUID()}`;
  const workflows = new WorkflowConfigs(db);
  const outbox = new Outbox({ db, bus, schema: 'scheduler', log });
  outbox.start();
  const engine = new Engine({ db, bus, log, outbox, owner, leaseMs: cfg.SERVICE_RUN_LEASE_MS, maxConcurrent: cfg.SERVICE_MAX_ACTIVE_RUNS, invokeTimeoutMs: cfg.SERVICE_INVOKE_TIMEOUT_MS, workflows });
  const facts = await consumeWorkflowFacts({ bus, workflows });
  const starts = await consumeStartRuns({ bus, db, engine, outbox, owner, leaseMs: cfg.SERVICE_RUN_LEASE_MS });
  engine.start();
  const reads = schedulerApi(db);
  const control = controlApi({
    db,
    log,
    nudge: () => engine.nudge(),
    outbox,
    // The record a control action returns is the one GET /runs/{id} reads.
    runRecord: async (workspaceId, id) =>
      (await reads['runs.get']!({ caller: { workspaceId, actor: '', keyKind: '', requestId: '' }, params: { id }, query: {}, body: undefined }))
        .body as Record<string, unknown>,
  });
  const api = serveApi(bus, 'scheduler', log, { ...reads, ...control });
  const wakes = await consumeDeferredWakes({ bus, wake: control['waiters.wake']! });

  return {
    name: 'scheduler',
    ready: async () => true,
    async stop() {
      await api.stop();
      await starts.stop();
      await wakes.stop();
      await facts.stop();
      await engine.stop();
      await outbox.stop();
    },
  };
}
