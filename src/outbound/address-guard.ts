// Where a URL someone else chose (a consumer's webhook endpoint) may make the gateway connect. Without it, a URL
// could reach what only the gateway can: Redis on loopback, a cloud's metadata service with its credentials, the
// admin listener, any private network. The host is resolved once, every address it resolves to is judged (one
// forbidden address refuses the whole name, or a DNS server answering several could pick per connection), and the
// client connects to the address judged, so a second lookup cannot answer differently (DNS rebinding). Hosts given
// as numbers in any form (2130706433, 0x7f.1, [::ffff:7f00:1]) are normalised by URL parsing before they are judged,
// and IPv6 forms that carry an IPv4 address are judged by that address too.
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { OutboundError } from './errors.js';

export interface CheckedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to every address it has (node:dns lookup with all: true). */
export type Lookup = (hostname: string) => Promise<ReadonlyArray<{ address: string; family: number }>>;

export interface AddressGuardOptions {
  /** CIDRs (or single addresses) that may be connected to although their range is refused: ["127.0.0.0/8"]. */
  allow: readonly string[];
  /** Default: node:dns lookup, every address. */
  lookup?: Lookup;
  /** The setting an operator changes to allow a refused address, named in the refusal. */
  allowSetting?: string;
}

export type RefusedRange = 'loopback' | 'private' | 'link_local' | 'multicast' | 'unspecified' | 'carrier_grade_nat' | 'broadcast' | 'reserved' | 'metadata';

const DESCRIBED: Record<RefusedRange, string> = {
  loopback: 'a loopback address',
  private: 'a private address',
  link_local: 'a link-local address',
  multicast: 'a multicast address',
  unspecified: 'an unspecified address',
  carrier_grade_nat: 'a carrier-grade NAT address',
  broadcast: 'a broadcast address',
  reserved: 'a reserved address',
  metadata: 'a cloud metadata address',
};

/** Instance metadata services: AWS, GCP, Azure and OpenStack (and ECS's task endpoint), AWS over IPv6, Alibaba. */
const METADATA = new Set(['169.254.169.254', '169.254.170.2', 'fd00:ec2::254', '100.100.100.200']);

const IPV4_RANGES: Record<string, RefusedRange> = {
  unspecified: 'unspecified',
  broadcast: 'broadcast',
  multicast: 'multicast',
  linkLocal: 'link_local',
  loopback: 'loopback',
  carrierGradeNat: 'carrier_grade_nat',
  private: 'private',
};

const IPV6_RANGES: Record<string, RefusedRange> = {
  unspecified: 'unspecified',
  linkLocal: 'link_local',
  multicast: 'multicast',
  loopback: 'loopback',
  uniqueLocal: 'private',
  deprecatedSiteLocal: 'private',
};

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** Whether text is a CIDR (or a single address) AddressGuard's allow list takes. */
export function isCidr(text: string): boolean {
  return parseAllow(text) !== undefined;
}

function parseAllow(text: string): [Address, number] | undefined {
  try {
    if (text.includes('/')) return ipaddr.parseCIDR(text);
    const single = ipaddr.parse(text);
    return [single, single.kind() === 'ipv4' ? 32 : 128];
  } catch {
    return undefined;
  }
}

/**
 * The IPv4 address inside an IPv6 form that carries one: mapped (::ffff:a.b.c.d), translated (::ffff:0:a.b.c.d),
 * NAT64 (64:ff9b::a.b.c.d), compatible (::a.b.c.d, deprecated) and 6to4 (2002:AABB:CCDD::).
 */
function embeddedIPv4(ip: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  const p = ip.parts;
  const low = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  const range = ip.range();
  if (range === 'ipv4Mapped' || range === 'rfc6145' || range === 'rfc6052') return low(p[6]!, p[7]!);
  if (range === '6to4') return low(p[1]!, p[2]!);
  if (p.slice(0, 6).every((x) => x === 0) && range !== 'unspecified' && range !== 'loopback') return low(p[6]!, p[7]!);
  return undefined;
}

/** The refused range an address is in, or undefined for a public unicast address. */
export function refusedRange(ip: Address): RefusedRange | undefined {
  if (METADATA.has(ip.toNormalizedString()) || METADATA.has(ip.toString())) return 'metadata';
  if (ip.kind() === 'ipv4') {
    const range = ip.range();
    if (range === 'unicast') return undefined;
    return IPV4_RANGES[range] ?? 'reserved';
  }
  const v6 = ip as ipaddr.IPv6;
  const inner = embeddedIPv4(v6);
  if (inner) {
    const innerRange = refusedRange(inner);
    if (innerRange) return innerRange;
    // A public address in a form nobody uses on purpose (compatible addresses were deprecated in 2006).
    const range = v6.range();
    return range === 'ipv4Mapped' || range === 'rfc6145' || range === 'rfc6052' || range === '6to4' ? undefined : 'reserved';
  }
  const range = v6.range();
  if (range === 'unicast') return undefined;
  return IPV6_RANGES[range] ?? 'reserved';
}

