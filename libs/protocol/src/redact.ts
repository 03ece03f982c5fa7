/** The value that replaces a sensitive field. */
export const REDACTED = '[REDACTED]';

// Compared after lowercasing and dropping `-` and `_`, as a suffix, so
// `apiKey`, `api_key`, `x-api-key`, `githubToken`, `dbPassword` and
// `set-cookie` are all caught. Over-redacting a log field is cheap;
// leaking a credential into stored logs is not.
const SENSITIVE_SUFFIXES = [
  'password',
  'secret',
  'token',
  'authorization',
  'apikey',
  'accesstoken',
  'refreshtoken',
  'privatekey',
  'cookie',
];

/** True when a field with this key must not leave the runner. */
export function isSensitiveKey(key: string): boolean {
  const k = key.toLowerCase().replace(/[-_]/g, '');
  return SENSITIVE_SUFFIXES.some((s) => k.endsWith(s));
}

const MAX_DEPTH = 12;

/**
 * A deep, JSON-safe copy of `value` with every sensitive key's value
 * replaced by `[REDACTED]`, at any depth. Cycles become `[Circular]`;
 * bigints become strings; Errors become `{ name, message, stack }`;
 * functions and symbols are dropped.
 */
export function redact(value: unknown): unknown {
  return walk(value, new WeakSet(), 0);
}

function walk(value: unknown, seen: WeakSet<object>, depth: number): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return Number.isFinite(value) ? value : null;
    case 'bigint':
      return value.toString();
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
  }
  if (value === null) return null;
  const obj = value as object;
  if (seen.has(obj)) return '[Circular]';
  if (depth >= MAX_DEPTH) return '[Truncated]';
  seen.add(obj);
  try {
    if (obj instanceof Error) {
      const out: Record<string, unknown> = { name: obj.name, message: obj.message };
      if (obj.stack) out.stack = obj.stack;
      return out;
    }
    if (obj instanceof Date) return Number.isNaN(obj.getTime()) ? null : obj.toISOString();
    if (ArrayBuffer.isView(obj)) return `[Binary ${obj.byteLength} bytes]`;
    if (Array.isArray(obj)) return obj.map((v) => walk(v, seen, depth + 1) ?? null);
    if (obj instanceof Map)
      return walkEntries(
        [...obj.entries()].map(([k, v]) => [String(k), v]),
        seen,
        depth,
      );
    if (obj instanceof Set) return [...obj].map((v) => walk(v, seen, depth + 1) ?? null);
    const toJSON = (obj as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') return walk(toJSON.call(obj), seen, depth + 1);
    return walkEntries(Object.entries(obj), seen, depth);
  } finally {
    // A shared (non-cyclic) reference seen twice is not a cycle.
    seen.delete(obj);
  }
}

function walkEntries(entries: Array<[string, unknown]>, seen: WeakSet<object>, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of entries) {
    if (isSensitiveKey(k)) {
      out[k] = REDACTED;
      continue;
    }
    const w = walk(v, seen, depth + 1);
    if (w !== undefined) out[k] = w;
  }
  return out;
}
