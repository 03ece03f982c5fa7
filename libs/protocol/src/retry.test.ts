import { describe, expect, it } from '@jest/globals';
import { DEFAULT_RETRY_BACKOFF, retryDelayMs, retryProblem, toMaxAttempts, toRetryBackoff } from './retry.js';

describe('retry policy', () => {
  it('keeps the default backoff: 1 s doubling to 30 s, drawn from [half, all]', () => {
    expect(toRetryBackoff(undefined)).toEqual(DEFAULT_RETRY_BACKOFF);
    expect(toRetryBackoff({ maxAttempts: 3 })).toEqual(DEFAULT_RETRY_BACKOFF);
    expect(retryDelayMs(1, DEFAULT_RETRY_BACKOFF, () => 0)).toBe(500);
    expect(retryDelayMs(1, DEFAULT_RETRY_BACKOFF, () => 1)).toBe(1000);
    expect(retryDelayMs(3, DEFAULT_RETRY_BACKOFF, () => 1)).toBe(4000);
    expect(retryDelayMs(20, DEFAULT_RETRY_BACKOFF, () => 1)).toBe(30_000);
  });

  it("takes Trigger.dev's backoff fields", () => {
    const b = toRetryBackoff({ maxAttempts: 5, factor: 3, minTimeoutInMs: 200, maxTimeoutInMs: 5000, randomize: false });
    expect(b).toEqual({ minMs: 200, factor: 3, maxMs: 5000, randomize: false });
    expect([1, 2, 3, 4].map((n) => retryDelayMs(n, b, () => 0))).toEqual([200, 600, 1800, 5000]);
    // A minimum above the default maximum with no maximum given: the minimum, every time.
    expect(retryDelayMs(4, toRetryBackoff({ minTimeoutInMs: 60_000, factor: 1, randomize: false }))).toBe(60_000);
    expect(toMaxAttempts({ maxAttempts: 3 })).toBe(3);
    expect(toMaxAttempts({ maxAttempts: 1000 })).toBe(100);
    expect(toMaxAttempts(undefined)).toBe(1);
  });

  it('refuses at registration what it would not apply, naming the field', () => {
    expect(retryProblem(undefined)).toBeUndefined();
    expect(retryProblem({ maxAttempts: 3, factor: 1.5, minTimeoutInMs: 0, maxTimeoutInMs: 10, randomize: true })).toBeUndefined();
    expect(retryProblem(3)).toBe('retry must be an object.');
    expect(retryProblem({ maxAttempts: 3, backoff: 'exponential' })).toBe(
      'retry.backoff is not a retry setting (maxAttempts, factor, minTimeoutInMs, maxTimeoutInMs, randomize).',
    );
    expect(retryProblem({ maxAttempts: 0 })).toBe('retry.maxAttempts must be a positive integer.');
    expect(retryProblem({ factor: 0.5 })).toBe('retry.factor must be a number from 1 to 10.');
    expect(retryProblem({ minTimeoutInMs: -1 })).toMatch(/^retry\.minTimeoutInMs must be an integer from 0 to /);
    expect(retryProblem({ maxTimeoutInMs: 1.5 })).toMatch(/^retry\.maxTimeoutInMs must be an integer/);
    expect(retryProblem({ randomize: 'yes' })).toBe('retry.randomize must be a boolean.');
    expect(retryProblem({ minTimeoutInMs: 5000, maxTimeoutInMs: 1000 })).toBe('retry.maxTimeoutInMs must not be below minTimeoutInMs.');
  });
});
