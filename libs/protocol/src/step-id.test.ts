import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { createStepIdAllocator, hashStepId } from './step-id.js';

const golden = JSON.parse(readFileSync(new URL('../test/fixtures/step-ids.json', import.meta.url), 'utf8')) as {
  hashes: Record<string, string>;
};

describe('hashStepId', () => {
  it.each(Object.entries(golden.hashes))('matches the golden hash of %j', (id, hash) => {
    expect(hashStepId(id)).toBe(hash);
    // Second call comes from the cache and must agree.
    expect(hashStepId(id)).toBe(hash);
  });

  it('is lowercase hex of 64 chars', () => {
    expect(hashStepId('anything')).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('createStepIdAllocator', () => {
  it('disambiguates repeats positionally: x, x:1, x:2', () => {
    const alloc = createStepIdAllocator();
    expect(alloc.next('x')).toEqual({ name: 'x', hashed: golden.hashes['x'] });
    expect(alloc.next('a')).toEqual({ name: 'a', hashed: golden.hashes['a'] });
    expect(alloc.next('x')).toEqual({ name: 'x:1', hashed: golden.hashes['x:1'] });
    expect(alloc.next('x')).toEqual({ name: 'x:2', hashed: golden.hashes['x:2'] });
  });

  it('starts from zero for every allocator (one per pass)', () => {
    const a = createStepIdAllocator();
    a.next('x');
    expect(createStepIdAllocator().next('x').name).toBe('x');
  });

  it('never hands out a name twice, even against an explicit suffixed id', () => {
    const alloc = createStepIdAllocator();
    const names = ['x', 'x:1', 'x', 'x', 'x:1'].map((id) => alloc.next(id).name);
    expect(names).toEqual(['x', 'x:1', 'x:2', 'x:3', 'x:1:1']);
    expect(new Set(names).size).toBe(names.length);
  });
});
