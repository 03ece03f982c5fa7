/**
 * Pure checks on request input, run once at the edge so no service, no
 * serialiser and no Postgres column ever sees input it cannot hold:
 * nesting deeper than a fixed bound (JSON.stringify, the protobuf and
 * Postgres' jsonb parser all recurse) and strings Postgres refuses (a lone
 * UTF-16 surrogate, U+0000).
 */

/**
 * Deepest nesting of objects and arrays a JSON request body may have; the
 * body itself is level 1. Deep enough for any real payload, and far enough
 * below every recursive parser on the path (a runner in another language
 * included) that the envelopes the services wrap around the payload still fit.
 */
export const MAX_JSON_DEPTH = 64;

/** What is wrong with one string. */
export type StringProblem = 'lone_surrogate' | 'nul';

// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Whether a string can be stored as text or jsonb: well-formed UTF-16 (no
 * lone surrogate, which has no UTF-8 form) and no U+0000 (Postgres text
 * cannot hold it). `undefined` when it is fine.
 */
export function stringProblem(s: string): StringProblem | undefined {
  if (s.includes('\u0000')) return 'nul';
  if (LONE_SURROGATE.test(s)) return 'lone_surrogate';
  return undefined;
}

/** A sentence for the error message: what the string holds. */
export function describeStringProblem(p: StringProblem): string {
  return p === 'nul' ? 'holds U+0000 (NUL), which is not accepted' : 'holds a lone UTF-16 surrogate (e.g. \\ud800 without its pair), which is not valid Unicode';
}

/**
 * Whether JSON text nests objects and arrays deeper than `max`, read from
 * the text itself (brackets inside strings do not count), so a 100,000-deep
 * body is refused without building it. Meant for text that may or may not
 * be valid JSON: it only counts, the parser judges the rest.
 */
export function jsonDepthExceeds(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      if (++depth > max) return true;
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) {
      depth--;
    }
  }
  return false;
}

/** The first bad string of a parsed JSON value: where it is (`data.a[2]`, `(key) data.b`) and what is wrong. */
export interface BadString {
  path: string;
  problem: StringProblem;
}

/**
 * Finds the first string (value or object key) in a parsed JSON value that
 * `stringProblem` refuses. Recursive: call it on a value whose depth is
 * already bounded (see `jsonDepthExceeds`).
 */
export function findBadString(value: unknown, path = ''): BadString | undefined {
  if (typeof value === 'string') {
    const problem = stringProblem(value);
    return problem ? { path, problem } : undefined;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const bad = findBadString(value[i], `${path}[${i}]`);
      if (bad) return bad;
    }
    return undefined;
  }
  if (typeof value === 'object' && value !== null) {
    for (const [k, v] of Object.entries(value)) {
      const at = path === '' ? k : `${path}.${k}`;
      const keyProblem = stringProblem(k);
      // The key itself is the bad string: name it by its parent, escaped, so the message stays printable.
      if (keyProblem) return { path: `${path === '' ? '' : `${path}.`}${JSON.stringify(k)} (a key)`, problem: keyProblem };
      const bad = findBadString(v, at);
      if (bad) return bad;
    }
  }
  return undefined;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The bytes as text when they are valid UTF-8 (RFC 8259: JSON on the wire is UTF-8), else `undefined`. */
export function decodeUtf8(bytes: Uint8Array): string | undefined {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}
