import { fileURLToPath } from 'node:url';
import type { Config } from '@dws/config';
import { migrate } from '@dws/db';
import { followRetention, gauge, Retention, sealKeyringFor, serveApi, streams, type Infra, type ServiceHandle } from '@dws/runtime';
import { dispatcherApi } from './handlers/api.js';
import { consumeSends } from './handlers/commands.js';
import { consumeLifecycle } from './handlers/lifecycle.js';
import { Sender, type SenderOptions } from './handlers/sender.js';
import { dispatcherRetention } from './store/retention.js';

const MIGRATIONS = fileURLToPath(new URL('./store/migrations', import.meta.url));

export type WebhookDispatcherOptions = SenderOptions;

/**
 * Composition root of the webhook dispatcher: endpoints, lifecycle
 * deliveries (from the scheduler's facts) and custom sends (its commands),
 * durable sending with retries and a per-attempt log, and the reads.
 */
export async function startWebhookDispatcher(cfg: Config, infra: Infra, opts: WebhookDispatcherOptions = {}): Promise<ServiceHandle> {
  const log = infra.log.child({ service: 'webhook-dispatcher' });
  const { db, bus } = infra;
  await migrate(db, { schema: 'webhook_dispatcher', migrationsDir: MIGRATIONS, log });
  for (const s of [streams.dispatcherCmds, streams.schedulerFacts, streams.gatewayFacts]) await bus.ensureStream(s);
  const secrets = sealKeyringFor(cfg);
  const allowPrivate = cfg.SERVICE_WEBHOOK_ALLOW_PRIVATE === 'on';
  const sender = new Sender({ db, log, secrets, allowPrivate }, opts);
  sender.start();
  const kick = () => sender.kick();
  const sends = await consumeSends(bus, db, kick);
  const lifecycle = await consumeLifecycle(bus, db, kick);
  // Finished deliveries past each workspace's window go with their attempts, in small batches, on every replica (docs/retention.md).
  const retentionFacts = await followRetention({ bus, db, schema: 'webhook_dispatcher', durable: 'webhook-dispatcher-retention' });
  const retention = new Retention({ db, log, schema: 'webhook_dispatcher', targets: dispatcherRetention });
  retention.start();
  gauge('dws_webhook_deliveries', 'Outbound deliveries by status (pending, delivering, succeeded, failed, exhausted, dead), read when scraped.', async () =>
    (await db.query<{ status: string; n: number }>('select status, count(*)::int as n from webhook_dispatcher.deliveries group by status')).map((r) => ({
      labels: { status: r.status },
      value: Number(r.n),
    })),
  );
  const api = serveApi(bus, 'webhook-dispatcher', log, dispatcherApi({ db, secrets, allowPrivate, onQueued: kick }));
  return {
    name: 'webhook-dispatcher',
    ready: async () => true,
    async stop() {
      await retention.stop();
      await retentionFacts.stop();
      await api.stop();
      await sends.stop();
      for (const s of lifecycle) await s.stop();
      await sender.stop();
    },
  };
}
