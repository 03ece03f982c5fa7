import { fileURLToPath } from 'node:url';
import type { Config } from '@dws/config';
import { migrate } from '@dws/db';
import { streams, type Infra, type ServiceHandle } from '@dws/runtime';
import { consumeSends } from './handlers/commands.js';
import { Sender } from './handlers/sender.js';

const MIGRATIONS = fileURLToPath(new URL('./store/migrations', import.meta.url));

/**
 * Composition root of the webhook dispatcher: durable outbound deliveries
 * with retries and a per-attempt log. Endpoint CRUD, lifecycle subscriptions
 * and the delivery reads arrive with the webhooks issue.
 */
export async function startWebhookDispatcher(_cfg: Config, infra: Infra): Promise<ServiceHandle> {
  const log = infra.log.child({ service: 'webhook-dispatcher' });
  await migrate(infra.db, { schema: 'webhook_dispatcher', migrationsDir: MIGRATIONS });
  await infra.bus.ensureStream(streams.dispatcherCmds);
  const sender = new Sender({ db: infra.db, log });
  sender.start();
  const sends = await consumeSends(infra.bus, infra.db, () => sender.kick());
  return {
    name: 'webhook-dispatcher',
    ready: async () => true,
    async stop() {
      await sends.stop();
      await sender.stop();
    },
  };
}
