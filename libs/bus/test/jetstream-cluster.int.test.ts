import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { freePort, startNatsServer, testInfra, type NatsServer } from '@dws/testing';
import { connectJetStreamBus, type Bus } from '../src/index.js';

/**
 * SERVICE_BUS_REPLICAS on a three-node JetStream cluster of the machine's
 * nats-server (its own ports and stores): streams are made, or scaled, to
 * three copies, and the bus keeps taking and delivering messages with one
 * server gone. On a single server more than one copy is refused, naming why.
 */
const maybe = testInfra() ? describe : describe.skip;

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

maybe('jetstream bus on a three-node cluster (SERVICE_BUS_REPLICAS)', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'dws-nats-cluster-'));
  const servers: NatsServer[] = [];
  let urls = '';
  beforeAll(async () => {
    const ports = [await freePort(), await freePort(), await freePort()];
    const routes = [await freePort(), await freePort(), await freePort()];
    for (let i = 0; i < 3; i++) {
      servers.push(
        await startNatsServer({
          port: ports[i],
          storeDir: path.join(dir, `n${i}`),
          cluster: { name: 'dws-test', serverName: `n${i}`, port: routes[i]!, routes: routes.filter((_, j) => j !== i) },
        }),
      );
    }
    urls = servers.map((s) => s.url).join(',');
    // JetStream answers once the three have elected a meta leader.
    const nc = await connect({ servers: urls.split(',') });
    try {
      await until('a JetStream meta leader', async () => (await (await jetstreamManager(nc)).getAccountInfo()) ?? undefined);
    } finally {
      await nc.close();
    }
  }, 60_000);
  afterAll(async () => {
    for (const s of servers) await s.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps three copies of each stream and spill store, scales one made with one, and goes on with a server gone', async () => {
    const single = await connectJetStreamBus({ servers: urls, name: 'cluster-r1' });
    const bus: Bus = await connectJetStreamBus({ servers: urls, name: 'cluster-r3', replicas: 3 });
    const nc = await connect({ servers: urls.split(',') });
    try {
      const jsm = await jetstreamManager(nc);
      // Made with one copy (an earlier deploy), then asked for with three.
      await until('the stream made with one copy', async () => (await single.ensureStream({ name: 'CLUSTER_A', subjects: ['clustera.>'] }), true));
      expect((await jsm.streams.info('CLUSTER_A')).config.num_replicas).toBe(1);
      await until('the stream scaled', async () => (await bus.ensureStream({ name: 'CLUSTER_A', subjects: ['clustera.>'] }), true));
      await bus.ensureStream({ name: 'CLUSTER_B', subjects: ['clusterb.>'] });
      for (const name of ['CLUSTER_A', 'CLUSTER_B']) {
        const info = await until(`${name} on three servers`, async () => {
          const i = await jsm.streams.info(name);
          return i.config.num_replicas === 3 && (i.cluster?.replicas?.length ?? 0) === 2 ? i : undefined;
        });
        expect(info.config.num_replicas).toBe(3);
      }

      // A payload past max_payload goes through a spill store; one made with one copy is scaled too.
      const big = new Uint8Array(2 * 1024 * 1024).fill(7);
      await until('a spilled publish with one copy', async () => (await single.publish('clustera.big', big), true));
      expect((await jsm.streams.info('OBJ_DWS_SPILL')).config.num_replicas).toBe(1);
      await until('a spilled publish with three', async () => (await bus.publish('clustera.big', big), true));
      expect((await jsm.streams.info('OBJ_DWS_SPILL')).config.num_replicas).toBe(3);

      const got: string[] = [];
      const dec = new TextDecoder();
      const sub = await bus.consume({ stream: 'CLUSTER_B', durable: 'reader' }, async (m) => void got.push(dec.decode(m.data)));
      await bus.publish('clusterb.x', new TextEncoder().encode('before'));
      await until('the message before', async () => (got.includes('before') ? true : undefined));

      // One server gone (the stream's leader, the hardest case): the other two keep a quorum.
      const leader = (await jsm.streams.info('CLUSTER_B')).cluster?.leader;
      await servers[Number(leader?.slice(1) ?? 0)]!.kill();
      await until('a publish with a server gone', async () => (await bus.publish('clusterb.x', new TextEncoder().encode('after')), true), 45_000);
      await until('the message after', async () => (got.includes('after') ? true : undefined), 45_000);
      expect(got.filter((g) => g === 'before')).toHaveLength(1);
      await sub.stop();
    } finally {
      await nc.close();
      await bus.close();
      await single.close();
    }
  }, 120_000);
});

maybe('jetstream bus on a single server with SERVICE_BUS_REPLICAS above 1', () => {
  it('is refused, naming what it needs', async () => {
    const url = process.env.TEST_NATS_URL || 'nats://127.0.0.1:4222';
    const bus = await connectJetStreamBus({ servers: url, name: 'single-r3', replicas: 3 });
    const name = `R3_${Math.random().toString(36).slice(2, 10)}`.toUpperCase();
    try {
      await expect(bus.ensureStream({ name, subjects: [`${name.toLowerCase()}.>`] })).rejects.toThrow(
        `stream ${name}: 3 replicas need a NATS cluster with JetStream on at least 3 servers`,
      );
    } finally {
      await bus.close();
      // Nothing left behind should a server take it after all.
      const nc = await connect({ servers: url });
      await (await jetstreamManager(nc)).streams.delete(name).catch(() => false);
      await nc.close();
    }
  });
});
