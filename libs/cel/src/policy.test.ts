import { describe, expect, it } from '@jest/globals';
import { nextCronTick, parseCron, parseDuration, parseWorkflowPolicy } from './policy.js';

describe('workflow policy', () => {
  it('parses every flow-control field in the shapes users know', () => {
    const { policy, problems } = parseWorkflowPolicy({
      name: 'w',
      triggers: [{ event: 'order.*', if: 'event.data.total > 10' }, { event: 'order.created' }, { cron: 'TZ=Europe/Paris 0 9 * * *' }],
      concurrency: { limit: 3, key: 'event.data.user' },
      rateLimit: { limit: 10, period: '1m', key: 'event.data.user' },
      throttle: { limit: 5, period: 1000, burst: 2 },
      idempotency: 'event.data.orderId',
      singleton: { key: 'event.data.user' },
      priority: { run: 'event.data.vip == true ? 100 : 0' },
    });
    expect(problems).toEqual([]);
    expect(policy.events).toEqual([
      { event: 'order.', isPrefix: true, if: 'event.data.total > 10' },
      { event: 'order.created', isPrefix: false, if: '' },
    ]);
    expect(policy.crons).toEqual([{ cron: 'TZ=Europe/Paris 0 9 * * *', pattern: '0 9 * * *', tz: 'Europe/Paris' }]);
    expect(policy.concurrency).toEqual([{ limit: 3, key: 'event.data.user' }]);
    expect(policy.rateLimit).toEqual({ limit: 10, periodMs: 60_000, key: 'event.data.user' });
    expect(policy.throttle).toEqual({ limit: 5, periodMs: 1000, burst: 2 });
    expect(policy.idempotency).toBe('event.data.orderId');
    expect(policy.singleton).toEqual({ mode: 'skip', key: 'event.data.user' });
    expect(policy.priority).toBe('event.data.vip == true ? 100 : 0');
    expect(parseWorkflowPolicy({ debounce: { period: '5s', timeout: '1m' } }).policy.debounce).toEqual({ periodMs: 5000, timeoutMs: 60_000 });
    expect(parseWorkflowPolicy({ batchEvents: { maxSize: 10, timeout: '2s', key: 'event.data.k' } }).policy.batchEvents).toEqual({
      maxSize: 10, timeoutMs: 2000, key: 'event.data.k',
    });
    expect(parseWorkflowPolicy({ concurrency: 2 }).policy.concurrency).toEqual([{ limit: 2 }]);
    // Inngest's two constraints: the workflow's and one per key, each needed.
    expect(parseWorkflowPolicy({ concurrency: [{ limit: 10 }, { limit: 1, key: 'event.data.user', scope: 'fn' }] }).policy.concurrency).toEqual([
      { limit: 10 },
      { limit: 1, key: 'event.data.user' },
    ]);
    expect(parseWorkflowPolicy({}).policy).toEqual({ events: undefined, crons: [] });
    expect(parseWorkflowPolicy({ singleton: { key: 'event.data.user', mode: 'queue' } }).policy.singleton).toEqual({ mode: 'queue', key: 'event.data.user' });
  });

  it('refuses a queued singleton beside concurrency: it holds its slot from start to end, concurrency does not', () => {
    const { policy, problems } = parseWorkflowPolicy({ concurrency: { limit: 5 }, singleton: { mode: 'queue' } });
    expect(problems).toEqual(['singleton mode "queue" cannot be combined with concurrency: it is a limit of 1 per key held from start to end.']);
    expect(policy.singleton).toBeUndefined();
  });

  it('names every problem and leaves the broken part out', () => {
    const { policy, problems } = parseWorkflowPolicy({
      triggers: [{ event: 'a', if: 'event.data. ==' }, { event: 'b', if: 'evnt.data.x' }, { event: 'c', if: '"text"' }, { cron: '61 * * * *' }, { cron: '0 9 * * *', tz: 'Nope/Zone' }],
      rateLimit: { limit: 0, period: '1m' },
      throttle: { limit: 1, period: 'soon' },
      idempotency: 'nope(',
      singleton: { mode: 'later' },
      priority: '"high"',
      concurrency: [{ limit: 1 }, { limit: 2 }, { limit: 3, key: 'event.data.a' }],
      debounce: { period: '1s' },
      batchEvents: { maxSize: 1000, timeout: '1s' },
    });
    expect(policy.events).toEqual([]);
    expect(policy.crons).toEqual([]);
    expect(policy.rateLimit ?? policy.throttle ?? policy.idempotency ?? policy.singleton ?? policy.priority ?? policy.batchEvents).toBeUndefined();
    expect(problems.join('\n')).toMatch(/triggers\[0\]\.if does not compile/);
    expect(problems.join('\n')).toMatch(/triggers\[1\]\.if does not compile: Unknown variable: evnt/);
    expect(problems.join('\n')).toMatch(/triggers\[2\]\.if does not compile: must be a boolean expression, not string/);
    expect(problems.join('\n')).toMatch(/triggers\[3\]: cron "61 \* \* \* \*" is not valid/);
    expect(problems.join('\n')).toMatch(/Invalid time zone/);
    expect(problems.join('\n')).toMatch(/rateLimit\.limit must be an integer/);
    expect(problems.join('\n')).toMatch(/throttle\.period must be a duration/);
    expect(problems.join('\n')).toMatch(/idempotency does not compile/);
    expect(problems.join('\n')).toMatch(/singleton\.mode/);
    expect(problems.join('\n')).toMatch(/priority does not compile: must be a number/);
    expect(problems.join('\n')).toMatch(/concurrency: at most 2 constraints/);
    expect(problems.join('\n')).toMatch(/concurrency\[1\] repeats the key of another constraint/);
    expect(problems.join('\n')).toMatch(/batchEvents\.maxSize must be an integer from 1 to 100/);
  });

  it('parses cancelOn (Inngest\'s shape) with its CEL over event and async', () => {
    const { policy, problems } = parseWorkflowPolicy({
      name: 'w',
      cancelOn: [
        { event: 'order.cancelled', if: 'async.data.orderId == event.data.orderId', timeout: '1d' },
        { event: 'shop.*' },
      ],
    });
    expect(problems).toEqual([]);
    expect(policy.cancelOn).toEqual([
      { event: 'order.cancelled', isPrefix: false, if: 'async.data.orderId == event.data.orderId', withinMs: 86_400_000 },
      { event: 'shop.', isPrefix: true, if: '', withinMs: 0 },
    ]);
    // One object is one entry.
    expect(parseWorkflowPolicy({ cancelOn: { event: 'stop' } }).policy.cancelOn).toEqual([{ event: 'stop', isPrefix: false, if: '', withinMs: 0 }]);

    const bad = parseWorkflowPolicy({
      cancelOn: [{ event: '' }, 'stop', { event: 'x', if: 'async.data.' }, { event: 'y', if: 'other.id == 1' }, { event: 'z', timeout: 'soon' }, { event: 'ok' }],
    });
    expect(bad.policy.cancelOn).toEqual([{ event: 'ok', isPrefix: false, if: '', withinMs: 0 }]);
    expect(bad.problems).toEqual([
      'cancelOn[0] must be { event, if?, timeout? } with a non-empty event name.',
      'cancelOn[1] must be { event, if?, timeout? } with a non-empty event name.',
      expect.stringMatching(/^cancelOn\[2\]\.if does not compile/),
      expect.stringMatching(/^cancelOn\[3\]\.if does not compile/),
      expect.stringMatching(/^cancelOn\[4\]\.timeout must be a duration from 1ms to 366d/),
    ]);
    expect(parseWorkflowPolicy({ cancelOn: Array.from({ length: 11 }, () => ({ event: 'e' })) }).problems).toEqual(['cancelOn: at most 10 entries.']);
  });

  it('parses run timeouts: start and finish, each a duration up to a year', () => {
    expect(parseWorkflowPolicy({ timeouts: { start: '10s', finish: '2d' } })).toEqual({
      policy: expect.objectContaining({ timeouts: { startMs: 10_000, finishMs: 172_800_000 } }),
      problems: [],
    });
    expect(parseWorkflowPolicy({ timeouts: { finish: 500 } }).policy.timeouts).toEqual({ finishMs: 500 });
    expect(parseWorkflowPolicy({ timeouts: {} }).policy.timeouts).toBeUndefined();
    const bad = parseWorkflowPolicy({ timeouts: { start: 'soon', finish: '400d', run: '1h' } });
    expect(bad.policy.timeouts).toBeUndefined();
    expect(bad.problems).toEqual([
      'timeouts takes start and finish only (not run).',
      expect.stringMatching(/^timeouts\.start must be a duration from 1ms to 366d/),
      expect.stringMatching(/^timeouts\.finish must be a duration from 1ms to 366d/),
    ]);
    expect(parseWorkflowPolicy({ timeouts: '1h' }).problems).toEqual(['timeouts must be an object.']);
  });

  it('refuses debounce together with batchEvents', () => {
    const { policy, problems } = parseWorkflowPolicy({ debounce: { period: '1s' }, batchEvents: { maxSize: 2, timeout: '1s' } });
    expect(problems).toEqual(['debounce and batchEvents cannot be combined.']);
    expect(policy.debounce).toBeDefined();
    expect(policy.batchEvents).toBeUndefined();
  });

  it('reads durations', () => {
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration(' 2 d ')).toBe(172_800_000);
    expect(parseDuration(250)).toBe(250);
    expect(parseDuration('250')).toBe(250);
    expect(parseDuration('1y')).toBeUndefined();
    expect(parseDuration(-1)).toBeUndefined();
    expect(parseDuration(null)).toBeUndefined();
  });

  it('schedules cron ticks in the given zone, UTC otherwise', () => {
    const paris = parseCron({ cron: 'TZ=Europe/Paris 0 9 * * *' });
    const field = parseCron({ cron: '0 9 * * *', tz: 'Europe/Paris' });
    const utc = parseCron({ cron: '0 9 * * *' });
    if (!paris.ok || !field.ok || !utc.ok) throw new Error('should parse');
    expect(field.spec).toEqual({ cron: 'TZ=Europe/Paris 0 9 * * *', pattern: '0 9 * * *', tz: 'Europe/Paris' });
    // 09:00 in Paris is 08:00Z in winter and 07:00Z in summer.
    expect(nextCronTick(paris.spec, new Date('2025-01-10T12:00:00Z'))?.toISOString()).toBe('2025-01-11T08:00:00.000Z');
    expect(nextCronTick(paris.spec, new Date('2025-07-10T12:00:00Z'))?.toISOString()).toBe('2025-07-11T07:00:00.000Z');
    expect(nextCronTick(utc.spec, new Date('2025-07-10T12:00:00Z'))?.toISOString()).toBe('2025-07-11T09:00:00.000Z');
    // Strictly after: a tick is never its own successor.
    expect(nextCronTick(utc.spec, new Date('2025-07-11T09:00:00Z'))?.toISOString()).toBe('2025-07-12T09:00:00.000Z');
    const secs = parseCron({ cron: '*/2 * * * * *' });
    expect(secs.ok && nextCronTick(secs.spec, new Date('2025-01-01T00:00:00.500Z'))?.toISOString()).toBe('2025-01-01T00:00:02.000Z');
  });

  it("takes Inngest's env scope (a key's slots shared by the workspace's workflows) with a key, once; refuses account", () => {
    expect(parseWorkflowPolicy({ concurrency: [{ limit: 10 }, { limit: 2, key: '"openai"', scope: 'env' }] })).toEqual(
      expect.objectContaining({ problems: [], policy: expect.objectContaining({ concurrency: [{ limit: 10 }, { limit: 2, key: '"openai"', scope: 'env' }] }) }),
    );
    expect(parseWorkflowPolicy({ concurrency: { limit: 2, key: 'event.data.user', scope: 'account' } }).problems).toEqual([
      'concurrency.scope must be "fn" (per workflow) or "env" (shared by the workspace\'s workflows); "account" is not supported.',
    ]);
    expect(parseWorkflowPolicy({ concurrency: { limit: 2, scope: 'env' } }).problems).toEqual(['concurrency.key is required with scope "env": it names the shared slots.']);
    expect(parseWorkflowPolicy({ concurrency: [{ limit: 2, key: '"a"', scope: 'env' }, { limit: 3, key: '"b"', scope: 'env' }] }).problems).toEqual([
      'concurrency[1]: at most one constraint with scope "env".',
    ]);
    // The same key in two scopes is two sets of slots.
    expect(parseWorkflowPolicy({ concurrency: [{ limit: 2, key: 'event.data.u' }, { limit: 3, key: 'event.data.u', scope: 'env' }] }).problems).toEqual([]);
  });
});
