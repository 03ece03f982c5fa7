import { createHash } from 'node:crypto';
import { Environment, parse } from '@marcbachmann/cel-js';

export type CelProgram = (vars: Record<string, unknown>) => unknown;
export type CompileResult = { ok: true; program: CelProgram } | { ok: false; error: string };

const cache = new Map<string, CompileResult>();
const MAX_CACHE = 10_000;

/**
 * Compile a CEL expression once and cache it (triggers, eventIf, approval
 * gates and flow-control keys are evaluated far more often than written).
 * Never throws: a syntax error is a value the caller turns into a 400.
 */
export function compileCel(expr: string): CompileResult {
  const hit = cache.get(expr);
  if (hit) return hit;
  let result: CompileResult;
  try {
    const fn = parse(expr) as unknown as CelProgram;
    result = { ok: true, program: fn };
  } catch (err) {
    result = { ok: false, error: (err as Error).message };
  }
  if (cache.size >= MAX_CACHE) cache.clear();
  cache.set(expr, result);
  return result;
}

/** cel-js returns integers as BigInt; turn them into numbers at the boundary. */
export function fromCel(v: unknown): unknown {
  if (typeof v === 'bigint') return Number(v);
  if (Array.isArray(v)) return v.map(fromCel);
  if (v instanceof Map) return Object.fromEntries([...v.entries()].map(([k, x]) => [String(k), fromCel(x)]));
  return v;
}

/**
 * Evaluate a predicate. An expression that fails at run time (a missing
 * field, a type mismatch) is false, not an error: a filter that cannot be
 * evaluated does not match.
 */
export function celMatches(expr: string, vars: Record<string, unknown>): boolean {
  const c = compileCel(expr);
  if (!c.ok) return false;
  try {
    return c.program(vars) === true;
  } catch {
    return false;
  }
}

const envs = new Map<string, Environment>();

/**
 * Type-check an expression against the variables it may use (each `dyn`),
 * for rejecting it where it is written (register time) rather than where it
 * runs. Catches syntax errors, unknown variables and functions, and a
 * result of the wrong type.
 *
 * @param opts.variables names the expression may read, e.g. `['event']`
 * @param opts.type the result it must have: `bool` (filters), `int` (priority); `dyn` always passes
 * @returns the problem as a sentence, or undefined when it is fine
 */
export function checkCel(expr: string, opts: { variables: string[]; type?: 'bool' | 'int' }): string | undefined {
  const id = opts.variables.join(',');
  let env = envs.get(id);
  if (!env) {
    env = new Environment();
    for (const v of opts.variables) env.registerVariable(v, 'dyn');
    envs.set(id, env);
  }
  let res: { valid: boolean; type?: string; error?: Error };
  try {
    res = env.check(expr);
  } catch (err) {
    return firstLine((err as Error).message);
  }
  if (!res.valid) return firstLine(res.error?.message ?? 'does not compile');
  const t = res.type ?? 'dyn';
  if (opts.type === 'bool' && t !== 'bool' && t !== 'dyn') return `must be a boolean expression, not ${t}`;
  if (opts.type === 'int' && !['int', 'uint', 'double', 'dyn'].includes(t)) return `must be a number, not ${t}`;
  return undefined;
}

const firstLine = (m: string) => m.split('\n')[0]!.trim();

/** Longer keys are replaced by their SHA-256 (keys are stored and compared, never shown). */
const MAX_KEY = 200;

/**
 * Evaluate a flow-control key (concurrency, rateLimit, debounce, ...) to a
 * string: a string as is, a number or boolean as its text, anything else as
 * its JSON. A key longer than 200 characters (or holding a NUL) becomes
 * its SHA-256 hex.
 *
 * @returns undefined when the expression does not compile or fails at run
 *   time (a missing field): each caller decides what that means.
 */
export function celKey(expr: string, vars: Record<string, unknown>): string | undefined {
  const c = compileCel(expr);
  if (!c.ok) return undefined;
  let v: unknown;
  try {
    v = fromCel(c.program(vars));
  } catch {
    return undefined;
  }
  if (v === undefined) return undefined;
  const s = typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v);
  // Postgres text cannot hold NUL: such a key is stored by its hash too.
  return s.length > MAX_KEY || s.includes('\u0000') ? createHash('sha256').update(s).digest('hex') : s;
}

/**
 * Evaluate an expression to a whole number (priority), truncated and
 * clamped to +-2^31; undefined when it fails or is not a number.
 */
export function celInt(expr: string, vars: Record<string, unknown>): number | undefined {
  const c = compileCel(expr);
  if (!c.ok) return undefined;
  try {
    const v = fromCel(c.program(vars));
    if (typeof v !== 'number' || !Number.isFinite(v)) return undefined;
    return Math.max(-(2 ** 31), Math.min(2 ** 31 - 1, Math.trunc(v)));
  } catch {
    return undefined;
  }
}

