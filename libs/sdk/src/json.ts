import { NonRetriableError } from './errors.js';

/** SPEC Limits: an invoke response over 1 MiB fails the invoke. */
export const MAX_REPLY_BYTES = 1024 * 1024;

/**
 * Largest serialised opcode: the rest of the reply (envelope, logs) needs
 * room too, so one step result may not take the whole 1 MiB.
 */
export const MAX_OPCODE_BYTES = MAX_REPLY_BYTES - 64 * 1024;

export interface Normalised {
  /** A fresh copy, as the service would hand it back on replay. */
  value: unknown;
  /** Its JSON text. */
  text: string;
}

/**
 * JSON-normalises a value the way it will look after a round trip through
 * the service, so the first pass and a replay see the same thing.
 * `undefined` (and anything JSON drops at top level) becomes `null`.
 *
 * @throws NonRetriableError when the value cannot be serialised, or is so
 *   large the invoke reply could not carry it: retrying cannot fix either.
 */
export function normalise(value: unknown, what: string, maxBytes = MAX_OPCODE_BYTES): Normalised {
  if (value === undefined) return { value: null, text: 'null' };
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new NonRetriableError(`${what} is not JSON-serialisable: ${(err as Error).message}`, { cause: err });
  }
  if (text === undefined) return { value: null, text: 'null' };
  // Cheap upper bound first: UTF-8 is at most 3 bytes per UTF-16 unit.
  if (text.length * 3 > maxBytes) {
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes > maxBytes) {
      throw new NonRetriableError(`${what} is ${bytes} bytes of JSON; an invoke reply is capped at 1 MiB`);
    }
  }
  return { value: JSON.parse(text) as unknown, text };
}

/** `normalise(...).value`. */
export function toJson(value: unknown, what: string): unknown {
  return normalise(value, what).value;
}
