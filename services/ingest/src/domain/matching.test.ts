import { describe, expect, it } from '@jest/globals';
import { parseWorkflowPolicy } from '@dws/cel';
import { cancelsOf, matchCancels, matchTriggers, triggersOf as fromPolicy } from './matching.js';

const triggersOf = (app: string, wf: string, config: Record<string, unknown>) => fromPolicy(app, wf, parseWorkflowPolicy(config).policy);

describe('trigger matching', () => {
  const index = [
    ...triggersOf('shop', 'on-order', { triggers: [{ event: 'order.created' }] }),
    ...triggersOf('shop', 'all-orders', { triggers: [{ event: 'order.*' }] }),
    ...triggersOf('shop', 'big-orders', { triggers: [{ event: 'order.created', if: 'event.data.total > 100' }] }),
    ...triggersOf('billing', 'implicit', {}),
    ...triggersOf('billing', 'cron-only', { triggers: [{ cron: '0 * * * *' }] }),
  ];
  it('matches exact names, prefixes and CEL filters', () => {
    const m = matchTriggers(index, { name: 'order.created', data: { total: 50 } });
    expect(m.map((x) => x.workflow).sort()).toEqual(['all-orders', 'on-order']);
    const big = matchTriggers(index, { name: 'order.created', data: { total: 500 } });
    expect(big.map((x) => x.workflow).sort()).toEqual(['all-orders', 'big-orders', 'on-order']);
  });
  it('gives a workflow without triggers an implicit trigger on its name; cron adds no event trigger', () => {
    expect(matchTriggers(index, { name: 'implicit', data: null })).toEqual([{ app: 'billing', workflow: 'implicit' }]);
    expect(matchTriggers(index, { name: 'cron-only', data: null })).toEqual([]);
  });
  it('scopes to one app when given a scope', () => {
    expect(matchTriggers(index, { name: 'order.created', data: {}, scope: 'billing' })).toEqual([]);
    expect(matchTriggers(index, { name: 'implicit', data: {}, scope: 'billing' })).toHaveLength(1);
    expect(matchTriggers(index, { name: 'implicit', data: {}, scope: 'shop' })).toEqual([]);
  });
});

describe('matchCancels', () => {
  const all = [
    ...cancelsOf('shop', 'order-flow', { cancelOn: [{ event: 'order.cancelled', isPrefix: false, if: 'async.data.id == event.data.id', withinMs: 0 }] }),
    ...cancelsOf('ops', 'cleanup', { cancelOn: [{ event: 'order.', isPrefix: true, if: '', withinMs: 60_000 }] }),
    ...cancelsOf('ops', 'none', {}),
  ];
  it('matches by name or prefix, leaving the if to the scheduler', () => {
    expect(matchCancels(all, { name: 'order.cancelled' })).toEqual([
      { app: 'shop', workflow: 'order-flow', if: 'async.data.id == event.data.id', withinMs: 0 },
      { app: 'ops', workflow: 'cleanup', if: '', withinMs: 60_000 },
    ]);
    expect(matchCancels(all, { name: 'order.shipped' })).toEqual([{ app: 'ops', workflow: 'cleanup', if: '', withinMs: 60_000 }]);
    expect(matchCancels(all, { name: 'other' })).toEqual([]);
  });
  it("scopes to the event's app as triggers do", () => {
    expect(matchCancels(all, { name: 'order.cancelled', scope: 'shop' })).toEqual([
      { app: 'shop', workflow: 'order-flow', if: 'async.data.id == event.data.id', withinMs: 0 },
    ]);
  });
});
