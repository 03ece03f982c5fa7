import { ROOT_SCOPE, type LogLevel, type RunnerLogLine } from '@dws/protocol';
import { redact } from '@dws/protocol';

/** The logger a workflow handler receives. Lines ride back with the invoke reply. */
export interface WorkflowLogger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** A per-pass log buffer. */
export interface LogCollector {
  readonly logger: WorkflowLogger;
  /** Appends a line in the current scope (no-op once frozen). */
  write(level: LogLevel, message: string, fields?: unknown): void;
  /** Stops collecting and returns the lines: code still running after the reply is not reported. */
  freeze(): RunnerLogLine[];
  /** Takes the lines so far (they ride a checkpoint); collecting goes on. */
  take(): RunnerLogLine[];
  /** Puts taken lines back in front (their checkpoint was not stored). */
  restore(taken: RunnerLogLine[]): void;
}

/** Lines per pass kept for the reply; the reply as a whole is capped at 1 MiB (SPEC Limits). */
export const MAX_LOG_LINES_PER_PASS = 1000;
const MAX_MESSAGE_CHARS = 8192;

/**
 * Collects log lines for one pass. `scopeOf` names the enclosing step (or
 * `@root`); the per-scope `index` restarts at 0 every pass, so deterministic
 * code yields the same (scope, index) on every replay: the service dedupes on
 * it (SPEC Runner log line).
 */
export function createLogCollector(scopeOf: () => string, now: () => number = Date.now): LogCollector {
  const lines: RunnerLogLine[] = [];
  const counters = new Map<string, number>();
  let frozen = false;
  let dropped = 0;

  function write(level: LogLevel, message: string, fields?: unknown): void {
    if (frozen) return;
    const scope = scopeOf();
    const index = counters.get(scope) ?? 0;
    counters.set(scope, index + 1);
    if (lines.length >= MAX_LOG_LINES_PER_PASS) {
      dropped++;
      return;
    }
    let text = typeof message === 'string' ? message : String(message);
    if (text.length > MAX_MESSAGE_CHARS) text = `${text.slice(0, MAX_MESSAGE_CHARS)}… [truncated]`;
    const line: RunnerLogLine = { level, message: text, scope, index, tsMs: now() };
    if (fields !== undefined && fields !== null) {
      const clean = redact(fields);
      line.fields =
        typeof clean === 'object' && clean !== null && !Array.isArray(clean)
          ? (clean as Record<string, unknown>)
          : { value: clean };
    }
    lines.push(line);
  }

  const logger: WorkflowLogger = {
    debug: (m, f) => write('debug', m, f),
    info: (m, f) => write('info', m, f),
    warn: (m, f) => write('warn', m, f),
    error: (m, f) => write('error', m, f),
  };

  return {
    logger,
    write,
    freeze(): RunnerLogLine[] {
      if (!frozen && dropped > 0) {
        // Bypasses the cap on purpose so the loss is visible.
        const index = counters.get(ROOT_SCOPE) ?? 0;
        counters.set(ROOT_SCOPE, index + 1);
        lines.push({
          level: 'warn',
          message: `${dropped} log lines dropped: over ${MAX_LOG_LINES_PER_PASS} lines in one pass`,
          scope: ROOT_SCOPE,
          index,
          tsMs: now(),
        });
      }
      frozen = true;
      return lines;
    },
    take(): RunnerLogLine[] {
      return lines.splice(0);
    },
    restore(taken: RunnerLogLine[]): void {
      lines.unshift(...taken);
    },
  };
}
