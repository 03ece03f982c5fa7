import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/**
 * Addresses an outbound webhook may not reach unless the operator allows it
 * (SERVICE_WEBHOOK_ALLOW_PRIVATE): loopback, link-local (cloud metadata
 * lives there), private, carrier-grade NAT and unspecified ranges, in v4, v6
 * and v4-mapped v6 form.
 */
const blocked = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
] as const) {
  blocked.addSubnet(net, bits, 'ipv4');
}
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
] as const) {
  blocked.addSubnet(net, bits, 'ipv6');
}

export function isPrivateAddress(address: string): boolean {
  const v = isIP(address);
  if (v === 4) return blocked.check(address, 'ipv4');
  if (v !== 6) return false;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return blocked.check(mapped[1]!, 'ipv4');
  return blocked.check(address, 'ipv6');
}

/** Why a URL may not be POSTed to, or undefined when it may. */
export type UrlProblem = { reason: 'invalid' | 'private'; message: string };

/** Syntax only: an absolute http(s) URL with a host. */
export function checkUrlSyntax(raw: string): UrlProblem | undefined {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return { reason: 'invalid', message: 'url must be an absolute http or https URL.' };
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return { reason: 'invalid', message: 'url must use http or https.' };
  if (!u.hostname) return { reason: 'invalid', message: 'url must name a host.' };
  return undefined;
}

const hostOf = (u: URL): string => u.hostname.replace(/^\[|\]$/g, '');

/**
 * Resolves the URL's host and refuses it when any of its addresses is
 * private. Checked before every attempt, and again by the connection's own
 * lookup (see sender.ts), so a DNS answer that changes between the two
 * (rebinding) is still refused.
 */
export async function checkUrl(raw: string, allowPrivate: boolean): Promise<UrlProblem | undefined> {
  const bad = checkUrlSyntax(raw);
  if (bad || allowPrivate) return bad;
  const host = hostOf(new URL(raw));
  if (host === 'localhost' || host.endsWith('.localhost')) return { reason: 'private', message: `url resolves to a private address (${host}).` };
  const addrs = isIP(host) ? [host] : (await lookup(host, { all: true, verbatim: true }).catch(() => [])).map((a) => a.address);
  const priv = addrs.find(isPrivateAddress);
  return priv ? { reason: 'private', message: `url resolves to a private address (${priv}).` } : undefined;
}
