import { describe, expect, it } from '@jest/globals';
import { invokedRunSlots } from './invoked-flow.js';

const slots = (config: unknown, input: unknown = { user: 'ada' }) => invokedRunSlots(config, JSON.stringify(input), 0);

describe("a child run's flow control", () => {
  it("evaluates its workflow's concurrency keys and priority over its input", () => {
    expect(slots({ concurrency: [{ limit: 5 }, { limit: 1, key: 'event.data.user' }], priority: 'event.data.rank' }, { user: 'ada', rank: 7 })).toEqual({
      concurrencyKey: '', concurrencyLimit: 5, concurrencyKey2: 'ada', concurrencyLimit2: 1, concurrencyShared2: false, priority: 7, holdsSlots: false,
    });
    expect(slots({ concurrency: { limit: 2, key: '"model-api"', scope: 'env' } })).toMatchObject({
      concurrencyLimit: 2_147_483_647, concurrencyKey2: 'model-api', concurrencyLimit2: 2, concurrencyShared2: true,
    });
  });

  it('holds a queued singleton\'s slot of limit 1; skip and cancel do not apply to a child', () => {
    expect(slots({ singleton: { key: 'event.data.user', mode: 'queue' } })).toMatchObject({ concurrencyKey: 'ada', concurrencyLimit: 1, holdsSlots: true });
    expect(slots({ singleton: { key: 'event.data.user', mode: 'skip' } })).toBeUndefined();
    expect(slots({ throttle: { limit: 1, period: '1s' } })).toBeUndefined();
  });

  it('a key that does not evaluate over the input shares the empty key; no config, no flow control', () => {
    expect(slots({ concurrency: { limit: 1, key: 'event.data.user' } }, { other: 1 })).toMatchObject({ concurrencyKey: '', concurrencyLimit: 1 });
    expect(slots(undefined)).toBeUndefined();
    expect(slots({ name: 'plain' })).toBeUndefined();
  });
});
