import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import express, { Router, type RequestHandler } from 'express';
import { ServiceError } from '@dws/protocol';

/**
 * Services import libs, never apps: the gateway reaches the console's build
 * through this lib, which depends on the app package (`@dws/console-app`)
 * and resolves it like any dependency, so the link is declared in a
 * package.json rather than a relative path into another folder.
 */
export function consoleDistDir(): string {
  const pkg = createRequire(import.meta.url).resolve('@dws/console-app/package.json');
  return path.join(path.dirname(pkg), 'dist');
}

export interface ConsoleOptions {
  /** Directory holding index.html and assets/. @default consoleDistDir() */
  dir?: string;
  /**
   * Path prefixes the console must never answer, so an unknown API path
   * still gets the API's JSON 404. @default ['/v1', '/healthz', '/readyz', '/metrics']
   */
  reserved?: string[];
}

const RESERVED = ['/v1', '/healthz', '/readyz', '/metrics'];

/** CSP for the console's own pages: scripts and API calls only from this origin. */
const CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/**
 * Serves the built console: hashed assets with a long cache, and index.html
 * (no cache) for every other GET, since the console routes on the client
 * (/runs/run_123 is a page, not a file). Reserved prefixes pass through.
 * Without a build, `/` answers 503 `console_not_built` with the command.
 */
export function consoleHandler(opts: ConsoleOptions = {}): RequestHandler {
  const dir = opts.dir ?? consoleDistDir();
  const reserved = opts.reserved ?? RESERVED;
  const index = path.join(dir, 'index.html');
  const router = Router();
  const isReserved = (p: string) => reserved.some((r) => p === r || p.startsWith(r + '/'));
  router.use((req, res, next) => {
    if ((req.method !== 'GET' && req.method !== 'HEAD') || isReserved(req.path)) return next();
    res.setHeader('Content-Security-Policy', CSP);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'no-referrer');
    next();
  });
  router.use(
    '/assets',
    express.static(path.join(dir, 'assets'), { immutable: true, maxAge: '365d', index: false, fallthrough: true }),
  );
  router.use(express.static(dir, { index: false, maxAge: 0 }));
  router.use((req, res, next) => {
    if ((req.method !== 'GET' && req.method !== 'HEAD') || isReserved(req.path)) return next();
    // A missing asset is a 404, not the page: a stale tab must not parse HTML as JavaScript.
    if (req.path.startsWith('/assets/') || /\.[a-z0-9]{1,8}$/i.test(req.path)) return next();
    // Only a browser navigation gets the page: an API client's unknown path (/v2/runs) keeps its JSON 404.
    if (!String(req.headers.accept ?? '').includes('text/html')) return next();
    if (!existsSync(index)) {
      return next(
        new ServiceError(503, 'console_not_built', 'The web console is not built: run `pnpm install` (or `node apps/console/ensure-built.mjs`).'),
      );
    }
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile(index);
  });
  return router;
}
