import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import http from 'node:http';
import { connectJetStreamBus, createEmbeddedBus, deleteNamespace, prefixedBus, type Bus } from '@dws/bus';
import { loadConfig } from '@dws/config';
import { openDatabase, type Database } from '@dws/db';
import { createLogger } from '@dws/log';
import { create, SendWebhookSchema, toBinary } from '@dws/proto';
import { ids, streams, subjects, type ServiceHandle } from '@dws/runtime';
import { openTestDb, testInfra, uniqueName } from '@dws/testing';
import { startWebhookDispatcher } from '../src/main.js';

jest.setTimeout(30_000);
const enc = new TextEncoder();
const modes: ('real' | 'embedded')[] = testInfra() ? ['real', 'embedded'] : ['embedded'];

describe.each(modes)('custom webhook sends (%s)', (mode) => {
  let db: Database;
  let bus: Bus;
  const busPrefix = uniqueName('dsp').replace(/[^A-Za-z0-9_-]/g, '');
  let svc: ServiceHandle;
  let server: http.Server;
  let base = '';
  const received: { path: string; body: string }[] = [];
  let closeDb: () => Promise<void>;

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push({ path: req.url ?? '', body });
        const code = req.url === '/gone' ? 404 : req.url === '/down' ? 503 : 200;
        res.writeHead(code).end(code === 200 ? 'ok' : 'nope');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    if (mode === 'real') {
      const t = await openTestDb('dispatch');
      db = t.db;
      closeDb = t.close;
      bus = prefixedBus(await connectJetStreamBus({ servers: testInfra()!.natsUrl }), busPrefix);
    } else {
      db = await openDatabase({});
      closeDb = () => db.close();
      bus = await createEmbeddedBus();
    }
    const log = createLogger({ level: 'silent' });
    svc = await startWebhookDispatcher(loadConfig({ SERVICE_WEBHOOK_ALLOW_PRIVATE: 'on' }), { db, bus, log, mode: { db: db.kind, bus: bus.kind }, close: async () => {} });
    await bus.ensureStream(streams.dispatcherCmds);
  });
  afterAll(async () => {
    await svc?.stop();
    await bus?.close();
    await closeDb?.();
    server?.close();
    if (mode === 'real') await deleteNamespace(testInfra()!.natsUrl, busPrefix);
  });

  const send = (deliveryId: string, url: string, runId = 'run_x', stepId = 'a'.repeat(64)) =>
    bus.publish(
      subjects.sendWebhook,
      toBinary(SendWebhookSchema, create(SendWebhookSchema, { workspaceId: 'ws', deliveryId, app: 'app', url, body: enc.encode('{"hello":1}'), sourceRunId: runId, stepId })),
    );
  const delivery = async (id: string, statuses: string[]) => {
    for (let i = 0; i < 200; i++) {
      const rows = await db.query<{ status: string; attempt_count: number }>('select status, attempt_count from webhook_dispatcher.deliveries where id = $1', [id]);
      if (rows[0] && statuses.includes(rows[0].status)) return rows[0];
      // Ended otherwise (a delivery that succeeded, exhausted or died never moves again): say so now, not after the polls.
      if (rows[0] && ['succeeded', 'exhausted', 'dead'].includes(rows[0].status)) throw new Error(`delivery ${id} ended ${rows[0].status}, not ${statuses.join('|')}`);
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`delivery ${id} never reached ${statuses.join('|')}`);
  };

  it('delivers once however often the hand-off is redelivered', async () => {
    const id = ids.generic('dlv');
    await send(id, `${base}/hook`, 'run_once');
    await send(id, `${base}/hook`, 'run_once');
    await send(id, `${base}/hook`, 'run_once');
    const d = await delivery(id, ['succeeded']);
    expect(d.attempt_count).toBe(1);
    await new Promise((r) => setTimeout(r, 300)); // deliberately: time for a second send, which must not happen
    expect(received.filter((r) => r.path === '/hook')).toHaveLength(1);
    expect(JSON.parse(received[0]!.body)).toEqual({ hello: 1 });
    const attempts = await db.query<{ outcome: string; status_code: number }>('select outcome, status_code from webhook_dispatcher.attempts where delivery_id = $1', [id]);
    expect(attempts).toEqual([{ outcome: 'succeeded', status_code: 200 }]);
  });

  it('marks a non-retryable answer dead and schedules a retry after a 5xx', async () => {
    const gone = ids.generic('dlv');
    await send(gone, `${base}/gone`, 'run_gone');
    expect((await delivery(gone, ['dead'])).attempt_count).toBe(1);
    const down = ids.generic('dlv');
    await send(down, `${base}/down`, 'run_down');
    expect((await delivery(down, ['failed'])).attempt_count).toBe(1);
    const next = await db.query<{ later: boolean }>('select next_attempt_at > now() as later from webhook_dispatcher.deliveries where id = $1', [down]);
    expect(next[0]!.later).toBe(true);
  });
});
