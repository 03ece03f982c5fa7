import express from 'express';
import type { Server } from 'node:http';
import { createRunner, type Runner } from '@dws/sdk';
import type { Deployment } from './deployment.js';

export interface TestRunner {
  runner: Runner;
  /** The serve runner's root ('' for a Connect runner). */
  url: string;
  close(): Promise<void>;
}

/**
 * A user's runner process, in-test: an express app serving the SDK's invoke
 * handler, registered with the deployment; or (`connect`) one that dials the
 * deployment's Connect socket instead, redialling at once when it drops.
 */
export async function startRunner(
  dep: Deployment,
  define: (r: Runner) => void,
  opts: { app?: string; connect?: boolean } = {},
): Promise<TestRunner> {
  if (opts.connect) {
    const runner = createRunner({ app: opts.app ?? 'default', url: `${dep.base}/v1`, apiKey: dep.secretKey, signingKey: dep.signingKey });
    define(runner);
    const conn = runner.connect({ minBackoffMs: 50, maxBackoffMs: 1000 });
    await conn.ready;
    return { runner, url: '', close: () => conn.close() };
  }
  const app = express();
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  const runner = createRunner({
    app: opts.app ?? 'default',
    url: `${dep.base}/v1`,
    apiKey: dep.secretKey,
    signingKey: dep.signingKey,
    publicUrl: `http://127.0.0.1:${port}/invoke`,
  });
  define(runner);
  app.post('/invoke', runner.serve());
  await runner.register();
  // Heartbeat like a real runner: past 90 s without one it leaves routing.
  runner.startHeartbeat();
  return {
    runner,
    url: `http://127.0.0.1:${port}`,
    async close() {
      runner.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
