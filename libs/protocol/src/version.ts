/**
 * SPEC Versioning: the one integer wire version shared by the service and
 * runners. Version 1 wraps every invoke reply in an object so logs ride
 * with the result.
 */
export const PROTOCOL_VERSION = 1;

export type VersionCheck = { ok: true } | { ok: false; message: string };

/**
 * Lenient on absence, strict on mismatch (SPEC Versioning 3). `undefined`,
 * `null` and `''` are compatible; a number, or an integer string as read
 * from the `X-Service-Protocol` header, must equal PROTOCOL_VERSION. Anything
 * else present is a mismatch. Callers answer a mismatch with 400 on HTTP and
 * close the socket on Connect.
 */
export function checkProtocolVersion(v: unknown): VersionCheck {
  // Node gives a repeated header as an array; a single value is the usual case.
  if (Array.isArray(v)) {
    if (v.length === 0) return { ok: true };
    if (v.length > 1) return mismatch(v.join(', '));
    return checkProtocolVersion(v[0]);
  }
  if (v === undefined || v === null) return { ok: true };
  if (typeof v === 'string') {
    const trimmed = v.trim();
    if (trimmed === '') return { ok: true };
    if (/^\d+$/.test(trimmed) && Number(trimmed) === PROTOCOL_VERSION) return { ok: true };
    return mismatch(trimmed);
  }
  if (typeof v === 'number' && v === PROTOCOL_VERSION) return { ok: true };
  return mismatch(typeof v === 'number' ? String(v) : (JSON.stringify(v) ?? String(v)));
}

function mismatch(given: string): VersionCheck {
  return {
    ok: false,
    message: `Protocol version ${given} is not supported; this peer speaks protocol version ${PROTOCOL_VERSION}.`,
  };
}
