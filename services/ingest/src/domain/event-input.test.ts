import { describe, expect, it } from '@jest/globals';
import { MAX_DELAY_MS, parseDelay } from '@dws/cel';
import { parseEvent } from './event-input.js';

describe('event input', () => {
  it('scopes triggers to targetApp over app, and to nothing without either; dedupe stays under app', () => {
    expect(parseEvent({ name: 'a' })).toMatchObject({ app: undefined, scope: undefined });
    expect(parseEvent({ name: 'a', app: 'shop' })).toMatchObject({ app: 'shop', scope: 'shop' });
    expect(parseEvent({ name: 'a', app: 'shop', targetApp: 'billing' })).toMatchObject({ app: 'shop', scope: 'billing', targetApp: 'billing' });
  });

  it("refuses a field an event does not take, pointing Inngest's id and ts at what this service does instead", () => {
    expect(() => parseEvent({ name: 'a', id: 'order-1' })).toThrow(
      'Unknown event field "id"; id: for an idempotent send (Inngest\'s event id) use dedupeId: a repeat within 24 h is dropped; an event takes name, app, data, dedupeId, runner, targetApp, session, delay, tags.',
    );
    expect(() => parseEvent({ name: 'a', ts: 1, user: {} })).toThrow(/^Unknown event fields "ts", "user"; ts: the service stamps receivedAt when the event arrives; to take it in later \(Inngest's ts in the future\) use delay; an event takes /);
    expect(() => parseEvent({ name: 'a', data: { id: 1, ts: 2 }, dedupeId: 'x', session: 's' })).not.toThrow();
  });

  it('takes a delay as a duration or a timestamp, due when it is in the future', () => {
    const now = Date.parse('2026-12-01T00:00:00Z');
    const due = (v: unknown) => {
      const d = parseDelay(v, now);
      return d.ok ? d.dueAtMs : d.error;
    };
    expect(due(undefined)).toBeUndefined();
    expect(due(1500)).toBe(now + 1500);
    expect(due('1h30m')).toBe(now + 5_400_000);
    expect(due('2026-12-24T09:00:00Z')).toBe(Date.parse('2026-12-24T09:00:00Z'));
    expect(due('2026-12-24T10:00:00+01:00')).toBe(Date.parse('2026-12-24T09:00:00Z'));
    // Nothing to wait for: taken in now.
    expect(due(0)).toBeUndefined();
    expect(due('2026-11-30T23:59:00Z')).toBeUndefined();
    expect(due(MAX_DELAY_MS)).toBe(now + MAX_DELAY_MS);
    expect(parseEvent({ name: 'a', delay: '5m' }, now)).toMatchObject({ dueAtMs: now + 300_000 });
    expect(parseEvent({ name: 'a' }, now)).not.toHaveProperty('dueAtMs');
  });

  it.each([
    ['a negative duration', -1, /delay must be a duration/],
    ['words', 'tomorrow', /delay must be a duration/],
    ['a timestamp without its zone', '2026-12-24T09:00:00', /delay must be a duration/],
    ['an impossible date', '2026-02-31T09:00:00Z', /not a valid timestamp/],
    ['epoch ms (more than a year as a duration)', Date.parse('2026-12-24T09:00:00Z'), /more than a year ahead/],
    ['a timestamp past a year', '2028-01-01T00:00:00Z', /more than a year ahead/],
    ['an object', { ms: 5 }, /delay must be a duration/],
  ])('refuses %s as a delay', (_what, delay, message) => {
    expect(() => parseEvent({ name: 'a', delay }, Date.parse('2026-12-01T00:00:00Z'))).toThrow(message);
  });
});
