import { describe, expect, it } from '@jest/globals';
import { decodeUtf8, findBadString, jsonDepthExceeds, MAX_JSON_DEPTH, stringProblem } from './body-checks.js';

const nest = (depth: number, open = '[', close = ']') => open.repeat(depth) + close.repeat(depth);

describe('jsonDepthExceeds', () => {
  it('counts arrays and objects alike, the body itself as level 1', () => {
    expect(jsonDepthExceeds(nest(MAX_JSON_DEPTH), MAX_JSON_DEPTH)).toBe(false);
    expect(jsonDepthExceeds(nest(MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH)).toBe(true);
    expect(jsonDepthExceeds('{"a":{"b":[1]}}', 3)).toBe(false);
    expect(jsonDepthExceeds('{"a":{"b":[1]}}', 2)).toBe(true);
  });

  it('measures depth, not the number of containers', () => {
    const wide = `[${Array.from({ length: 10_000 }, () => '[{"a":[]}]').join(',')}]`;
    expect(jsonDepthExceeds(wide, 4)).toBe(false);
    expect(jsonDepthExceeds(wide, 3)).toBe(true);
  });

  it('ignores brackets inside strings, escaped quotes included', () => {
    expect(jsonDepthExceeds(JSON.stringify({ s: '[[[[{{{{' }), 1)).toBe(false);
    expect(jsonDepthExceeds(JSON.stringify({ s: 'x\\"[[[[' }), 1)).toBe(false);
    expect(jsonDepthExceeds(JSON.stringify({ s: '\\' }) + '[[', 1)).toBe(true);
  });

  it('refuses a 100,000-deep body from its text, unclosed or not', () => {
    expect(jsonDepthExceeds('['.repeat(100_000), MAX_JSON_DEPTH)).toBe(true);
    expect(jsonDepthExceeds(nest(100_000, '{"a":', '}'), MAX_JSON_DEPTH)).toBe(true);
  });
});

describe('stringProblem', () => {
  it.each([
    ['plain', undefined],
    ['', undefined],
    ['😀 a pair is fine', undefined],
    ['\ud83d\ude00', undefined],
    ['\ud800', 'lone_surrogate'],
    ['a\ud800b', 'lone_surrogate'],
    ['\udc00', 'lone_surrogate'],
    ['\ude00\ud83d', 'lone_surrogate'],
    ['\ud83d\ude00\ud83d', 'lone_surrogate'],
    ['a\u0000', 'nul'],
  ])('%j -> %s', (s, problem) => {
    expect(stringProblem(s)).toBe(problem);
  });
});

describe('findBadString', () => {
  it('finds a bad value anywhere and names where', () => {
    expect(findBadString({ name: 'ok', data: { a: [1, 'x', '\ud800'] } })).toEqual({ path: 'data.a[2]', problem: 'lone_surrogate' });
    expect(findBadString([{ name: 'ok' }, { name: '\u0000' }])).toEqual({ path: '[1].name', problem: 'nul' });
    expect(findBadString('\ud800')).toEqual({ path: '', problem: 'lone_surrogate' });
  });

  it('checks object keys too', () => {
    const bad = findBadString(JSON.parse('{"data":{"\\ud800":1}}'));
    expect(bad).toEqual({ path: 'data."\\ud800" (a key)', problem: 'lone_surrogate' });
  });

  it('passes good values of every JSON type', () => {
    expect(findBadString({ a: [1, 2.5, true, false, null, 'é', { b: '😀' }], c: {} })).toBeUndefined();
  });
});

describe('decodeUtf8', () => {
  it('decodes UTF-8 and refuses anything else', () => {
    expect(decodeUtf8(Buffer.from('{"a":"é😀"}'))).toBe('{"a":"é😀"}');
    expect(decodeUtf8(Buffer.from([0x7b, 0xff, 0x7d]))).toBeUndefined();
    // CESU-8 / a surrogate encoded as UTF-8 bytes is not UTF-8.
    expect(decodeUtf8(Buffer.from([0xed, 0xa0, 0x80]))).toBeUndefined();
  });
});
