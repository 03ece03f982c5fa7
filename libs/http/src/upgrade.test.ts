import { describe, expect, it } from '@jest/globals';
import { checkWebSocketUpgrade } from './upgrade.js';

const good = {
  upgrade: 'websocket',
  connection: 'Upgrade',
  'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
  'sec-websocket-version': '13',
  'sec-websocket-protocol': 'service.connect.v0',
};
const check = (headers: Record<string, string | undefined>, method = 'GET') =>
  checkWebSocketUpgrade({ method, headers: { ...good, ...headers } }, { subprotocol: 'service.connect.v0' });

describe('checkWebSocketUpgrade', () => {
  it('accepts a well-formed handshake', () => {
    expect(check({})).toBeUndefined();
    expect(check({ upgrade: 'WebSocket', 'sec-websocket-version': '8', 'sec-websocket-protocol': 'other, service.connect.v0' })).toBeUndefined();
    expect(checkWebSocketUpgrade({ method: 'GET', headers: { ...good, 'sec-websocket-protocol': undefined } })).toBeUndefined();
  });

  it.each([
    ['a non-GET method', {}, 'POST', 405, 'method_not_allowed'],
    ['another protocol', { upgrade: 'h2c' }, 'GET', 400, 'invalid_upgrade'],
    ['no key', { 'sec-websocket-key': undefined }, 'GET', 400, 'invalid_websocket_key'],
    ['a short key', { 'sec-websocket-key': 'abc' }, 'GET', 400, 'invalid_websocket_key'],
    ['a key that is not base64', { 'sec-websocket-key': '!!!!!!!!!!!!!!!!!!!!!!==' }, 'GET', 400, 'invalid_websocket_key'],
    ['an old version', { 'sec-websocket-version': '7' }, 'GET', 426, 'unsupported_websocket_version'],
    ['no version', { 'sec-websocket-version': undefined }, 'GET', 426, 'unsupported_websocket_version'],
    ['a malformed subprotocol list', { 'sec-websocket-protocol': 'service.connect.v0, @@' }, 'GET', 400, 'invalid_subprotocol'],
    ['an empty subprotocol list', { 'sec-websocket-protocol': '' }, 'GET', 400, 'invalid_subprotocol'],
    ['a repeated subprotocol', { 'sec-websocket-protocol': 'a, a, service.connect.v0' }, 'GET', 400, 'invalid_subprotocol'],
    ['the required subprotocol missing', { 'sec-websocket-protocol': 'chat' }, 'GET', 400, 'subprotocol_required'],
  ])('refuses %s', (_what, headers, method, status, code) => {
    expect(check(headers, method)).toMatchObject({ status, code, message: expect.any(String) });
  });

  it('tells a client of another version which one to speak (RFC 6455 4.2.2)', () => {
    expect(check({ 'sec-websocket-version': '99' })?.headers).toEqual({ 'sec-websocket-version': '13' });
  });
});
