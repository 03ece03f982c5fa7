import { describe, expect, it } from '@jest/globals';
import { toMs } from './duration.js';

describe('toMs', () => {
  it.each([
    [0, 0],
    [1500, 1500],
    [1.6, 2],
    ['250', 250],
    ['500ms', 500],
    ['30s', 30_000],
    ['1.5s', 1500],
    ['5m', 300_000],
    ['1h30m', 5_400_000],
    ['1h 30m', 5_400_000],
    ['2d', 172_800_000],
    ['1w', 604_800_000],
    ['1M', 60_000], // case-insensitive: minutes, not months
  ])('%j -> %d ms', (d, ms) => {
    expect(toMs(d)).toBe(ms);
  });

  it.each([-1, Number.NaN, Infinity, '', 'soon', '5 minutes', '5x', 'm5', '1h-30m'])('refuses %j', (d) => {
    expect(() => toMs(d as never, 'step.sleep("s")')).toThrow(TypeError);
  });

  it('names what was wrong', () => {
    expect(() => toMs('later', 'step.sleep("nap")')).toThrow(/step\.sleep\("nap"\) "later" is not a duration/);
  });
});
