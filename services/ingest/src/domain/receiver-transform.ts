import { checkCel, compileCel, fromCel } from '@dws/cel';

/**
 * What a receiver makes of a verified post, CEL over `body` (the posted
 * JSON) and `headers` (the post's headers of interest, lowercase): whether
 * it becomes an event at all (`if`), the event's name (`name`, else the
 * receiver's `eventName`), its data (`data`, else the body) and its dedupeId
 * (`id`, else the partner's delivery-id header). GitHub's
 * `'github/' + headers['x-github-event']`, Stripe's `'stripe/' + body.type`.
 */
export interface ReceiverTransform {
  if?: string;
  name?: string;
  data?: string;
  id?: string;
}

const FIELDS = ['if', 'name', 'data', 'id'] as const;
const VARIABLES = ['body', 'headers'];
/** An expression longer than this is refused (they are evaluated on every post). */
export const MAX_TRANSFORM_EXPR = 1024;

/**
 * The transform of a create or PATCH body, checked as CEL where it is
 * written; undefined for none. Throws `problem(field, message)`'s error.
 */
export function parseTransform(v: unknown, problem: (field: string, message: string) => Error): ReceiverTransform | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw problem('transform', 'must be an object of CEL expressions (if, name, data, id).');
  const o = v as Record<string, unknown>;
  const out: ReceiverTransform = {};
  for (const k of Object.keys(o))
    if (!(FIELDS as readonly string[]).includes(k)) throw problem(`transform.${k}`, 'is not a field of a transform (if, name, data, id).');
  for (const k of FIELDS) {
    const e = o[k];
    if (e === undefined) continue;
    if (typeof e !== 'string' || e.trim() === '') throw problem(`transform.${k}`, 'must be a non-blank CEL expression.');
    if (e.length > MAX_TRANSFORM_EXPR) throw problem(`transform.${k}`, `is over ${MAX_TRANSFORM_EXPR} characters.`);
    const bad = checkCel(e, { variables: VARIABLES, ...(k === 'if' && { type: 'bool' as const }) });
    if (bad) throw problem(`transform.${k}`, `${bad}.`);
    out[k] = e;
  }
  return Object.keys(out).length ? out : undefined;
}

/** A post's event after the transform, or why there is none. */
export type Transformed =
  | { kind: 'event'; name: string; data: unknown; dedupeId: string | undefined }
  | { kind: 'filtered'; reason: string }
  | { kind: 'failed'; reason: string };

/**
 * Apply the receiver's transform to a verified post. `if` false (or failing
 * to evaluate, as every CEL filter here) filters the post out; `name`, `data`
 * or `id` failing to evaluate, or naming no string, fails it: the partner is
 * answered 422 and may post again once the receiver is mended.
 */
export function applyTransform(
  t: ReceiverTransform | undefined,
  post: { body: unknown; headers: Record<string, string> },
  plain: { name: string; dedupeId: string | undefined },
): Transformed {
  if (!t) return { kind: 'event', name: plain.name, data: post.body, dedupeId: plain.dedupeId };
  const vars = { body: post.body, headers: post.headers };
  const run = (field: keyof ReceiverTransform): { ok: true; value: unknown } | { ok: false; reason: string } => {
    const c = compileCel(t[field]!);
    if (!c.ok) return { ok: false, reason: `transform.${field} does not compile: ${c.error}` };
    try {
      return { ok: true, value: fromCel(c.program(vars)) };
    } catch (err) {
      return { ok: false, reason: `transform.${field} failed: ${firstLine((err as Error).message)}` };
    }
  };
  if (t.if !== undefined) {
    const r = run('if');
    if (!r.ok) return { kind: 'filtered', reason: r.reason };
    if (r.value !== true) return { kind: 'filtered', reason: 'transform.if is false' };
  }
  let name = plain.name;
  if (t.name !== undefined) {
    const r = run('name');
    if (!r.ok) return { kind: 'failed', reason: r.reason };
    if (typeof r.value !== 'string' || r.value === '')
      return { kind: 'failed', reason: `transform.name gave ${describe(r.value)}, not an event name` };
    name = r.value;
  }
  let data = post.body;
  if (t.data !== undefined) {
    const r = run('data');
    if (!r.ok) return { kind: 'failed', reason: r.reason };
    data = r.value === undefined ? null : r.value;
  }
  let dedupeId = plain.dedupeId;
  if (t.id !== undefined) {
    const r = run('id');
    if (!r.ok) return { kind: 'failed', reason: r.reason };
    if (typeof r.value === 'number' && Number.isFinite(r.value)) r.value = String(r.value);
    if (typeof r.value !== 'string' || r.value === '')
      return { kind: 'failed', reason: `transform.id gave ${describe(r.value)}, not a string` };
    dedupeId = r.value;
  }
  return { kind: 'event', name, data, dedupeId };
}

const firstLine = (m: string) => m.split('\n')[0]!.trim().slice(0, 200);
const describe = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'a list' : v === '' ? 'an empty string' : `a ${typeof v}`);
