/**
 * A JetStream responder in a process of its own, for the liveness contract
 * (bus-contract.ts): its handler never ends, and the test SIGKILLs the
 * process mid-handler, as a crashed service would die.
 * Usage: node --import tsx responder-process.ts <nats-url> <subject>
 * Prints `ready` once it listens and `handling` when a request arrives.
 */
import { connectJetStreamBus } from '../src/index.js';

const [url, subject] = process.argv.slice(2);
if (!url || !subject) throw new Error('usage: responder-process.ts <nats-url> <subject>');
const bus = await connectJetStreamBus({ servers: url, name: 'bus-contract-doomed' });
bus.respond(subject, 'svc', () => {
  process.stdout.write('handling\n');
  return new Promise<Uint8Array>(() => undefined);
});
// healthy() flushes: the subscription is on the server before the test sends.
if (!(await bus.healthy())) throw new Error('NATS connection unhealthy');
process.stdout.write('ready\n');
