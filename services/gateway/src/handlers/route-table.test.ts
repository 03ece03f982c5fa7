import { describe, expect, it } from '@jest/globals';
import { ROUTES } from './route-table.js';

describe('the route table', () => {
  it('keeps an Idempotency-Key on every route that starts runs, so a retried call never starts them twice', () => {
    const unkept = ROUTES.filter((r) => r.startsRuns && !r.idempotencyKey).map((r) => `${r.method.toUpperCase()} ${r.path}`);
    expect(unkept).toEqual([]);
  });
});
