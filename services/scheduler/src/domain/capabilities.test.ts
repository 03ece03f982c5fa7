import { describe, expect, it } from '@jest/globals';
import { capabilityGap, COMPLETABLE_OPS } from './capabilities.js';

describe('capabilities', () => {
  it('names nothing missing for the ops the service completes (Approval and Infer included)', () => {
    expect(capabilityGap('Approval')).toBeUndefined();
    expect(capabilityGap('Infer')).toBeUndefined();
    expect(COMPLETABLE_OPS.has('Infer')).toBe(true);
    for (const op of COMPLETABLE_OPS) expect(capabilityGap(op)).toBeUndefined();
    // An op SPEC does not define is decide()'s unrecognized case, not a capability gap.
    expect(capabilityGap('Teleport')).toBeUndefined();
    expect(capabilityGap('toString')).toBeUndefined();
  });
});
