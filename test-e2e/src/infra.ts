import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { deleteNamespace } from '@dws/bus';

export interface RealInfra {
  databaseUrl: string;
  natsUrl: string;
}

/** Postgres + NATS for this run, as the jest global setup found them; undefined when absent. */
export function realInfra(): RealInfra | undefined {
  const databaseUrl = process.env.TEST_DATABASE_URL;
  const natsUrl = process.env.TEST_NATS_URL;
  return databaseUrl && natsUrl ? { databaseUrl, natsUrl } : undefined;
}

/** A fresh database on the real Postgres, dropped by the returned cleanup. */
export async function freshDatabase(adminUrl: string, prefix: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `e2e_${prefix}_${randomBytes(4).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const a = postgres(adminUrl, { max: 1, onnotice: () => {} });
      await a.unsafe(`drop database if exists ${name} with (force)`);
      await a.end();
    },
  };
}

export const uniquePrefix = (p: string): string => `${p}${randomBytes(3).toString('hex')}`;

/**
 * A bus namespace of its own on the real NATS (its SERVICE_BUS_PREFIX), whose
 * streams the returned cleanup deletes once its processes stopped: they would
 * stay on the shared nats-server. A server that is down by then (a chaos
 * run's) costs a warning, not the rest of the cleanup.
 */
export function freshNamespace(natsUrl: string, prefix = 'e2e'): { prefix: string; drop(): Promise<void> } {
  const name = uniquePrefix(prefix);
  return {
    prefix: name,
    drop: () =>
      deleteNamespace(natsUrl, name).then(
        () => undefined,
        (err: unknown) => void process.stderr.write(`deleting bus namespace ${name} failed: ${String(err)}\n`),
      ),
  };
}
