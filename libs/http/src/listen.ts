import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Express } from 'express';

export interface HttpListener {
  readonly server: Server;
  readonly port: number;
  /** Stop accepting, let in-flight requests finish (up to `graceMs`), then drop what is left. */
  close(graceMs?: number): Promise<void>;
}

/** Listen on host:port (0 picks a free port) and track sockets for a graceful close. */
export async function listen(app: Express, host: string, port: number): Promise<HttpListener> {
  const sockets = new Set<Socket>();
  const server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(port, host, (err?: Error) => (err ? reject(err) : resolve(s)));
    s.once('error', reject);
  });
  server.keepAliveTimeout = 65_000;
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  const addr = server.address();
  const bound = typeof addr === 'object' && addr ? addr.port : port;
  return {
    server,
    port: bound,
    async close(graceMs = 5000) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const timer = setTimeout(() => {
        for (const s of sockets) s.destroy();
      }, graceMs);
      timer.unref();
      await closed;
      clearTimeout(timer);
    },
  };
}
