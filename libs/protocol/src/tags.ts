import { invalid } from './errors.js';

/** Tags per event or run (Trigger.dev's limit: enough to name a tenant, a user and a few more). */
export const MAX_TAGS = 10;
/** Characters per tag. */
export const MAX_TAG_LENGTH = 128;

/**
 * Validate `tags` (POST /events, a run filter): an array of at most 10
 * strings of 1-128 characters without control characters; repeats are
 * dropped (the first of each kept, in order). Undefined, null or an empty
 * array is none. Throws a 400 with `code`.
 */
export function parseTags(value: unknown, code: string, field = 'tags'): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) throw invalid(code, `${field} must be an array of strings.`);
  if (value.length > MAX_TAGS) throw invalid(code, `At most ${MAX_TAGS} ${field}.`);
  const out: string[] = [];
  for (const t of value) {
    if (typeof t !== 'string') throw invalid(code, `${field} must be an array of strings.`);
    if (t.length === 0 || t.length > MAX_TAG_LENGTH) throw invalid(code, `Each of ${field} must be 1-${MAX_TAG_LENGTH} characters.`);
    if (/[\u0000-\u001f\u007f]/.test(t)) throw invalid(code, `A tag must not hold control characters.`);
    if (!out.includes(t)) out.push(t);
  }
  return out.length === 0 ? undefined : out;
}

/**
 * The tags of a run that several events start (a batch): theirs in order,
 * repeats dropped, the first 10 kept. A batch may gather more than one
 * tenant's events; past ten the rest are not the run's.
 */
export function mergeTags(lists: readonly (readonly string[] | null | undefined)[]): string[] | undefined {
  const out: string[] = [];
  for (const list of lists) for (const t of list ?? []) if (out.length < MAX_TAGS && !out.includes(t)) out.push(t);
  return out.length === 0 ? undefined : out;
}

/** The `tag` query parameter of a list (GET /runs, GET /events): given once a string, repeated an array; 400 `invalid_tag`. */
export const tagsOfQuery = (value: unknown): string[] | undefined => parseTags(typeof value === 'string' ? [value] : value, 'invalid_tag', 'tag');
