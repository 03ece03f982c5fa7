import { describe, expect, it } from '@jest/globals';
import { checkProtocolVersion, PROTOCOL_VERSION } from './version.js';

describe('checkProtocolVersion', () => {
  it('is 1', () => expect(PROTOCOL_VERSION).toBe(1));

  it.each([undefined, null, '', ' ', 1, '1', ' 1 ', ['1'], []])('accepts %j (absent or equal)', (v) => {
    expect(checkProtocolVersion(v)).toEqual({ ok: true });
  });

  it.each([0, 2, '0', '2', '1.0', 'v1', 1.5, true, {}, ['1', '2'], '01x'])(
    'rejects %j (present and different)',
    (v) => {
      const r = checkProtocolVersion(v);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.message).toMatch(/protocol version 1/);
    },
  );
});
