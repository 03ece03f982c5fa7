import { describe, expect, it } from '@jest/globals';
import { parseWorkflowPolicy } from './policy.js';
import { constraintsInSlots, runFields } from './run-fields.js';

const fieldsOf = (concurrency: unknown, data: unknown = { user: 'ada' }) =>
  runFields(parseWorkflowPolicy({ concurrency }).policy, { event: { id: 'evt_1', name: 'e', data, ts: 0 } });

describe('concurrency constraints in the scheduler\'s two slots', () => {
  it("puts the workflow's own constraints first and an env-scoped one second, with an unlimited first when it is alone", () => {
    expect(constraintsInSlots([{ limit: 3 }, { limit: 1, key: 'event.data.user' }])).toEqual([{ limit: 3 }, { limit: 1, key: 'event.data.user' }]);
    expect(constraintsInSlots([{ limit: 2, key: '"openai"', scope: 'env' }, { limit: 3 }])).toEqual([{ limit: 3 }, { limit: 2, key: '"openai"', scope: 'env' }]);
    expect(constraintsInSlots([{ limit: 2, key: '"openai"', scope: 'env' }])).toEqual([{ limit: 2_147_483_647 }, { limit: 2, key: '"openai"', scope: 'env' }]);
  });

  it('evaluates each key against the event and marks the shared slot', () => {
    expect(fieldsOf([{ limit: 5 }, { limit: 1, key: 'event.data.user' }])).toMatchObject({
      concurrencyKey: '', concurrencyLimit: 5, concurrencyKey2: 'ada', concurrencyLimit2: 1, concurrencyShared2: false,
    });
    expect(fieldsOf({ limit: 2, key: '"openai"', scope: 'env' })).toMatchObject({
      concurrencyKey: '', concurrencyLimit: 2_147_483_647, concurrencyKey2: 'openai', concurrencyLimit2: 2, concurrencyShared2: true,
    });
    expect(fieldsOf(undefined)).toMatchObject({ concurrencyLimit: 0, concurrencyLimit2: 0, concurrencyShared2: false });
  });

  it('makes a queued singleton a slot of limit 1 on its key', () => {
    const vars = { event: { id: 'evt_1', name: 'e', data: { user: 'ada' }, ts: 0 } };
    expect(runFields(parseWorkflowPolicy({ singleton: { key: 'event.data.user', mode: 'queue' } }).policy, vars)).toMatchObject({
      concurrencyKey: 'ada', concurrencyLimit: 1, concurrencyLimit2: 0, singletonKey: 'ada', singletonMode: 'queue',
    });
    expect(runFields(parseWorkflowPolicy({ singleton: { key: 'event.data.user', mode: 'skip' } }).policy, vars)).toMatchObject({ concurrencyLimit: 0, singletonMode: 'skip' });
  });
});
