import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { loadConfig } from '@dws/config';
import type { Logger } from '@dws/log';
import { freePort, startNatsServer, testDatabaseUrl, type NatsServer } from '@dws/testing';
import { openInfra } from '../src/infra.js';

const databaseUrl = testDatabaseUrl();

describe('openInfra (standalone)', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'dws-infra-'));
  let nats: NatsServer | undefined;
  afterAll(async () => {
    await nats?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it('waits for a nats-server that comes up after the service starts, saying what it waits for', async () => {
    if (!databaseUrl) throw new Error('TEST_DATABASE_URL is not set');
    const port = await freePort();
    const warned: { what: string }[] = [];
    const log = { warn: (f: { what: string }) => warned.push(f), info: () => undefined } as unknown as Logger;
    const cfg = loadConfig({ DATABASE_URL: databaseUrl, NATS_URL: `nats://127.0.0.1:${port}` });
    const opening = openInfra(cfg, log, { standalone: true, name: 'infra-test' });
    await new Promise((r) => setTimeout(r, 1_000));
    nats = await startNatsServer({ port, storeDir: dir });
    const infra = await opening;
    try {
      expect(await infra.bus.healthy()).toBe(true);
      expect(await infra.db.healthy()).toBe(true);
      expect(warned.length).toBeGreaterThan(0);
      expect(warned.every((w) => w.what === 'nats-server')).toBe(true);
    } finally {
      await infra.close();
    }
  }, 30_000);
});
