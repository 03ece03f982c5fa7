import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { loadConfig } from '@dws/config';
import type { Logger } from '@dws/log';
import { testDatabaseUrl } from '@dws/testing';
import { openInfra } from '../src/infra.js';

const NATS_BIN = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';
const databaseUrl = testDatabaseUrl();

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as { port: number };
  await new Promise((r) => srv.close(r));
  return port;
}

describe('openInfra (standalone)', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'dws-infra-'));
  let nats: ChildProcess | undefined;
  afterAll(() => {
    nats?.kill('SIGKILL');
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
    nats = spawn(NATS_BIN, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], { stdio: 'ignore' });
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
