import { fileURLToPath } from 'node:url';
import type { Config } from '@dws/config';
import { migrate } from '@dws/db';
import type { Infra, ServiceHandle } from '@dws/runtime';

const MIGRATIONS = fileURLToPath(new URL('./store/migrations', import.meta.url));

/**
 * Composition root of the approvals service. It owns its schema from the
 * start; its API and consumers arrive with their issues.
 */
export async function startApprovals(_cfg: Config, infra: Infra): Promise<ServiceHandle> {
  await migrate(infra.db, { schema: 'approvals', migrationsDir: MIGRATIONS });
  return {
    name: 'approvals',
    ready: async () => true,
    async stop() {},
  };
}
