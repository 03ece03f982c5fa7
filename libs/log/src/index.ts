import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

/** Paths redacted from every log line: keys and secrets never reach the logs. */
export const REDACT_PATHS = [
  'authorization',
  '*.authorization',
  'headers.authorization',
  'req.headers.authorization',
  'secret',
  '*.secret',
  'signingKey',
  '*.signingKey',
  'apiKey',
  '*.apiKey',
  'password',
  '*.password',
  'token',
  '*.token',
];

export interface LoggerOptions {
  /** @default 'info' */
  level?: LevelWithSilent;
  /** Bound as `service` on every line. */
  service?: string;
}

/** The one root logger of a process; services take `log.child({ service })`. */
export function createLogger(opts: LoggerOptions = {}): Logger {
  return pino({
    level: opts.level ?? 'info',
    base: opts.service ? { service: opts.service } : {},
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
