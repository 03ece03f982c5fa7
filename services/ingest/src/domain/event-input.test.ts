import { describe, expect, it } from '@jest/globals';
import { parseEvent } from './event-input.js';

describe('event input', () => {
  it('scopes triggers to targetApp over app, and to nothing without either; dedupe stays under app', () => {
    expect(parseEvent({ name: 'a' })).toMatchObject({ app: undefined, scope: undefined });
    expect(parseEvent({ name: 'a', app: 'shop' })).toMatchObject({ app: 'shop', scope: 'shop' });
    expect(parseEvent({ name: 'a', app: 'shop', targetApp: 'billing' })).toMatchObject({ app: 'shop', scope: 'billing', targetApp: 'billing' });
  });
});
