import type { ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { IdentifiedRequest } from '@dws/http';
import type { Logger } from '@dws/log';

/** One line per request at debug, with its request id (5xx are logged by the error middleware). */
export function accessLog(log: Logger): RequestHandler {
  return (req, res, next) => {
    logWhenDone(log, req, res, req.path);
    next();
  };
}

/** The access line of one request, written when its response is. */
export function logWhenDone(log: Logger, req: IdentifiedRequest, res: ServerResponse, path: string): void {
  const t0 = performance.now();
  res.on('finish', () => {
    if (log.isLevelEnabled('debug')) {
      log.debug({ requestId: req.requestId, method: req.method, path, status: res.statusCode, ms: Math.round(performance.now() - t0) }, 'request');
    }
  });
}
