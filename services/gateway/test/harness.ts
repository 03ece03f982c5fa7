import { expect } from '@jest/globals';
import { request } from 'undici';
import { connectJetStreamBus, deleteNamespace, prefixedBus, type Bus } from '@dws/bus';
import { loadConfig } from '@dws/config';
import { createLogger } from '@dws/log';
import { serveApi, type ApiHandler, type Infra } from '@dws/runtime';
import { openTestDb, testInfra, uniqueName, type TestDb } from '@dws/testing';
import { startGateway, type GatewayHandle, type GatewayOptions } from '../src/main.js';

export const infraAvailable = testInfra() !== null;

export interface TestGateway {
  base: string;
  bus: Bus;
  tdb: TestDb;
  gw: GatewayHandle;
  secretKey: string;
  publicKey: string;
  adminToken: string;
  /** Another gateway replica on the same database and bus. */
  replica(): Promise<{ base: string; stop(): Promise<void> }>;
  /** Answer ops of `service` on the bus, as that service would (a stand-in, on the real bus). */
  stub(service: string, handlers: Record<string, ApiHandler>): { stop(): Promise<void> };
  stop(): Promise<void>;
}

/**
 * A gateway on a fresh real Postgres database and the real NATS server
 * (subjects and streams under a unique prefix), listening on a free port.
 */
export async function startTestGateway(opts: { env?: Record<string, string>; gateway?: GatewayOptions } = {}): Promise<TestGateway> {
  const infra = testInfra();
  if (!infra) throw new Error('real Postgres and NATS are required');
  const log = createLogger({ level: (process.env.TEST_LOG_LEVEL as 'silent' | undefined) ?? 'silent' });
  const tdb = await openTestDb('gw');
  const busPrefix = uniqueName('gwt');
  const bus = prefixedBus(await connectJetStreamBus({ servers: infra.natsUrl, name: 'gateway-test' }), busPrefix);
  const keys = { secret: `sk_${uniqueName('t')}`, public: `pk_${uniqueName('t')}` };
  const adminToken = uniqueName('admin');
  const cfg = loadConfig({
    HOST: '127.0.0.1',
    PORT: '0',
    SERVICE_DEV_SECRET_KEY: keys.secret,
    SERVICE_DEV_PUBLIC_KEY: keys.public,
    SERVICE_SIGNING_KEY: uniqueName('sign'),
    SERVICE_ADMIN_TOKEN: adminToken,
    LOG_LEVEL: 'silent',
    ...opts.env,
  });
  const inf: Infra = { db: tdb.db, bus, log, mode: { db: 'postgres', bus: 'jetstream' }, close: async () => {} };
  const gw = await startGateway(cfg, inf, opts.gateway);
  const stubs: { stop(): Promise<void> }[] = [];
  return {
    base: `http://127.0.0.1:${gw.port}`,
    bus,
    tdb,
    gw,
    secretKey: keys.secret,
    publicKey: keys.public,
    adminToken,
    async replica() {
      const other = await startGateway(cfg, inf, opts.gateway);
      stubs.push({ stop: () => other.stop() });
      return { base: `http://127.0.0.1:${other.port}`, stop: () => other.stop() };
    },
    stub(service, handlers) {
      const sub = serveApi(bus, service, log, handlers);
      stubs.push(sub);
      return sub;
    },
    async stop() {
      await gw.stop().catch(() => undefined); // a test may have stopped it already
      for (const s of stubs) await s.stop();
      await bus.close();
      await tdb.close();
      await deleteNamespace(infra.natsUrl, busPrefix);
    },
  };
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
  text: string;
}

/** A plain HTTP call, as any client would make it. */
export async function http(
  base: string,
  method: string,
  path: string,
  opts: { key?: string; body?: unknown; raw?: string | Buffer; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  let body: string | Buffer | undefined = opts.raw;
  if (body === undefined && opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined) headers['content-type'] ??= 'application/json';
  const res = await request(`${base}${path}`, { method: method as 'GET', headers, body });
  const text = await res.body.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON: the text is kept for the assertion message */
  }
  return { status: res.statusCode, headers: res.headers, body: parsed, text };
}

/**
 * Each request twice: as sent (the gateway's fast path takes it, fast-routes.ts) and with a trailing
 * slash (only express does): status, body, content type and request id alike.
 */
export async function expectFastPathAsExpress(base: string, cases: [path: string, key: string | undefined][]): Promise<void> {
  for (const [path, key] of cases) {
    const [p, q] = path.split('?');
    const fast = await http(base, 'GET', path, { key });
    const viaExpress = await http(base, 'GET', `${p}/${q === undefined ? '' : `?${q}`}`, { key });
    const seen = (r: Reply) => ({ status: r.status, body: r.body, type: r.headers['content-type'], id: typeof r.headers['x-request-id'] });
    expect({ path, ...seen(fast) }).toEqual({ path, ...seen(viaExpress) });
  }
}

export { sse, type SseEvent } from '@dws/testing';
