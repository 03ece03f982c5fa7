import { fileURLToPath } from 'node:url';
import type { Config } from '@dws/config';
import { migrate } from '@dws/db';
import { followRetention, Outbox, Retention, sealKeyringFor, serveApi, streams, subjects, type Infra, type ServiceHandle } from '@dws/runtime';
import { Admission } from './handlers/admission.js';
import { ingestApi, ingestTogetherApi } from './handlers/api.js';
import { consumeEmits } from './handlers/emits.js';
import { Ingestor } from './handlers/ingestor.js';
import { ScheduledEvents } from './handlers/scheduled-events.js';
import { Wakes } from './handlers/wakes.js';
import { receiverApi } from './handlers/receivers.js';
import { schedulesApi } from './handlers/schedules.js';
import { Timers, type TimersOptions } from './handlers/timers.js';
import { WorkflowIndex } from './handlers/workflow-index.js';
import { ingestRetention } from './store/retention.js';

const MIGRATIONS = fileURLToPath(new URL('./store/migrations', import.meta.url));

export type IngestOptions = TimersOptions;

/** Composition root of ingest: the event log, the workflows projection, admission, cron, the due-time buffers and delayed events. */
export async function startIngest(cfg: Config, infra: Infra, opts: IngestOptions = {}): Promise<ServiceHandle> {
  const log = infra.log.child({ service: 'ingest' });
  const { db, bus } = infra;
  await migrate(db, { schema: 'ingest', migrationsDir: MIGRATIONS, log });
  await bus.ensureStream(streams.schedulerCmds);
  await bus.ensureStream(streams.invokerFacts);
  await bus.ensureStream(streams.gatewayFacts);
  await bus.ensureStream(streams.ingestCmds);
  // StartRuns go straight to a scheduler replica when one answers; the stream otherwise.
  const outbox = new Outbox({ db, bus, schema: 'ingest', log, direct: { [subjects.startRun]: subjects.startRunNow } });
  outbox.start();
  const admission = new Admission({ db, bus, log });
  const armed = () => timers.kick();
  const scheduled = new ScheduledEvents({ db, log, onArmed: armed });
  const index = new WorkflowIndex(db, log);
  const ingestor = new Ingestor({ db, bus, log, outbox, index, admission, wakes: new Wakes({ bus, log }), scheduled, onArmed: armed });
  const timers = new Timers({ db, log, outbox, admission, takeInDelayed: () => scheduled.takeInDue((caller, items) => ingestor.ingest(caller, items)) }, opts);
  timers.start();
  const facts = await index.follow(bus, armed);
  const workspaces = await index.followWorkspaces(bus);
  const emits = await consumeEmits(bus, ingestor);
  // Events and receiver deliveries past each workspace's window go, in small batches, on every replica (docs/retention.md).
  const retentionFacts = await followRetention({ bus, db, schema: 'ingest', durable: 'ingest-retention' });
  const retention = new Retention({ db, log, schema: 'ingest', targets: ingestRetention });
  retention.start();
  const api = serveApi(bus, 'ingest', log, {
    ...ingestApi({ db, ingestor }),
    ...receiverApi({ db, ingestor, log, seal: sealKeyringFor(cfg) }),
    ...schedulesApi({ db, onArmed: armed }),
  }, ingestTogetherApi({ ingestor }));
  return {
    name: 'ingest',
    ready: async () => true,
    async stop() {
      await retention.stop();
      await retentionFacts.stop();
      await api.stop();
      await timers.stop();
      await Promise.all(facts.map((f) => f.stop()));
      await workspaces.stop();
      await emits.stop();
      await outbox.stop();
    },
  };
}
