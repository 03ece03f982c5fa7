import { describe, expect, it } from '@jest/globals';
import { slotFields } from './slot-fields.js';

describe("a run's flow-control columns", () => {
  it('keep both constraints and the hold beside a first limit', () => {
    expect(
      slotFields({ concurrencyKey: 'all', concurrencyLimit: 4, concurrencyKey2: 'ada', concurrencyLimit2: 1, concurrencyShared2: true, priority: BigInt(3), holdsSlots: true }),
    ).toEqual({ concurrencyKey: 'all', concurrencyLimit: 4, concurrencyKey2: 'ada', concurrencyLimit2: 1, concurrencyShared2: true, priority: 3, holdsSlots: true });
  });

  it('hold no key, second constraint or slot without a first limit', () => {
    expect(slotFields({ concurrencyKey: 'all', concurrencyLimit: 0, concurrencyKey2: 'ada', concurrencyLimit2: 1, concurrencyShared2: true, priority: 0, holdsSlots: true })).toEqual({
      concurrencyKey: null, concurrencyLimit: 0, concurrencyKey2: null, concurrencyLimit2: 0, concurrencyShared2: false, priority: 0, holdsSlots: false,
    });
  });

  it('name no second key without its limit, and the empty key when it has one unnamed', () => {
    expect(slotFields({ concurrencyKey: '', concurrencyLimit: 2, concurrencyKey2: 'ada', concurrencyShared2: true, priority: 0 })).toMatchObject({
      concurrencyKey: '', concurrencyKey2: null, concurrencyLimit2: 0, concurrencyShared2: false,
    });
    expect(slotFields({ concurrencyKey: '', concurrencyLimit: 2, concurrencyLimit2: 1, priority: 0 })).toMatchObject({ concurrencyKey2: '', concurrencyLimit2: 1 });
  });
});
