/** SPEC Limits: up to 5 attempts, 10 s each (connect, headers and body together). */
export const MAX_ATTEMPTS = 5;
export const ATTEMPT_TIMEOUT_MS = 10_000;
/** Bound of a stored response snippet: the body is read no further than this (SPEC leaves the value open). */
export const SNIPPET_BYTES = 1024;
/** First retry delay; each later one is 4x the previous (5 s, 20 s, 80 s, 320 s), jittered down to half, capped at 10 min. */
export const BACKOFF_BASE_MS = 5_000;

export type AttemptOutcome = 'succeeded' | 'http_error' | 'timeout' | 'connection_error' | 'skipped';

/**
 * Answers that retrying cannot fix: the request itself is wrong for the
 * partner (400, 405, 413, 414, 415, 422), the partner refuses it (401, 403),
 * the URL is not there (404, 410) or the method is not implemented (501).
 * 408, 409, 425 and 429 are about timing and are retried; so is every 5xx
 * but 501, and a 3xx (redirects are not followed, and a temporary one may end).
 */
export const DEAD_STATUS_CODES: ReadonlySet<number> = new Set([400, 401, 403, 404, 405, 410, 413, 414, 415, 422, 501]);

export type AfterAttempt = { status: 'succeeded' | 'failed' | 'exhausted' | 'dead'; retryInMs?: number };

/** What a delivery becomes after an attempt (SPEC Webhook delivery statuses). */
export function afterAttempt(
  outcome: AttemptOutcome,
  statusCode: number | undefined,
  attempt: number,
  maxAttempts: number,
  rnd = Math.random,
  baseMs = BACKOFF_BASE_MS,
): AfterAttempt {
  if (outcome === 'succeeded') return { status: 'succeeded' };
  // skipped: the URL is invalid or refused (a private address); no retry changes that.
  if (outcome === 'skipped') return { status: 'dead' };
  if (outcome === 'http_error' && statusCode !== undefined && DEAD_STATUS_CODES.has(statusCode)) return { status: 'dead' };
  if (attempt >= maxAttempts) return { status: 'exhausted' };
  const base = Math.min(10 * 60_000, baseMs * 4 ** (attempt - 1));
  return { status: 'failed', retryInMs: Math.round(base / 2 + (rnd() * base) / 2) };
}
