import { describe, expect, it } from '@jest/globals';
import { parseEvent } from './event-input.js';

describe('event input', () => {
  it('scopes triggers to targetApp over app, and to nothing without either; dedupe stays under app', () => {
    expect(parseEvent({ name: 'a' })).toMatchObject({ app: undefined, scope: undefined });
    expect(parseEvent({ name: 'a', app: 'shop' })).toMatchObject({ app: 'shop', scope: 'shop' });
    expect(parseEvent({ name: 'a', app: 'shop', targetApp: 'billing' })).toMatchObject({ app: 'shop', scope: 'billing', targetApp: 'billing' });
  });

  it("refuses a field an event does not take, pointing Inngest's id and ts at what this service does instead", () => {
    expect(() => parseEvent({ name: 'a', id: 'order-1' })).toThrow(
      'Unknown event field "id"; id: for an idempotent send (Inngest\'s event id) use dedupeId: a repeat within 24 h is dropped; an event takes name, app, data, dedupeId, runner, targetApp, session.',
    );
    expect(() => parseEvent({ name: 'a', ts: 1, user: {} })).toThrow(/^Unknown event fields "ts", "user"; ts: the service stamps receivedAt when the event arrives; an event takes /);
    expect(() => parseEvent({ name: 'a', data: { id: 1, ts: 2 }, dedupeId: 'x', session: 's' })).not.toThrow();
  });
});
