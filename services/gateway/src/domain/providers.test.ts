import { describe, expect, it } from '@jest/globals';
import { mergeProviders, providersView } from './providers.js';

describe('workspace providers', () => {
  it('merges a PATCH field by field; null removes a field or the whole entry', () => {
    const set = mergeProviders({}, { anthropic: { baseUrl: 'https://a.example', apiKey: 'k1' } });
    expect(set).toEqual({ anthropic: { baseUrl: 'https://a.example', apiKey: 'k1' } });
    expect(mergeProviders(set, { anthropic: { apiKey: 'k2' } })).toEqual({ anthropic: { baseUrl: 'https://a.example', apiKey: 'k2' } });
    expect(mergeProviders(set, { anthropic: { baseUrl: null } })).toEqual({ anthropic: { apiKey: 'k1' } });
    expect(mergeProviders(set, { anthropic: { baseUrl: null, apiKey: null } })).toEqual({});
    expect(mergeProviders(set, { anthropic: null, openai: { apiKey: 'o' } })).toEqual({ openai: { apiKey: 'o' } });
    expect(mergeProviders(set, {})).toEqual(set);
  });

  it('never shows a key', () => {
    expect(providersView({ anthropic: { baseUrl: 'https://a.example', apiKey: 'secret' }, openai: { baseUrl: 'https://o.example' } })).toEqual({
      anthropic: { baseUrl: 'https://a.example', apiKeySet: true },
      openai: { baseUrl: 'https://o.example', apiKeySet: false },
    });
  });
});
