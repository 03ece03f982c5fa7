import { describe, expect, it } from '@jest/globals';
// @ts-expect-error a plain .mjs module of the build, without types
import { latin1Comments } from './latin1.mjs';

describe('latin1Comments', () => {
  it('replaces characters past Latin-1 in comments, one "?" per UTF-16 unit, and leaves code alone', () => {
    const code = ['// the response’s type — see below', 'const a = "\\u2019"; /* 🙂 */ const re = /µs/;', '/**', ' * → done', ' */', 'f(a);'].join('\n');
    const { code: out, outside } = latin1Comments(code);
    expect(out).toBe(['// the response?s type ? see below', 'const a = "\\u2019"; /* ?? */ const re = /µs/;', '/**', ' * ? done', ' */', 'f(a);'].join('\n'));
    expect(out.length).toBe(code.length);
    expect(outside).toBe(0);
  });

  it('counts what it cannot change outside comments (a raw character in a template or a regular expression)', () => {
    const { code: out, outside } = latin1Comments('const t = String.raw`a—b`; // —\nconst r = /→/;');
    expect(out).toBe('const t = String.raw`a—b`; // ?\nconst r = /→/;');
    expect(outside).toBe(2);
  });

  it('returns Latin-1 text as it is, without parsing it', () => {
    const code = 'const x = "café"; // not parsed: { unbalanced';
    expect(latin1Comments(code)).toEqual({ code, outside: 0 });
  });
});
