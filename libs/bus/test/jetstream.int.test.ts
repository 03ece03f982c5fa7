import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from '@jest/globals';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { connectJetStreamBus } from '../src/index.js';
import { runBusContract, type DoomedResponder } from './bus-contract.js';

// TEST_NATS_URL is what the int project's globalSetup found (or started).
const url = process.env.TEST_NATS_URL || process.env.NATS_URL || 'nats://127.0.0.1:4222';
const ci = !!process.env.CI && process.env.CI !== '0' && process.env.CI.toLowerCase() !== 'false';

async function reachable(): Promise<boolean> {
  try {
    const nc = await connect({ servers: url, timeout: 2000, reconnect: false });
    await nc.close();
    return true;
  } catch {
    return false;
  }
}

/** Delete the suite's streams, the DLQ readers it created and its dead letters. */
async function cleanup(created: { streams: string[]; dlqReaders: string[] }): Promise<void> {
  const nc = await connect({ servers: url });
  try {
    const jsm = await jetstreamManager(nc);
    for (const s of created.streams) {
      await jsm.streams.delete(s).catch(() => false);
      await jsm.streams.purge('DLQ', { filter: `dlq.${s}.>` }).catch(() => undefined);
    }
    for (const d of created.dlqReaders) await jsm.consumers.delete('DLQ', d).catch(() => false);
  } finally {
    await nc.close();
  }
}

const here = path.dirname(fileURLToPath(import.meta.url));

/** responder-process.ts in a child process (via tsx), killed with SIGKILL when the test says. */
async function separateResponder(subject: string): Promise<DoomedResponder> {
  const tsx = createRequire(import.meta.url).resolve('tsx');
  const child = spawn(process.execPath, ['--import', tsx, path.join(here, 'responder-process.ts'), url, subject], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const seen = (line: string) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (out.split('\n').includes(line)) resolve();
      };
      child.stdout.on('data', check);
      child.once('exit', (code, signal) => reject(new Error(`responder process exited (${code ?? signal}) before '${line}':\n${out}`)));
      check();
    });
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const handling = seen('handling');
  handling.catch(() => undefined);
  await seen('ready');
  return { handling, kill: () => void child.kill('SIGKILL') };
}

if (await reachable()) {
  runBusContract('jetstream', () => connectJetStreamBus({ servers: url, name: 'bus-contract' }), { cleanup, separateResponder });
} else if (ci) {
  describe('jetstream bus', () => {
    it('reaches NATS', () => {
      throw new Error(`NATS (JetStream) unreachable at ${url}; CI must not skip this suite`);
    });
  });
} else {
   
  console.warn(`\n!!! NATS unreachable at ${url}: the JetStream bus contract is SKIPPED !!!\n`);
  describe.skip('Bus contract: jetstream (NATS unreachable)', () => {
    it('needs NATS', () => undefined);
  });
}
