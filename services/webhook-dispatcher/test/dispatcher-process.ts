/**
 * The webhook dispatcher in a process of its own, for the kill -9 test
 * (crash.int.test.ts): the test SIGKILLs it mid-delivery.
 * Usage: node --import tsx dispatcher-process.ts <db-url> <nats-url> <bus-prefix> <lease-ms>
 * Prints `ready` once it serves.
 */
import { connectJetStreamBus, prefixedBus } from '@dws/bus';
import { loadConfig } from '@dws/config';
import { openDatabase } from '@dws/db';
import { createLogger } from '@dws/log';
import { startWebhookDispatcher } from '../src/main.js';

const [dbUrl, natsUrl, prefix, leaseMs] = process.argv.slice(2);
if (!dbUrl || !natsUrl || !prefix || !leaseMs) throw new Error('usage: dispatcher-process.ts <db-url> <nats-url> <bus-prefix> <lease-ms>');
const db = await openDatabase({ url: dbUrl });
const bus = prefixedBus(await connectJetStreamBus({ servers: natsUrl, name: 'doomed-dispatcher' }), prefix);
await startWebhookDispatcher(loadConfig({ SERVICE_WEBHOOK_ALLOW_PRIVATE: 'on' }), { db, bus, log: createLogger({ level: 'silent' }), mode: { db: db.kind, bus: bus.kind }, close: async () => {} }, { leaseMs: Number(leaseMs), pollMs: 50 });
if (!(await bus.healthy())) throw new Error('NATS connection unhealthy');
process.stdout.write('ready\n');
