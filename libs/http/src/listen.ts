import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Express } from 'express';

export interface HttpListener {
  readonly server: Server;
  readonly port: number;
  /** Stop accepting, let in-flight requests finish (up to `graceMs`), then drop what is left. */
  close(graceMs?: number): Promise<void>;
}

/** A handler tried before the app: true when it took the request. */
export type FirstHandler = (req: IncomingMessage, res: ServerResponse) => boolean;

/**
 * Listen on host:port (0 picks a free port) and track sockets for a graceful
 * close. `first` sees each request before `app` and may take it.
 */
export async function listen(app: Express, host: string, port: number, first?: FirstHandler): Promise<HttpListener> {
  const sockets = new Set<Socket>();
  const server = createServer(first ? (req, res) => void (first(req, res) || app(req, res)) : app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
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
      // A keep-alive connection whose request finishes after this is closed too, not kept until the grace ends.
      const idle = setInterval(() => server.closeIdleConnections(), 50);
      const timer = setTimeout(() => {
        for (const s of sockets) s.destroy();
      }, graceMs);
      timer.unref();
      await closed;
      clearInterval(idle);
      clearTimeout(timer);
    },
  };
}
