import { describe, expect, it } from '@jest/globals';
import { assertValidSubject, subjectMatches, subjectsOverlap } from './subjects.js';

describe('subjectMatches', () => {
  it.each([
    ['a.b.c', 'a.b.c', true],
    ['a.b.c', 'a.b', false],
    ['a.b', 'a.b.c', false],
    ['a.*.c', 'a.b.c', true],
    ['a.*.c', 'a.b.d', false],
    ['a.*', 'a.b.c', false],
    ['a.>', 'a.b', true],
    ['a.>', 'a.b.c.d', true],
    ['a.>', 'a', false],
    ['>', 'a', true],
    ['*', 'a', true],
    ['*', 'a.b', false],
    ['*.b.>', 'x.b.c', true],
    ['*.b.>', 'x.c.c', false],
    ['dlq.>', 'dlq.S.d', true],
  ])('%s matches %s: %s', (pattern, subject, want) => {
    expect(subjectMatches(pattern, subject)).toBe(want);
  });
});

describe('subjectsOverlap', () => {
  it.each([
    ['a.b', 'a.b', true],
    ['a.b', 'a.c', false],
    ['a.*', 'a.b', true],
    ['a.*', 'a.b.c', false],
    ['a.>', 'a.b.c', true],
    ['a.>', 'a', false],
    ['a.>', '*.b', true],
    ['>', 'x.y', true],
    ['*.x', 'a.*', true],
    ['*.x', 'a.y', false],
    ['a.*.c', 'a.b.>', true],
  ])('%s / %s: %s', (a, b, want) => {
    expect(subjectsOverlap(a, b)).toBe(want);
    expect(subjectsOverlap(b, a)).toBe(want);
  });
});

describe('assertValidSubject', () => {
  it('accepts plain and wildcard subjects where allowed', () => {
    expect(() => assertValidSubject('a.b.c', false)).not.toThrow();
    expect(() => assertValidSubject('a.*.>', true)).not.toThrow();
  });
  it.each([['', true], ['a..b', true], ['a.>.b', true], ['a.b*', true], ['a b', true], ['a.*', false]])(
    'rejects %j (wildcards allowed: %s)',
    (subject, allow) => {
      expect(() => assertValidSubject(subject, allow)).toThrow(/invalid subject/);
    },
  );
});
