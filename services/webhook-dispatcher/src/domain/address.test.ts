import { describe, expect, it } from '@jest/globals';
import { checkUrl, checkUrlSyntax, isPrivateAddress } from './address.js';

describe('outbound address safety', () => {
  it('knows loopback, link-local, private and mapped addresses from public ones', () => {
    for (const a of ['127.0.0.1', '10.1.2.3', '172.20.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1']) {
      expect([a, isPrivateAddress(a)]).toEqual([a, true]);
    }
    for (const a of ['8.8.8.8', '1.1.1.1', '2606:4700::1111', '172.32.0.1']) expect([a, isPrivateAddress(a)]).toEqual([a, false]);
  });

  it('refuses non-http URLs always and private hosts unless allowed', async () => {
    expect(checkUrlSyntax('ftp://example.com/x')?.reason).toBe('invalid');
    expect(checkUrlSyntax('not a url')?.reason).toBe('invalid');
    expect(await checkUrl('http://127.0.0.1:9/x', false)).toMatchObject({ reason: 'private' });
    expect(await checkUrl('http://[::1]:9/x', false)).toMatchObject({ reason: 'private' });
    expect(await checkUrl('http://localhost:9/x', false)).toMatchObject({ reason: 'private' });
    expect(await checkUrl('http://127.0.0.1:9/x', true)).toBeUndefined();
    expect(await checkUrl('https://8.8.8.8/x', false)).toBeUndefined();
  });
});
