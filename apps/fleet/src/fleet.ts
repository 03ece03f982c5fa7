import type { Config } from '@dws/config';
import type { Infra, ServiceHandle } from '@dws/runtime';
import { startGateway, type GatewayHandle } from '@dws/gateway';
import { startIngest } from '@dws/ingest';
import { startScheduler } from '@dws/scheduler';
import { startInvoker } from '@dws/invoker';
import { startApprovals } from '@dws/approvals';
import { startWebhookDispatcher } from '@dws/webhook-dispatcher';

export interface Fleet {
  gateway: GatewayHandle;
  services: ServiceHandle[];
  /** Gateway first (stop taking requests), then the rest in reverse start order. */
  stop(): Promise<void>;
}

/** All six services in one process, on one infra: the `pnpm dev` wiring. */
export async function startFleet(cfg: Config, infra: Infra): Promise<Fleet> {
  const services: ServiceHandle[] = [];
  try {
    const invoker = await startInvoker(cfg, infra);
    services.push(invoker);
    for (const start of [startScheduler, startIngest, startApprovals, startWebhookDispatcher]) {
      services.push(await start(cfg, infra));
    }
    const gateway = await startGateway(cfg, infra, {
      otherServicesReady: async () => (await Promise.all(services.map((s) => s.ready()))).every(Boolean),
      // One process: Connect upgrades go straight to the invoker, no proxy hop.
      connect: invoker.upgrade,
      // And the routes each would serve on its own port (the scheduler's direct checkpoints).
      routes: (app) => {
        for (const s of services) s.routes?.(app);
      },
      // And their WebSockets (the scheduler's checkpoint sockets; the invoker's Connect is `connect`).
      upgrades: services.find((s) => s.name === 'scheduler')?.upgrade,
    });
    return {
      gateway,
      services,
      async stop() {
        await gateway.stop();
        for (const s of [...services].reverse()) await s.stop();
      },
    };
  } catch (err) {
    for (const s of services.reverse()) await s.stop().catch(() => undefined);
    throw err;
  }
}
