import { fileURLToPath } from 'node:url';
import type { Config } from '@dws/config';
import { consoleHandler } from '@dws/console';
import { migrate, whileConnectionLost } from '@dws/db';
import type { Socket } from 'node:net';
import { createHttpApp, errorMiddleware, healthRoutes, listen, notFoundHandler, type HttpListener } from '@dws/http';
import { errorBody } from '@dws/protocol';
import { ApiBatcher, gauge, METRICS_CONTENT_TYPE, metricsText, Outbox, sealKeyFor, streams, type Infra, type ServiceHandle } from '@dws/runtime';
import type { Express } from 'express';
import { ensureDefaultWorkspace, type DevCredentials } from './domain/bootstrap.js';
import { accessLog } from './handlers/access-log.js';
import { AdminApi } from './handlers/admin.js';
import { Authenticator } from './handlers/auth.js';
import { fastRoutes } from './handlers/fast-routes.js';
import { McpEndpoint } from './handlers/mcp.js';
import { openApiDocument } from './handlers/openapi.js';
import { ROUTES } from './handlers/route-table.js';
import { apiRouter } from './handlers/routes.js';
import { attachConnect, type UpgradeHandler } from './handlers/connect-proxy.js';
import { LiveHub, Streams, type StreamOptions } from './handlers/streams.js';
import { UsageMeter, type UsageMeterOptions } from './handlers/usage-meter.js';
import { announceWorkspace, providersOf } from './handlers/workspace-state.js';
import { workspaceById } from './store/workspaces.js';

const MIGRATIONS = fileURLToPath(new URL('./store/migrations', import.meta.url));

export interface GatewayHandle extends ServiceHandle {
  readonly port: number;
  readonly credentials: DevCredentials;
  /** SSE streams open right now. */
  openStreams(): number;
  /** Live bus subscriptions behind them (one per run or workspace tail, shared by its clients). */
  liveSubscriptions(): number;
}

export interface GatewayOptions {
  /** `pnpm dev` folds the other five services into /readyz. */
  otherServicesReady?: () => Promise<boolean>;
  /** Heartbeat and resync timings of the SSE endpoints (tests shorten them). */
  streams?: StreamOptions;
  /** `pnpm dev`: the invoker's upgrade handler for GET /v1/connect (else proxied to SERVICE_INVOKER_URL). */
  connect?: UpgradeHandler;
  /** `pnpm dev`: routes the other services serve on their own port when standalone (the scheduler's direct checkpoints). */
  routes?: (app: Express) => void;
  /** `pnpm dev`: upgrades on any other path, taken by the other services (the scheduler's checkpoint sockets). */
  upgrades?: UpgradeHandler;
  /** Usage metering: sweep interval and clock (tests shorten and move them). */
  usage?: UsageMeterOptions;
}

/**
 * Composition root of the gateway: workspaces and keys, authentication, and
 * the public REST API under /v1 composed from the owning services over the bus.
 * `otherServicesReady` lets `pnpm dev` fold the other five into /readyz.
 */
