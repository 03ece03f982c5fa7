import { fileURLToPath } from 'node:url';
import type { Config } from '@dws/config';
import { migrate } from '@dws/db';
import { followRetention, Outbox, Retention, serveApi, streams, type Infra, type ServiceHandle } from '@dws/runtime';
import { approvalsApi } from './handlers/api.js';
import { consumeHandoffs } from './handlers/handoffs.js';
import { consumeRunEnds } from './handlers/run-ends.js';
import { Timers, type TimersOptions } from './handlers/timers.js';
import { approvalsRetention } from './store/retention.js';

const MIGRATIONS = fileURLToPath(new URL('./store/migrations', import.meta.url));

export type ApprovalsOptions = TimersOptions;

/**
 * Composition root of the approvals service: approval records, the gate,
 * decisions, timeouts, and the ResolveStep that resumes the parked run
 * (written to the outbox in the transaction that decided).
 */
export async function startApprovals(_cfg: Config, infra: Infra, opts: ApprovalsOptions = {}): Promise<ServiceHandle> {
  const log = infra.log.child({ service: 'approvals' });
  const { db, bus } = infra;
  await migrate(db, { schema: 'approvals', migrationsDir: MIGRATIONS, log });
  for (const s of [streams.approvalsCmds, streams.schedulerCmds, streams.schedulerFacts, streams.gatewayFacts]) await bus.ensureStream(s);
  const outbox = new Outbox({ db, bus, schema: 'approvals', log });
  outbox.start();
  const timers = new Timers({ db, log, outbox }, opts);
  timers.start();
  const handoffs = await consumeHandoffs({ bus, db, log, outbox, onArmed: () => timers.kick() });
  const runEnds = await consumeRunEnds({ bus, db });
  // Closed approvals past each workspace's window go, in small batches, on every replica (docs/retention.md).
  const retentionFacts = await followRetention({ bus, db, schema: 'approvals', durable: 'approvals-retention' });
  const retention = new Retention({ db, log, schema: 'approvals', targets: approvalsRetention });
  retention.start();
  const api = serveApi(bus, 'approvals', log, approvalsApi({ db, outbox }));
  return {
    name: 'approvals',
    ready: async () => true,
    async stop() {
      await retention.stop();
      await retentionFacts.stop();
      await api.stop();
      await handoffs.stop();
      await runEnds.stop();
      await timers.stop();
      await outbox.stop();
    },
  };
}
