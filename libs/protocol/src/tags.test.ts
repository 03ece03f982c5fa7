import { describe, expect, it } from '@jest/globals';
import { MAX_TAGS, mergeTags, parseTags } from './tags.js';

describe('parseTags', () => {
  it('keeps tags in order, each once', () => {
    expect(parseTags(['tenant:acme', 'user:7', 'tenant:acme'], 'invalid_event')).toEqual(['tenant:acme', 'user:7']);
  });
  it('reads none from nothing or an empty array', () => {
    expect(parseTags(undefined, 'x')).toBeUndefined();
    expect(parseTags(null, 'x')).toBeUndefined();
    expect(parseTags([], 'x')).toBeUndefined();
  });
  it.each([
    [{ a: 1 }, 'must be an array of strings'],
    ['vip', 'must be an array of strings'],
    [[1], 'must be an array of strings'],
    [[''], '1-128 characters'],
    [['x'.repeat(129)], '1-128 characters'],
    [['a\nb'], 'control characters'],
    [Array.from({ length: MAX_TAGS + 1 }, (_, i) => `t${i}`), 'At most 10'],
  ])('refuses %j with a 400 under the caller\'s code', (value, message) => {
    expect(() => parseTags(value, 'invalid_event')).toThrow(expect.objectContaining({ status: 400, code: 'invalid_event', message: expect.stringContaining(message) }));
  });
});

describe('mergeTags', () => {
  it('joins lists in order, each tag once, at most ten', () => {
    expect(mergeTags([['a', 'b'], null, ['b', 'c']])).toEqual(['a', 'b', 'c']);
    expect(mergeTags([Array.from({ length: 8 }, (_, i) => `x${i}`), ['y1', 'y2', 'y3']])).toHaveLength(MAX_TAGS);
    expect(mergeTags([[], undefined])).toBeUndefined();
  });
});
