import { describe, expect, it } from '@jest/globals';
import { afterAttempt } from './attempts.js';

describe('afterAttempt', () => {
  it('settles success, kills non-retryable 4xx, retries the rest until the budget is spent', () => {
    expect(afterAttempt('succeeded', 200, 1, 5)).toEqual({ status: 'succeeded' });
    expect(afterAttempt('http_error', 404, 1, 5)).toEqual({ status: 'dead' });
    expect(afterAttempt('http_error', 429, 1, 5).status).toBe('failed');
    expect(afterAttempt('http_error', 503, 2, 5).status).toBe('failed');
    expect(afterAttempt('timeout', undefined, 5, 5)).toEqual({ status: 'exhausted' });
    const r = afterAttempt('connection_error', undefined, 2, 5, () => 1);
    expect(r.retryInMs).toBe(20_000);
  });
});
