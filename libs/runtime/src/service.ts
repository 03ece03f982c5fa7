import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Express } from '@dws/http';
import { infraGauges, METRICS_CONTENT_TYPE, metricsText } from './metrics.js';
import { loadConfig, type Config } from '@dws/config';
import { createLogger, type Logger } from '@dws/log';
import { createHttpApp, errorMiddleware, healthRoutes, listen, notFoundHandler } from '@dws/http';
import { startTracing, type Tracing } from '@dws/telemetry';
import { collectAfterStart, manageHeap } from './heap.js';
import { openInfra, type Infra } from './infra.js';

/** What a service's `start<Name>(cfg, infra)` returns. */
export interface ServiceHandle {
  readonly name: string;
  /** True once started and while its consumers and storage are usable. */
  ready(): Promise<boolean>;
  /** Stop taking work, finish in-flight work, release resources it opened (not the infra). */
  stop(): Promise<void>;
  /** Adds routes of its own to the service's port in standalone mode (the scheduler's direct checkpoints). */
  routes?(app: Express): void;
  /** Takes HTTP upgrades (WebSockets) arriving on the service's own port in standalone mode. */
  upgrade?(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

export type StartService = (cfg: Config, infra: Infra) => Promise<ServiceHandle>;

/**
 * Standalone entry shared by every service's bin.ts: parse config, open
 * Postgres + NATS, start, serve /healthz and /readyz on PORT (or the
 * service's default port), drain on SIGTERM/SIGINT.
 */
export async function runStandalone(name: string, defaultPort: number, start: StartService): Promise<void> {
  let cfg: Config;
  try {
    cfg = loadConfig(process.env);
  } catch (err) {
    process.stderr.write(`${name}: ${(err as Error).message}\n`);
    process.exit(2);
  }
  manageHeap(cfg);
  const log: Logger = createLogger({ level: cfg.LOG_LEVEL, service: name });
  // A crash says why in one log line (the process still exits: state is in Postgres, a restart resumes).
  const die = (what: string) => (err: unknown) => {
    log.fatal({ err }, what);
    process.exit(1);
  };
  process.on('uncaughtException', die('uncaught exception; exiting'));
  process.on('unhandledRejection', die('unhandled rejection; exiting'));
  let infra: Infra;
  let handle: ServiceHandle;
  let tracing: Tracing;
  try {
    // OpenTelemetry traces when OTEL_EXPORTER_OTLP_ENDPOINT is set; nothing at all otherwise (docs/tracing.md).
    tracing = await startTracing({ serviceName: name, env: process.env });
    infra = await openInfra(cfg, log, { standalone: true, name });
    handle = await start(cfg, infra);
    infraGauges(infra);
  } catch (err) {
    log.fatal({ err }, 'service failed to start');
    process.exit(1);
  }
  // The gateway serves its own API on PORT; the others serve health only.
  let http: Awaited<ReturnType<typeof listen>> | undefined;
  if (name !== 'gateway') {
    const app = createHttpApp();
    handle.routes?.(app);
    healthRoutes(app, {
      ready: async () => (await handle.ready()) && (await infra.db.healthy()) && (await infra.bus.healthy()),
    });
    app.get('/metrics', (_req, res, next) => {
      metricsText().then((body) => res.type(METRICS_CONTENT_TYPE).send(body), next);
    });
    app.use(notFoundHandler);
    app.use(errorMiddleware(log));
    http = await listen(app, cfg.HOST, cfg.PORT ?? defaultPort);
    const upgrade = handle.upgrade?.bind(handle);
    if (upgrade) http.server.on('upgrade', upgrade);
  }
  log.info({ port: http?.port, db: infra.mode.db, bus: infra.mode.bus, ...(tracing.enabled ? { traces: tracing.endpoint } : {}) }, 'service started');
  collectAfterStart(cfg);
  onShutdown(log, async () => {
    await http?.close();
    await handle.stop();
    await infra.close();
    // Last: spans of the shutdown itself are exported too.
    await tracing.shutdown();
  });
}

/** Run `fn` once on SIGTERM/SIGINT, then exit; a second signal exits at once. */
export function onShutdown(log: Logger, fn: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    log.info({ signal }, 'shutting down');
    fn().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => handler('SIGTERM'));
  process.on('SIGINT', () => handler('SIGINT'));
}
