import { SERVICES, type Deployment } from './deployment.js';
import { freshDatabase, freshNamespace, realInfra, uniquePrefix } from './infra.js';
import { freePort } from '@dws/testing';
import { startService, waitReady, type Proc } from './processes.js';

export interface RunnersFleet extends Deployment {
  /** Ports of the invoker replicas, in start order. */
  readonly invokerPorts: number[];
  /** kill -9 invoker replica `i` (no restart). */
  killInvoker(i: number): Promise<void>;
}

/**
 * The fleet as separate processes on real Postgres + NATS, like
 * startDeployment('fleet'), but with `invokers` invoker replicas and the
 * gateway told where they are (SERVICE_INVOKER_URL), so Connect sockets are
 * proxied to them and may sit on either replica.
 */
export async function startRunnersFleet(opts: { invokers?: number; env?: Record<string, string> } = {}): Promise<RunnersFleet> {
  const infra = realInfra();
  if (!infra) throw new Error('real Postgres and NATS are required for the fleet');
  const keys = {
    SERVICE_DEV_SECRET_KEY: `sk_e2e_${uniquePrefix('')}`,
    SERVICE_DEV_PUBLIC_KEY: `pk_e2e_${uniquePrefix('')}`,
    SERVICE_SIGNING_KEY: `signing-${uniquePrefix('')}`,
  };
  const db = await freshDatabase(infra.databaseUrl, 'runners');
  const ns = freshNamespace(infra.natsUrl);
  const invokerPorts = await Promise.all(Array.from({ length: opts.invokers ?? 2 }, () => freePort()));
  const gatewayPort = await freePort();
  const shared: Record<string, string> = {
    ...keys,
    HOST: '127.0.0.1',
    SERVICE_RUN_LEASE_MS: '2000',
    DATABASE_URL: db.url,
    NATS_URL: infra.natsUrl,
    SERVICE_BUS_PREFIX: ns.prefix,
    SERVICE_INVOKER_URL: invokerPorts.map((p) => `http://127.0.0.1:${p}`).join(','),
    ...opts.env,
  };
  const procs: { name: string; proc: Proc; port: number; entry: string }[] = [];
  const launch = async (name: string, entry: string, port: number) => {
    const proc = startService(name, entry, { ...shared, PORT: String(port) });
    procs.push({ name, proc, port, entry });
    await waitReady(`http://127.0.0.1:${port}`, proc);
  };
  const stop = async () => {
    for (const p of [...procs].reverse()) await p.proc.kill('SIGTERM');
    await ns.drop();
    await db.drop();
  };
  try {
    for (const [i, port] of invokerPorts.entries()) await launch(`invoker-${i}`, 'services/invoker/src/bin.ts', port);
    for (const s of SERVICES.filter((s) => s !== 'invoker' && s !== 'gateway')) await launch(s, `services/${s}/src/bin.ts`, await freePort());
    await launch('gateway', 'services/gateway/src/bin.ts', gatewayPort);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    mode: 'fleet',
    base: `http://127.0.0.1:${gatewayPort}`,
    bases: [`http://127.0.0.1:${gatewayPort}`],
    secretKey: keys.SERVICE_DEV_SECRET_KEY,
    publicKey: keys.SERVICE_DEV_PUBLIC_KEY,
    signingKey: keys.SERVICE_SIGNING_KEY,
    invokerPorts,
    async killInvoker(i) {
      const p = procs.find((x) => x.name === `invoker-${i}`);
      if (!p) throw new Error(`no invoker-${i}`);
      await p.proc.kill('SIGKILL');
    },
    async crashAndRestart(name, beforeRestart) {
      const p = procs.find((x) => x.name === name);
      if (!p) throw new Error(`no process ${name}`);
      await p.proc.kill('SIGKILL');
      await beforeRestart?.();
      const proc = startService(name, p.entry, { ...shared, PORT: String(p.port) });
      p.proc = proc;
      await waitReady(`http://127.0.0.1:${p.port}`, proc);
    },
    stop,
  };
}
