/**
 * A workflow's step retry policy as registered (`retry` on a workflow in
 * POST /register). SPEC shows only `maxAttempts`; the backoff between
 * attempts takes Trigger.dev's names (`factor`, `minTimeoutInMs`,
 * `maxTimeoutInMs`, `randomize`), whose `retry.maxAttempts` SPEC already
 * shares. The invoker checks the shape at register time (an unknown field
 * is a 400, never ignored); the scheduler applies it to a failed step.
 */

/** Delay before attempt n + 1: min(maxTimeoutInMs, minTimeoutInMs * factor^(n - 1)), drawn from [half, all] of it when randomized. */
export interface RetryBackoff {
  minMs: number;
  factor: number;
  maxMs: number;
  randomize: boolean;
}

/** What a step waits without a policy: 1 s doubling to 30 s, randomized. */
export const DEFAULT_RETRY_BACKOFF: RetryBackoff = { minMs: 1000, factor: 2, maxMs: 30_000, randomize: true };

const FIELDS = ['maxAttempts', 'factor', 'minTimeoutInMs', 'maxTimeoutInMs', 'randomize'] as const;
/** The longest wait between two attempts a policy may ask for. */
export const MAX_RETRY_TIMEOUT_MS = 24 * 3_600_000;
const MAX_ATTEMPTS = 100;

/** Registration's check of `retry`: the message of what is wrong, or undefined when it is well formed. */
export function retryProblem(raw: unknown): string | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return 'retry must be an object.';
  const r = raw as Record<string, unknown>;
  for (const k of Object.keys(r)) {
    if (!(FIELDS as readonly string[]).includes(k)) return `retry.${k} is not a retry setting (${FIELDS.join(', ')}).`;
  }
  const int = (v: unknown, min: number, max: number) => v === undefined || (Number.isInteger(v) && (v as number) >= min && (v as number) <= max);
  if (r.maxAttempts !== undefined && !(Number.isInteger(r.maxAttempts) && (r.maxAttempts as number) >= 1)) return 'retry.maxAttempts must be a positive integer.';
  if (!(r.factor === undefined || (typeof r.factor === 'number' && r.factor >= 1 && r.factor <= 10))) return 'retry.factor must be a number from 1 to 10.';
  if (!int(r.minTimeoutInMs, 0, MAX_RETRY_TIMEOUT_MS)) return `retry.minTimeoutInMs must be an integer from 0 to ${MAX_RETRY_TIMEOUT_MS}.`;
  if (!int(r.maxTimeoutInMs, 0, MAX_RETRY_TIMEOUT_MS)) return `retry.maxTimeoutInMs must be an integer from 0 to ${MAX_RETRY_TIMEOUT_MS}.`;
  if (r.randomize !== undefined && typeof r.randomize !== 'boolean') return 'retry.randomize must be a boolean.';
  const b = toRetryBackoff(r);
  if (b.maxMs < b.minMs) return 'retry.maxTimeoutInMs must not be below minTimeoutInMs.';
  return undefined;
}

/** Attempts per step (SPEC Limits: 1, no retries, unless set), capped. */
export function toMaxAttempts(raw: unknown): number {
  const max = (raw as { maxAttempts?: unknown } | null | undefined)?.maxAttempts;
  return typeof max === 'number' && Number.isInteger(max) && max >= 1 ? Math.min(max, MAX_ATTEMPTS) : 1;
}

/** The registered `retry` as a backoff, each field the default's where it is missing or malformed (registration refused those). */
export function toRetryBackoff(raw: unknown): RetryBackoff {
  const r = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
  const num = (v: unknown, min: number, max: number, dflt: number) => (typeof v === 'number' && Number.isFinite(v) && v >= min && v <= max ? v : dflt);
  const minMs = num(r.minTimeoutInMs, 0, MAX_RETRY_TIMEOUT_MS, DEFAULT_RETRY_BACKOFF.minMs);
  return {
    minMs,
    factor: num(r.factor, 1, 10, DEFAULT_RETRY_BACKOFF.factor),
    // Without a maximum the default's, unless the minimum is above it.
    maxMs: num(r.maxTimeoutInMs, 0, MAX_RETRY_TIMEOUT_MS, Math.max(DEFAULT_RETRY_BACKOFF.maxMs, minMs)),
    randomize: typeof r.randomize === 'boolean' ? r.randomize : DEFAULT_RETRY_BACKOFF.randomize,
  };
}

/** The wait before the next attempt after `attempts` failed ones (1-based). */
export function retryDelayMs(attempts: number, b: RetryBackoff = DEFAULT_RETRY_BACKOFF, rnd = Math.random): number {
  const base = Math.min(b.maxMs, b.minMs * b.factor ** Math.max(0, attempts - 1));
  return Math.round(b.randomize ? base / 2 + (rnd() * base) / 2 : base);
}
