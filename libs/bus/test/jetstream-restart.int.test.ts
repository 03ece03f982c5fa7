import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { freePort, startNatsServer, type NatsServer } from '@dws/testing';
import { connectJetStreamBus, type Bus } from '../src/index.js';

// A nats-server of this file's own: the test kills it.
describe('jetstream bus: a nats-server restart while a service starts', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'dws-bus-restart-'));
  let server: NatsServer | undefined;
  let bus: Bus | undefined;
  let port = 0;
  const start = async () => {
    server = await startNatsServer({ port, storeDir: dir });
  };
  const kill = async () => server?.kill();
  afterAll(async () => {
    await bus?.close();
    await kill();
    rmSync(dir, { recursive: true, force: true });
  });

  // The chaos run's invoker, restarted just before nats-server crashed, lost its stream create's
  // request with the connection, timed out after 5 s and exited: creates are idempotent, so retry.
  it('creates its stream and durable once the server is back, past the API timeout', async () => {
    port = await freePort();
    await start();
    const warned: string[] = [];
    bus = await connectJetStreamBus({ servers: `nats://127.0.0.1:${port}`, log: { warn: (_o, msg) => warned.push(msg) } });
    await kill();

    const ensured = bus.ensureStream({ name: 'RESTART', subjects: ['restart.>'] });
    const settled = ensured.then(
      () => 'created',
      (err: unknown) => `failed: ${(err as Error).message}`,
    );
    // Longer than nats.js's 5 s API timeout: without retries the create has failed by now.
    await new Promise((r) => setTimeout(r, 6_500));
    await start();
    expect(await settled).toBe('created');
    expect(warned).toContain('JetStream did not answer; retrying');

    const got: string[] = [];
    await bus.consume({ stream: 'RESTART', durable: 'after', filterSubject: 'restart.>' }, async (m) => {
      got.push(new TextDecoder().decode(m.data));
    });
    await bus.publish('restart.one', new TextEncoder().encode('hello'));
    const deadline = Date.now() + 5_000;
    while (got.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(got).toEqual(['hello']);
  }, 40_000);
});
