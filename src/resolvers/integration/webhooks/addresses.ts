import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';

/**
 * Where a webhook may be sent: never to the gateway's own network (SSRF) unless the operator
 * allows it (`WEBHOOK_ALLOW_PRIVATE=on`). Checked when an endpoint is registered and again on
 * every attempt, by the DNS lookup the request itself connects with, so a name that resolves
 * to a public address at registration and to 127.0.0.1 later (DNS rebinding) is refused.
 */

const blocked = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  blocked.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['64:ff9b::', 96],
] as const)
  blocked.addSubnet(net, bits, 'ipv6');

/** Private, loopback, link-local, multicast or reserved: not somewhere a merchant's server lives. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family !== 6) return true;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1]) return blocked.check(mapped[1], 'ipv4');
  return blocked.check(address, 'ipv6');
}

export class PrivateAddressError extends Error {
  constructor(host: string) {
    super(`${host} resolves to a private or loopback address`);
    this.name = 'PrivateAddressError';
  }
}

/** Every address of `host`, refused when one is private (unless allowed). */
export async function checkedAddresses(host: string, allowPrivate: boolean): Promise<LookupAddress[]> {
  const bare = host.replace(/^\[|\]$/g, '');
  const addresses = isIP(bare)
    ? [{ address: bare, family: isIP(bare) }]
    : await new Promise<LookupAddress[]>((resolve, reject) =>
        dnsLookup(bare, { all: true }, (error, list) => (error ? reject(error) : resolve(list))),
      );
  if (!allowPrivate && addresses.some((a) => isPrivateAddress(a.address))) throw new PrivateAddressError(host);
  return addresses;
}

/**
 * A `lookup` for node:http(s) that connects only to checked addresses: the address the socket
 * uses is the one that was checked, with no second resolution in between.
 */
export function checkedLookup(allowPrivate: boolean) {
  return (
    hostname: string,
    options: { all?: boolean },
    callback: (error: Error | null, address: string | LookupAddress[], family?: number) => void,
  ) => {
    checkedAddresses(hostname, allowPrivate).then(
      (list) => {
        if (options.all) callback(null, list);
        else callback(null, list[0]?.address ?? '', list[0]?.family ?? 4);
      },
      (error: Error) => callback(error, ''),
    );
  };
}
