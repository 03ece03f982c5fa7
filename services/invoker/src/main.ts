import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Config } from '@dws/config';
import { fromBinary, WorkspaceUpsertedSchema } from '@dws/proto';
import { hopKey, seal } from '@dws/protocol';
import { followRetention, Outbox, Retention, sealKeyFor, serveApi, streams, subjects, type Infra, type ServiceHandle } from '@dws/runtime';
import { migrate } from '@dws/db';
import { fileURLToPath } from 'node:url';
import { ConnectHub } from './handlers/connect-hub.js';
import { forwardCheckpoint } from './handlers/checkpoints.js';
import { serveInvokes } from './handlers/invoke.js';
import { consumeInferences, providersOf, pruneInferenceCache } from './handlers/infer.js';
import { invokerApi } from './handlers/api.js';
import { registerRunner } from './handlers/register.js';
import { RunnerDirectory } from './handlers/runner-directory.js';
import { detachSocket, touchSockets } from './store/runners.js';
import { upsertWorkspace } from './store/workspaces.js';
import { invokerRetention } from './store/retention.js';

const MIGRATIONS = fileURLToPath(new URL('./store/migrations', import.meta.url));
const dec = new TextDecoder();

export interface InvokerOptions {
  /** This replica's id on the sockets it holds and on its bus subject. @default random per start */
  replica?: string;
  /** Connect heartbeat (ping) period. @default 30_000 (SPEC Limits) */
  connectHeartbeatMs?: number;
  /** Take the scheduler's invokes (false: serve only this replica's sockets). @default true */
  serveScheduler?: boolean;
  /** Infer retry backoff base (tests shorten it). */
  infer?: { backoffBaseMs?: number };
  /** How long a pass waits for a workspace key not consumed yet. @default 5000 */
  keyWaitMs?: number;
}

export interface InvokerHandle extends ServiceHandle {
  readonly replica: string;
  /**
   * The WebSocket upgrade of `GET /v1/connect`. The gateway authenticates it
   * and adds the hop header; in one process it calls this directly, in the
   * fleet it proxies the upgrade to this service's own port.
   */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

/** Composition root of the invoker: runners, workflow definitions, Connect sockets, and every call to a runner. */
export async function startInvoker(cfg: Config, infra: Infra, opts: InvokerOptions = {}): Promise<InvokerHandle> {
  const replica = opts.replica ?? `inv-${randomBytes(5).toString('hex')}`;
  const log = infra.log.child({ service: 'invoker', replica });
  const { db, bus } = infra;
  await migrate(db, { schema: 'invoker', migrationsDir: MIGRATIONS, log });
  await bus.ensureStream(streams.invokerFacts);
  await bus.ensureStream(streams.gatewayFacts);
  await bus.ensureStream(streams.invokerCmds);
  await bus.ensureStream(streams.schedulerCmds);

  const sealKey = sealKeyFor(cfg);
  const directory = new RunnerDirectory(db, sealKey, undefined, opts.keyWaitMs);
  const outbox = new Outbox({ db, bus, schema: 'invoker', log });
  outbox.start();

  const workspaceFacts = await bus.consume(
    { stream: streams.gatewayFacts.name, durable: 'invoker-workspaces', filterSubject: subjects.workspaceUpserted },
    async (msg) => {
      const ws = fromBinary(WorkspaceUpsertedSchema, msg.data);
      // Providers travel as JSON bytes; "{}" or nothing (an older gateway) means none.
      const providers = ws.providers.length ? dec.decode(ws.providers) : '{}';
      await upsertWorkspace(db, {
        id: ws.workspaceId,
        name: ws.name,
        signingKeySealed: seal(ws.signingKey, sealKey),
        suspended: ws.suspended,
        providersSealed: providers === '{}' ? null : seal(providers, sealKey),
      });
      directory.forgetKey(ws.workspaceId);
    },
  );
  const hub = new ConnectHub({
    log,
    replica,
    hopKey: hopKey(sealKey),
    heartbeatMs: opts.connectHeartbeatMs ?? 30_000,
    invokeTimeoutMs: cfg.SERVICE_INVOKE_TIMEOUT_MS,
    async register(workspaceId, reg, hold) {
      await registerRunner({ db, bus, outbox }, workspaceId, reg, 'connect', hold);
      directory.forget(workspaceId, reg.app);
    },
    async detach(workspaceId, runnerId, app, connectionId) {
      directory.forget(workspaceId, app);
      await detachSocket(db, workspaceId, runnerId, connectionId);
      directory.forget(workspaceId, app);
    },
    touch: (connectionIds) => touchSockets(db, replica, connectionIds),
    checkpoint: (workspaceId, actor, cp) => forwardCheckpoint(bus, workspaceId, actor, cp),
  });
  const invokes = serveInvokes({
    bus,
    db,
    log,
    directory,
    hub,
    replica,
    sealKey,
    timeoutMs: cfg.SERVICE_INVOKE_TIMEOUT_MS,
    serveScheduler: opts.serveScheduler ?? true,
  });
  const api = serveApi(bus, 'invoker', log, invokerApi({ db, bus, outbox, directory }));
  // Infer steps: the model calls the runners hand to the service.
  const inferences = await consumeInferences({ bus, db, log, outbox, providers: providersOf(cfg), sealKey, timeoutMs: cfg.SERVICE_INFER_TIMEOUT_MS, ...opts.infer });
  const cachePrune = pruneInferenceCache({ db, log });
  cachePrune.start();
  // Stored Infer answers past each workspace's window go, in small batches, on every replica (docs/retention.md).
  const retentionFacts = await followRetention({ bus, db, schema: 'invoker', durable: 'invoker-retention' });
  const retention = new Retention({ db, log, schema: 'invoker', targets: invokerRetention });
  retention.start();

  return {
    name: 'invoker',
    replica,
    ready: async () => true,
    upgrade: (req, socket, head) => hub.upgrade(req, socket, head),
    async stop() {
      await api.stop();
      await inferences.stop();
      await cachePrune.stop();
      await retention.stop();
      await retentionFacts.stop();
      for (const s of invokes.subs) await s.stop();
      // Runners reconnect through the gateway to a replica that is still up.
      await hub.close();
      await workspaceFacts.stop();
      await outbox.stop();
      await invokes.close();
    },
  };
}
