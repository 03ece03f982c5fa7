import { describe, expect, it } from '@jest/globals';
import { celInt, celKey, celMatches, checkCel, compileCel, fromCel } from './index.js';

describe('cel', () => {
  it('compiles once and evaluates predicates over the event', () => {
    expect(compileCel('event.data.amount > 10').ok).toBe(true);
    expect(celMatches('event.data.amount > 10', { event: { data: { amount: 20 } } })).toBe(true);
    expect(celMatches('event.data.amount > 10', { event: { data: { amount: 5 } } })).toBe(false);
    expect(celMatches('event.data.plan == "pro"', { event: { data: { plan: 'pro' } } })).toBe(true);
  });
  it('reports a compile error as a value', () => {
    const c = compileCel('event.data. ==');
    expect(c.ok).toBe(false);
  });
  it('treats a runtime error as no match', () => {
    expect(celMatches('event.data.missing.deep == 1', { event: { data: {} } })).toBe(false);
  });
  it('converts BigInt results', () => {
    const c = compileCel('1 + 2');
    expect(c.ok && fromCel(c.program({}))).toBe(3);
  });
  it('type-checks against declared variables', () => {
    expect(checkCel('event.data.n > 1', { variables: ['event'], type: 'bool' })).toBeUndefined();
    expect(checkCel('args.x > 1', { variables: ['event'] })).toMatch(/Unknown variable: args/);
    expect(checkCel('nope(1)', { variables: ['event'] })).toMatch(/no matching overload/);
    expect(checkCel('"x"', { variables: ['event'], type: 'bool' })).toMatch(/boolean/);
    expect(checkCel('event.data.vip ? 10 : 0', { variables: ['event'], type: 'int' })).toBeUndefined();
  });
  it('evaluates keys to strings and priorities to numbers', () => {
    const vars = { event: { data: { user: 'u1', n: 7, o: { a: [1, 2] }, long: 'x'.repeat(300) } } };
    expect(celKey('event.data.user', vars)).toBe('u1');
    expect(celKey('event.data.n', vars)).toBe('7');
    expect(celKey('event.data.o', vars)).toBe('{"a":[1,2]}');
    expect(celKey('event.data.user + "-" + string(event.data.n)', vars)).toBe('u1-7');
    expect(celKey('event.data.long', vars)).toMatch(/^[0-9a-f]{64}$/);
    expect(celKey('event.data.missing', vars)).toBeUndefined();
    expect(celInt('event.data.user == "u1" ? 120 : 0', vars)).toBe(120);
    expect(celInt('event.data.n', vars)).toBe(7);
    expect(celInt('event.data.user', vars)).toBeUndefined();
  });
});
