import type { StepError } from '@dws/protocol';

// Markers live under Symbol.for keys, not in class identity: a user's bundle
// may load a second copy of the SDK, and `instanceof` would then lie
// (STYLE: check a marker, not instanceof).
const NON_RETRIABLE = Symbol.for('dws.sdk.nonRetriable');
const RETRY_AFTER = Symbol.for('dws.sdk.retryAfterMs');
const MEMOIZED = Symbol.for('dws.sdk.memoizedStepError');

type Marked = Record<symbol, unknown>;
const marker = (err: unknown, key: symbol): unknown =>
  typeof err === 'object' && err !== null ? (err as Marked)[key] : undefined;

/**
 * Throw from a step to fail the run now: the step is reported with
 * `retriable: false` and the remaining attempts are skipped. Thrown from the
 * handler itself, the invoke is answered 400 and the run fails.
 */
export class NonRetriableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NonRetriableError';
    (this as unknown as Marked)[NON_RETRIABLE] = true;
  }
}

/**
 * Throw from a step to retry it after `retryAfterMs` instead of the policy
 * backoff (e.g. honouring a 429's Retry-After). The retry still counts
 * against the workflow's maxAttempts.
 */
export class RetryAfterError extends Error {
  readonly retryAfterMs: number;
  constructor(message: string, retryAfterMs: number, options?: { cause?: unknown }) {
    super(message, options);
    if (!Number.isFinite(retryAfterMs) || retryAfterMs < 0) {
      throw new TypeError(`RetryAfterError: retryAfterMs must be a non-negative number, got ${retryAfterMs}`);
    }
    this.name = 'RetryAfterError';
    this.retryAfterMs = Math.round(retryAfterMs);
    (this as unknown as Marked)[RETRY_AFTER] = this.retryAfterMs;
  }
}

/**
 * What `step.run` rejects with when the memo says the step failed (its
 * retries are exhausted). Catch it to recover; let it escape the handler and
 * the run fails (400, non-retriable).
 */
export class StepFailedError extends Error {
  /** Human-readable (disambiguated) step name. */
  readonly stepName: string;
  constructor(stepName: string, error: StepError) {
    super(error.message);
    this.name = 'StepFailedError';
    this.stepName = stepName;
    // Keep the stack of the original failure: it is the useful one.
    if (error.stack !== undefined) this.stack = error.stack;
    (this as unknown as Marked)[MEMOIZED] = true;
  }
}

/** True for a NonRetriableError from any copy of the SDK. */
export function isNonRetriableError(err: unknown): boolean {
  return marker(err, NON_RETRIABLE) === true;
}

/** The retry delay of a RetryAfterError from any copy of the SDK, else undefined. */
export function retryAfterMsOf(err: unknown): number | undefined {
  const v = marker(err, RETRY_AFTER);
  return typeof v === 'number' ? v : undefined;
}

/** True for the rethrow of a memoized step failure. */
export function isStepFailedError(err: unknown): boolean {
  return marker(err, MEMOIZED) === true;
}

/** Converts anything thrown into the wire StepError. */
export function toStepError(err: unknown): StepError {
  if (err instanceof Error || (typeof err === 'object' && err !== null && typeof (err as Error).message === 'string')) {
    const e = err as Error;
    const out: StepError = { message: e.message };
    if (typeof e.stack === 'string') out.stack = e.stack;
    return out;
  }
  if (typeof err === 'string') return { message: err };
  try {
    return { message: JSON.stringify(err) ?? String(err) };
  } catch {
    return { message: String(err) };
  }
}
