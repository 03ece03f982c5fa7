import path from 'node:path';
import { mkdirSync } from 'node:fs';
import type { Bus } from '@dws/bus';
import { connectJetStreamBus, createEmbeddedBus, createSqlBusStore, prefixedBus } from '@dws/bus';
import type { Database } from '@dws/db';
import { openDatabase } from '@dws/db';
import type { Config } from '@dws/config';
import type { Logger } from '@dws/log';
import { deriveKey, SealKeyring } from '@dws/protocol';
import { untilReachable } from './until-reachable.js';

/** How long a standalone service waits at start for Postgres and nats-server before it exits. */
const REACH_TIMEOUT_MS = 60_000;

/** What every service's composition root is handed: storage, bus, logger. */
export interface Infra {
  readonly db: Database;
  readonly bus: Bus;
  readonly log: Logger;
  /** What runs underneath, for the start banner and /readyz. */
  readonly mode: { db: Database['kind']; bus: Bus['kind'] };
  close(): Promise<void>;
}

/**
 * Open storage and bus for a process. `pnpm dev` may run embedded (PGlite
 * under SERVICE_DATA_DIR, in-process bus persisted in the same database);
 * a standalone service requires DATABASE_URL and NATS_URL, and waits up to
 * a minute for them to answer.
 */
export async function openInfra(cfg: Config, log: Logger, opts: { standalone: boolean; name: string }): Promise<Infra> {
  if (opts.standalone && (!cfg.DATABASE_URL || !cfg.NATS_URL)) {
    throw new Error(`${opts.name}: a standalone service needs DATABASE_URL and NATS_URL (use \`pnpm dev\` for the embedded mode)`);
  }
  const reach = { timeoutMs: REACH_TIMEOUT_MS, warn: log.warn.bind(log) };
  let db: Database;
  if (cfg.DATABASE_URL) {
    db = await openDatabase({ url: cfg.DATABASE_URL });
    try {
      await untilReachable('postgres', () => db.query('select 1'), reach);
    } catch (err) {
      await db.close();
      throw err;
    }
  } else {
    const dir = path.resolve(cfg.SERVICE_DATA_DIR, 'pg');
    mkdirSync(dir, { recursive: true });
    db = await openDatabase({ dataDir: dir });
  }
  let bus: Bus;
  try {
    bus = cfg.NATS_URL
      ? prefixedBus(
          await untilReachable('nats-server', () => connectJetStreamBus({ servers: cfg.NATS_URL!, name: opts.name, log, replicas: cfg.SERVICE_BUS_REPLICAS }), reach),
          cfg.SERVICE_BUS_PREFIX,
        )
      : // The embedded bus keeps its streams in the same database, so kill -9 loses no message.
        await createEmbeddedBus({ store: createSqlBusStore(db) });
  } catch (err) {
    await db.close();
    throw err;
  }
  return {
    db,
    bus,
    log,
    mode: { db: db.kind, bus: bus.kind },
    async close() {
      await bus.close();
      await db.close();
    },
  };
}

/**
 * The key that seals secrets at rest (signing keys, endpoint secrets).
 * Without SERVICE_SEAL_KEY a fixed development key is used: fine for
 * `pnpm dev`, not for production (the start banner says so).
 */
export function sealKeyFor(cfg: Config): Buffer {
  return deriveKey(cfg.SERVICE_SEAL_KEY ?? 'dws-development-seal-key');
}

/** The current seal key and the earlier ones of SERVICE_SEAL_KEYS_PREVIOUS (rotation). */
export function sealKeyringFor(cfg: Config): SealKeyring {
  const previous = (cfg.SERVICE_SEAL_KEYS_PREVIOUS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  return new SealKeyring(sealKeyFor(cfg), previous.map(deriveKey));
}
