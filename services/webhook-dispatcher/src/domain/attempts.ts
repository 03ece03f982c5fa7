/** SPEC Limits: up to 5 attempts, 10 s each. */
export const MAX_ATTEMPTS = 5;
export const ATTEMPT_TIMEOUT_MS = 10_000;
/** Bound of a stored response snippet (SPEC leaves the value open). */
export const SNIPPET_BYTES = 1024;

export type AttemptOutcome = 'succeeded' | 'http_error' | 'timeout' | 'connection_error';

/** What a delivery becomes after an attempt (SPEC Webhook delivery statuses). */
export function afterAttempt(
  outcome: AttemptOutcome,
  statusCode: number | undefined,
  attempt: number,
  maxAttempts: number,
  rnd = Math.random,
): { status: 'succeeded' | 'failed' | 'exhausted' | 'dead'; retryInMs?: number } {
  if (outcome === 'succeeded') return { status: 'succeeded' };
  // A 4xx other than 408/429 will not get better by retrying.
  if (outcome === 'http_error' && statusCode !== undefined && statusCode >= 400 && statusCode < 500 && statusCode !== 408 && statusCode !== 429) {
    return { status: 'dead' };
  }
  if (attempt >= maxAttempts) return { status: 'exhausted' };
  const base = Math.min(10 * 60_000, 5_000 * 4 ** (attempt - 1));
  return { status: 'failed', retryInMs: Math.round(base / 2 + (rnd() * base) / 2) };
}
