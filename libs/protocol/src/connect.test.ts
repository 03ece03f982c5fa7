import { describe, expect, it } from '@jest/globals';
import { connectUrl, encodeConnectFrame, parseConnectFrame } from './connect.js';

describe('connect frames', () => {
  it('encodes and parses the envelope', () => {
    const text = encodeConnectFrame('invoke', 'i-1', { body: '{}', signature: 't=1&s=00', protocolVersion: 1 });
    expect(parseConnectFrame(text)).toEqual({
      ok: true,
      value: { type: 'invoke', id: 'i-1', payload: { body: '{}', signature: 't=1&s=00', protocolVersion: 1 } },
    });
  });

  it('defaults a missing id and payload, refuses a bad envelope', () => {
    expect(parseConnectFrame('{"type":"hello"}')).toEqual({ ok: true, value: { type: 'hello', id: '', payload: null } });
    for (const bad of ['nope', '[]', '{}', '{"type":""}', '{"type":"x","id":7}']) expect(parseConnectFrame(bad).ok).toBe(false);
  });

  it('builds the WebSocket URL from the service URL', () => {
    expect(connectUrl('http://127.0.0.1:8288/v1')).toBe('ws://127.0.0.1:8288/v1/connect');
    expect(connectUrl('https://api.example.com/v1/')).toBe('wss://api.example.com/v1/connect');
  });
});