export async function startGateway(
  cfg: Config,
  infra: Infra,
  opts: GatewayOptions = {},
): Promise<GatewayHandle> {
  const log = infra.log.child({ service: 'gateway' });
  const { db, bus } = infra;
  await migrate(db, { schema: 'gateway', migrationsDir: MIGRATIONS, log });
  await bus.ensureStream(streams.gatewayFacts);
  const sealKey = sealKeyFor(cfg);
  const outbox = new Outbox({ db, bus, schema: 'gateway', log });
  outbox.start();

  // The default workspace, and its announcement on every start (the invoker signs invokes with its key),
  // with its stored suspension, providers, retention window and limits: announcing `false` or none would overwrite
  // them downstream. Both are idempotent (a repeated announcement is the same fact), so a Postgres restart
  // during the start is ridden out.
  const { credentials, pending } = await whileConnectionLost(
    async () => {
      const credentials = await ensureDefaultWorkspace(db, cfg, sealKey);
      const pending = await db.tx(async (tx) => {
        const row = await workspaceById(tx, credentials.workspaceId);
        return announceWorkspace(tx, outbox, {
          id: credentials.workspaceId,
          name: 'default',
          signingKey: credentials.signingKey.value,
          suspended: row?.suspended ?? false,
          providers: row ? providersOf(row, sealKey) : {},
          retentionDays: row?.retention_days ?? null,
          limits: row?.limits ?? {},
        });
      });
      return { credentials, pending };
    },
    (err, retryInMs) => log.warn({ err: err.message, retryInMs }, 'gateway start: connection lost; retrying'),
  );
  await outbox.afterCommit(pending);

  const now = opts.usage?.now ?? Date.now;
  const auth = new Authenticator(db, { enabled: cfg.SERVICE_AUTH === 'on', adminToken: cfg.SERVICE_ADMIN_TOKEN, bus });
  const keyChanges = auth.follow();
  const admin = new AdminApi({ db, outbox, sealKey, auth, now });
  const meter = new UsageMeter({ db, bus, outbox, sealKey, log, now, onSuspensionChange: () => auth.invalidate() }, opts.usage?.sweepMs);
  await meter.start();
  // POST /events one at a time from many clients: the calls of a turn go to ingest together.
  const batcher = new ApiBatcher(bus);
  const hub = new LiveHub(bus, log);
  const sse = new Streams({ bus, hub, log }, opts.streams);
  const openapi = openApiDocument(ROUTES, { version: '1.0.0' });
  const mcp = new McpEndpoint({ bus, batcher, auth, log, routes: ROUTES, version: '1.0.0', streams: sse });
  const app = createHttpApp();
  app.use(accessLog(log));
  opts.routes?.(app);
  healthRoutes(app, {
    ready: async () => (await db.healthy()) && (await bus.healthy()) && (opts.otherServicesReady ? await opts.otherServicesReady() : true),
  });
  // CONTRACT: Prometheus text at GET /metrics (the whole process's under `pnpm dev`).
  gauge('dws_gateway_sse_streams', 'Open SSE streams on this gateway.', () => sse.count);
  gauge('dws_gateway_live_subscriptions', 'Bus subjects this gateway listens on for its SSE streams.', () => hub.size);
  app.get('/metrics', (_req, res, next) => void metricsText().then((body) => res.type(METRICS_CONTENT_TYPE).send(body), next));
  app.use('/v1', apiRouter(ROUTES, { bus, batcher, auth, admin, streams: sse, openapi: () => openapi, mcp }));
  // CONTRACT Addresses: the web console at `/` (its client routes fall back to index.html; /v1, /healthz, /readyz, /metrics never do).
  app.use(consoleHandler());
  app.use(notFoundHandler);
  app.use(errorMiddleware(log));
  // The hot POST routes skip express (fast-routes.ts); everything else is the app's.
  const http: HttpListener = await listen(app, cfg.HOST, cfg.PORT ?? 8288, fastRoutes(ROUTES, { bus, batcher, auth, log, streams: sse }));
  attachConnect(http.server, { auth, log, sealKey, local: opts.connect, others: opts.upgrades, invokerUrl: cfg.SERVICE_INVOKER_URL });
  http.server.on('clientError', clientErrorAnswer);

  return {
    name: 'gateway',
    port: http.port,
    credentials,
    ready: async () => true,
    openStreams: () => sse.count,
    liveSubscriptions: () => hub.size,
    async stop() {
      // Graceful drain: stop accepting, end open SSE streams cleanly (clients resume with Last-Event-ID), let requests finish.
      const closing = http.close();
      sse.drain();
      await closing;
      await meter.stop();
      await keyChanges.stop();
      await outbox.stop();
    },
  };
}

/** The start banner: where the API is and which keys to use. */
export function credentialsBanner(url: string, c: DevCredentials, authOn: boolean): string {
  const line = (label: string, v: { value: string; from: string }, env: string) =>
    `  ${label.padEnd(12)} ${v.value}  (${v.from === 'env' ? `from ${env}` : `generated; set ${env} to choose it`})`;
  return [
    '',
    `  API          ${url}/v1${authOn ? '' : '   (SERVICE_AUTH=off: no key needed)'}`,
    line('secret key', c.secretKey, 'SERVICE_DEV_SECRET_KEY'),
    line('public key', c.publicKey, 'SERVICE_DEV_PUBLIC_KEY'),
    line('signing key', c.signingKey, 'SERVICE_SIGNING_KEY'),
    '',
  ].join('\n');
}

/** HTTP the parser rejects (malformed request line, oversized headers) still gets the JSON error body. */
function clientErrorAnswer(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const big = err.code === 'HPE_HEADER_OVERFLOW';
  const body = JSON.stringify(errorBody(big ? 'headers_too_large' : 'bad_request', big ? 'Request headers are too large.' : 'Malformed HTTP request.'));
  socket.end(
    `HTTP/1.1 ${big ? '431 Request Header Fields Too Large' : '400 Bad Request'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
