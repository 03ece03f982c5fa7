/**
 * How values cross the driver boundary, the same on postgres.js and PGlite so
 * a query returns the same JS shapes on both. See README "Value mapping".
 */

/**
 * int8 -> number when it fits in a double exactly (|v| <= 2^53 - 1: every
 * counter, seq and epoch-ms we store), else bigint. Never silently rounded.
 * This is also PGlite's own default, so both drivers agree.
 */
export function parseInt8(text: string): number | bigint {
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : BigInt(text);
}

/** JSON params: a string is taken as JSON text already (what drizzle sends); anything else is stringified. */
export function serializeJson(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** Type OIDs drizzle wants left as Postgres text (dates, times, numeric[]); see drizzle-orm/postgres-js driver. */
export const TEXT_PASSTHROUGH_OIDS = [1082, 1083, 1114, 1184, 1115, 1182, 1185, 1231] as const;
