import { loadConfig } from '@dws/config';
import { createLogger } from '@dws/log';
import { collectAfterStart, infraGauges, manageHeap, onShutdown, openInfra } from '@dws/runtime';
import { credentialsBanner } from '@dws/gateway';
import { startTracing } from '@dws/telemetry';
import { startFleet } from './fleet.js';

/** `pnpm dev`: the six services in one process; embedded storage and bus unless DATABASE_URL / NATS_URL say otherwise. */
let cfg;
try {
  // `pnpm dev` delivers webhooks to local receivers unless told otherwise (CONTRACT.md).
  cfg = loadConfig({ SERVICE_WEBHOOK_ALLOW_PRIVATE: 'on', SERVICE_SCHEDULER_URL: ownLoopbackUrl(process.env), ...process.env });
} catch (err) {
  process.stderr.write(`dev: ${(err as Error).message}\n`);
  process.exit(2);
}
manageHeap(cfg);
const log = createLogger({ level: cfg.LOG_LEVEL });

/**
 * The scheduler's direct checkpoints ride this process's own port (the gateway mounts its route): on a loopback
 * HOST every runner is on this machine and reaches it there. Any other HOST: runners may be elsewhere, so only an
 * explicit SERVICE_SCHEDULER_URL turns them on, and checkpoints otherwise go through /v1.
 */
function ownLoopbackUrl(env: NodeJS.ProcessEnv): string | undefined {
  const host = env.HOST ?? '127.0.0.1';
  const port = env.PORT ?? '8288';
  return (host === '127.0.0.1' || host === 'localhost') && port !== '0' ? `http://${host}:${port}` : undefined;
}
try {
  // OpenTelemetry traces when OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/tracing.md): one process, one service.name.
  const tracing = await startTracing({ serviceName: process.env.OTEL_SERVICE_NAME || 'dws', env: process.env });
  const infra = await openInfra(cfg, log, { standalone: false, name: 'dev' });
  const fleet = await startFleet(cfg, infra);
  infraGauges(infra);
  log.info({ db: infra.mode.db, bus: infra.mode.bus, port: fleet.gateway.port }, 'all six services started');
  collectAfterStart(cfg);
  process.stdout.write(credentialsBanner(`http://${cfg.HOST}:${fleet.gateway.port}`, fleet.gateway.credentials, cfg.SERVICE_AUTH === 'on') + '\n');
  onShutdown(log, async () => {
    await fleet.stop();
    await infra.close();
    await tracing.shutdown();
  });
} catch (err) {
  log.fatal({ err }, 'dev failed to start');
  process.exit(1);
}
