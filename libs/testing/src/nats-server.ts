import { spawn } from 'node:child_process';
import { createConnection, createServer } from 'node:net';

const NATS_BIN = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';

/** A TCP port free on 127.0.0.1 right now. */
export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

/** Resolves once something accepts connections on `port`. */
export async function untilListening(port: number, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = createConnection({ host: '127.0.0.1', port }, () => (s.end(), resolve(true)));
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${what} did not listen on ${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface NatsServer {
  url: string;
  /** SIGKILL, resolved once it exited. */
  kill(): Promise<void>;
}

/**
 * A nats-server of the caller's own (the machine's binary, NATS_SERVER_BIN)
 * with JetStream on `port` (a free one by default), its store in
 * `storeDir`: for tests that crash it. `gomaxprocs` caps the Go scheduler's
 * threads: on a small machine shared with the fleet, 1 halves its wake-ups
 * (docs/deploy.md).
 */
export async function startNatsServer(o: {
  port?: number;
  storeDir: string;
  gomaxprocs?: number;
  /** A member of a JetStream cluster: its name, its route port and the other members' route ports. */
  cluster?: { name: string; serverName: string; port: number; routes: number[] };
}): Promise<NatsServer> {
  const port = o.port ?? (await freePort());
  const env = o.gomaxprocs ? { ...process.env, GOMAXPROCS: String(o.gomaxprocs) } : process.env;
  const c = o.cluster;
  const clustered = c
    ? ['-n', c.serverName, '--cluster_name', c.name, '--cluster', `nats://127.0.0.1:${c.port}`, '--routes', c.routes.map((r) => `nats://127.0.0.1:${r}`).join(',')]
    : [];
  const child = spawn(NATS_BIN, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', o.storeDir, ...clustered], { stdio: 'ignore', env });
  const kill = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  };
  try {
    await untilListening(port, 'nats-server');
  } catch (err) {
    await kill();
    throw err;
  }
  return { url: `nats://127.0.0.1:${port}`, kill };
}
