import { describe, expect, it } from '@jest/globals';
import { afterAttempt } from './attempts.js';

describe('afterAttempt', () => {
  it('settles success, kills answers retrying cannot fix, retries the rest until the budget is spent', () => {
    expect(afterAttempt('succeeded', 200, 1, 5)).toEqual({ status: 'succeeded' });
    for (const code of [400, 401, 403, 404, 405, 410, 413, 422, 501]) expect(afterAttempt('http_error', code, 1, 5)).toEqual({ status: 'dead' });
    for (const code of [302, 408, 409, 429, 500, 502, 503]) expect(afterAttempt('http_error', code, 1, 5).status).toBe('failed');
    expect(afterAttempt('skipped', undefined, 1, 5)).toEqual({ status: 'dead' });
    expect(afterAttempt('timeout', undefined, 5, 5)).toEqual({ status: 'exhausted' });
  });

  it('backs off 5 s, 20 s, 80 s, 320 s, jittered between half and the whole', () => {
    expect([1, 2, 3, 4].map((n) => afterAttempt('connection_error', undefined, n, 5, () => 1).retryInMs)).toEqual([5_000, 20_000, 80_000, 320_000]);
    expect(afterAttempt('connection_error', undefined, 2, 5, () => 0).retryInMs).toBe(10_000);
    expect(afterAttempt('timeout', undefined, 1, 5, () => 1, 10).retryInMs).toBe(10);
  });
});