export class AddressGuard {
  private readonly allow: Array<[Address, number]>;
  private readonly lookup: Lookup;
  private readonly allowSetting: string;

  constructor(options: AddressGuardOptions) {
    this.allow = options.allow.map((text) => {
      const cidr = parseAllow(text);
      if (!cidr) throw new Error(`not a CIDR: ${JSON.stringify(text)}`);
      return cidr;
    });
    this.lookup = options.lookup ?? ((hostname) => dnsLookup(hostname, { all: true }));
    this.allowSetting = options.allowSetting ?? 'events.allowTargets';
  }

  /**
   * The address to connect to for a URL: the first its host resolves to, once every one is allowed. Throws an
   * OutboundError: address_refused (its code the range, or ERR_URL_SCHEME, ERR_URL_USERINFO, ERR_INVALID_URL), or
   * dns when the name does not resolve.
   */
  async check(url: string): Promise<CheckedAddress> {
    const host = hostOf(url);
    const literal = isIP(host);
    let answers: ReadonlyArray<{ address: string; family: number }>;
    if (literal) answers = [{ address: host, family: literal }];
    else {
      try {
        answers = await this.lookup(host);
      } catch (err) {
        const code = (err as { code?: unknown } | null)?.code;
        throw new OutboundError('dns', `${host} does not resolve`, typeof code === 'string' ? code : 'ENOTFOUND', { cause: err });
      }
      if (!Array.isArray(answers) || answers.length === 0) throw new OutboundError('dns', `${host} resolves to no address`, 'ENOTFOUND');
    }
    let first: CheckedAddress | undefined;
    for (const answer of answers) {
      const checked = this.judge(host, literal !== 0, answer?.address);
      first ??= checked;
    }
    return first!;
  }

  private judge(host: string, literal: boolean, address: unknown): CheckedAddress {
    let ip: Address;
    try {
      if (typeof address !== 'string') throw new Error('not a string');
      ip = ipaddr.parse(address);
    } catch {
      throw new OutboundError('address_refused', `${host} resolves to something that is not an IP address`, 'reserved');
    }
    const range = refusedRange(ip);
    if (range && !this.allowed(ip, range === 'metadata')) {
      const inner = ip.kind() === 'ipv6' ? embeddedIPv4(ip as ipaddr.IPv6) : undefined;
      const shown = inner ? `${ip.toString()} (${inner.toString()})` : ip.toString();
      const subject = literal ? `${shown} is` : `${host} resolves to ${shown},`;
      const how =
        range === 'metadata' ? `${this.allowSetting}, naming it alone (${shown.split(' ')[0]}/${ip.kind() === 'ipv4' ? 32 : 128})` : this.allowSetting;
      throw new OutboundError('address_refused', `${subject} ${DESCRIBED[range]}; allow it with ${how}`, range);
    }
    return { address: ip.toString(), family: ip.kind() === 'ipv4' ? 4 : 6 };
  }

  /**
   * Whether an allowed CIDR holds the address (or the IPv4 address inside it). A metadata address (`exactly`) is
   * allowed only by an entry naming it alone (/32, /128): opening 169.254.0.0/16 for a link-local receiver must not
   * also open the cloud's credentials service by accident.
   */
  private allowed(ip: Address, exactly: boolean): boolean {
    const forms: Address[] = [ip];
    if (ip.kind() === 'ipv6') {
      const inner = embeddedIPv4(ip as ipaddr.IPv6);
      if (inner) forms.push(inner);
    }
    return forms.some((form) =>
      this.allow.some(([net, bits]) => net.kind() === form.kind() && (!exactly || bits === (form.kind() === 'ipv4' ? 32 : 128)) && form.match(net, bits)),
    );
  }
}

/** The URL's host as the connection would use it (brackets off an IPv6 literal), or a refusal. */
function hostOf(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new OutboundError('address_refused', 'not a valid URL', 'ERR_INVALID_URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new OutboundError('address_refused', `only http: and https: URLs are allowed, not ${url.protocol}`, 'ERR_URL_SCHEME');
  if (url.username !== '' || url.password !== '')
    throw new OutboundError('address_refused', 'a URL with a user name or password is refused: send credentials in a header', 'ERR_URL_USERINFO');
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (host === '') throw new OutboundError('address_refused', 'the URL has no host', 'ERR_INVALID_URL');
  return host;
}
