import type { Database } from '@dws/db';

/** A parameter as an SQL literal: EXECUTE's arguments must have types when the statement is parsed. */
function literal(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  if (Array.isArray(v)) return literal(`{${v.map((x) => `"${String(x).replace(/["\\]/g, (c) => `\\${c}`)}"`).join(',')}}`);
  return `'${String(v).replace(/'/g, "''")}'`;
}

/**
 * EXPLAIN of `text` as a service runs it: prepared, on a connection of the
 * driver, so with the plan its plan_cache_mode picks (the generic plan, made
 * without the values), where `explain <text>` with params plans for them.
 * `options` is EXPLAIN's, e.g. `(analyze, buffers)`.
 */
export async function preparedPlan(db: Database, text: string, params: unknown[], options = ''): Promise<string> {
  const rows = await db.tx(async (tx) => {
    await tx.query(`prepare explained as ${text}`);
    try {
      return await tx.query<{ 'QUERY PLAN': string }>(`explain ${options} execute explained(${params.map(literal).join(', ')})`);
    } finally {
      await tx.query('deallocate explained');
    }
  });
  return rows.map((r) => r['QUERY PLAN']).join('\n');
}

/** `db` with each call of its `query` and `tx` recorded in `calls` ('query', 'tx'), in order: what a code path costs in round trips. */
export function recordingDb(db: Database): { db: Database; calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    db: {
      ...db,
      query: (text, params) => (calls.push('query'), db.query(text, params)),
      tx: (fn) => (calls.push('tx'), db.tx(fn)),
    },
  };
}
