import { describe, expect, it } from '@jest/globals';
import { ids, randomPooled } from './ids.js';

describe('ids', () => {
  it('are prefixed, time-ordered and unique across pool refills', () => {
    const seen = new Set<string>();
    let prev = '';
    // 10 bytes each: 2,000 ids drain the 4 KiB pool several times.
    for (let i = 0; i < 2000; i++) {
      const id = ids.run();
      expect(id).toMatch(/^run_[0-9a-hjkmnp-tv-z]{26}$/);
      // Strictly increasing, also within one millisecond: rows sharing a created_at list in id order.
      expect(id.slice(4) > prev.slice(4)).toBe(true);
      seen.add(id);
      prev = id;
    }
    expect(seen.size).toBe(2000);
  });

  it('hands out pooled bytes that are never shared with a later caller', () => {
    const a = randomPooled(8);
    const copy = Buffer.from(a);
    for (let i = 0; i < 1000; i++) randomPooled(16);
    expect(a.equals(copy)).toBe(true);
    expect(randomPooled(5000)).toHaveLength(5000);
  });
});
