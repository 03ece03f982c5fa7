/**
 * A duration: milliseconds as a number, or a string such as `"500ms"`,
 * `"30s"`, `"5m"`, `"1h30m"`, `"2d"`, `"1w"` (units may be combined,
 * largest first or not; whitespace is ignored).
 */
export type Duration = number | string;

const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

const PART = /(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)/gy;

/**
 * Milliseconds of a Duration, rounded to a whole number.
 *
 * @throws TypeError on a negative, non-finite or unparseable value: a bug in
 *   the workflow, so it fails the run rather than retrying it.
 */
export function toMs(d: Duration, what = 'duration'): number {
  if (typeof d === 'number') {
    if (!Number.isFinite(d) || d < 0) throw new TypeError(`${what} must be a non-negative number of ms, got ${d}`);
    return Math.round(d);
  }
  if (typeof d !== 'string') throw new TypeError(`${what} must be a number of ms or a string like "5m", got ${typeof d}`);
  const s = d.replace(/\s+/g, '').toLowerCase();
  if (s === '') throw new TypeError(`${what} is empty`);
  if (/^\d+(\.\d+)?$/.test(s)) return Math.round(Number(s));
  let total = 0;
  PART.lastIndex = 0;
  let consumed = 0;
  for (let m = PART.exec(s); m; m = PART.exec(s)) {
    total += Number(m[1]) * UNIT_MS[m[2]!]!;
    consumed = PART.lastIndex;
  }
  if (consumed !== s.length) throw new TypeError(`${what} "${d}" is not a duration like "500ms", "30s", "5m", "1h30m", "2d"`);
  return Math.round(total);
}
