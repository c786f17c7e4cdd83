// The client key the anonymous limit meters a request under. Express's req.ip follows `trust proxy`, so with a
// trusting setting it is whatever X-Forwarded-For said: any text, of any length. Unchecked, every made-up value
// was a fresh bucket (the limit never bit) and a fresh Redis key of up to 16 KB. So only an IP literal is
// believed, else the connection's own peer; IPv6 clients are counted by /64 (one host usually holds a whole /64,
// so per-address buckets would hand it 2^64 of them); and the key is at most 24 characters whatever was sent.
import { isIP, isIPv4 } from 'node:net';

/** What the function reads of an Express request (plain objects in tests). */
export interface ClientAddressSource {
  ip?: string | undefined;
  socket: { remoteAddress?: string | undefined };
}

/**
 * `req.ip` when it is an IP address, else the peer's; an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`) as its IPv4
 * address; any other IPv6 address as its /64 prefix in one spelling (`2001:db8:0:0::/64`), zone id dropped.
 * A valid IPv4 address is returned as the very string it came in (no allocation on the common path).
 */
export function anonymousClientKey(req: ClientAddressSource): string {
  const derived = req.ip;
  if (derived !== undefined) {
    const key = clientKeyOf(derived);
    if (key !== undefined) return key;
  }
  // The kernel's address for the connection: always an IP while the socket is open.
  const peer = req.socket.remoteAddress;
  return (peer !== undefined ? clientKeyOf(peer) : undefined) ?? 'unknown';
}

/**
 * The client's address by the same rules (`req.ip` when it is an IP address, so trustProxy decides whether
 * X-Forwarded-For is believed, else the peer's), whole rather than as a bucket: an IPv4-mapped IPv6 address as its
 * IPv4 address, zone id dropped. Undefined only for a socket already closed. What an address allow-list checks.
 */
export function clientAddress(req: ClientAddressSource): string | undefined {
  const derived = req.ip;
  if (derived !== undefined) {
    const address = knownAddressOf(derived);
    if (address !== undefined) return address;
  }
  const peer = req.socket.remoteAddress;
  return peer !== undefined ? knownAddressOf(peer) : undefined;
}

/**
 * Addresses already read, by their text: net.isIP's expression costs a few hundred nanoseconds for an IPv6 address,
 * a map lookup a few dozen, and a client sends from the same address again and again. Only addresses are kept (not
 * text that is none, which a client can vary at will), and at most ADDRESSES_MAX: a flood of new ones empties it.
 */
const knownAddresses = new Map<string, string>();
const ADDRESSES_MAX = 10_000;

function knownAddressOf(text: string): string | undefined {
  const known = knownAddresses.get(text);
  if (known !== undefined) return known;
  const address = addressOf(text);
  if (address === undefined) return undefined;
  if (knownAddresses.size >= ADDRESSES_MAX) knownAddresses.clear();
  knownAddresses.set(text, address);
  return address;
}

/**
 * One address in one spelling for IPv4 (mapped ones included; an IPv6 address as it came), or undefined when the
 * text is not an IP address.
 */
function addressOf(addr: string): string | undefined {
  let text = addr;
  const zone = text.indexOf('%');
  if (zone >= 0) {
    if (zone === 0 || zone > MAX_IP_TEXT || zone === text.length - 1) return undefined;
    text = text.slice(0, zone);
    if (isIP(text) !== 6) return undefined;
  }
  if (text.length > MAX_IP_TEXT) return undefined;
  if (text.startsWith(MAPPED_PREFIX)) {
    const v4 = text.slice(MAPPED_PREFIX.length);
    if (isIPv4(v4)) return v4;
  }
  switch (isIP(text)) {
    case 4:
      return text;
    case 6:
      // Any other spelling of a mapped address (::FFFF:a.b.c.d, ::ffff:7f00:1) is its IPv4 address too; only text
      // with an ffff group can be one, so other IPv6 addresses are returned as they came, unparsed.
      return MAPPED_GROUP.test(text) ? (mappedV4(text) ?? text) : text;
    default:
      return undefined;
  }
}

/** The longest IP literal: `ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255`. */
const MAX_IP_TEXT = 45;
const MAPPED_PREFIX = '::ffff:';

/** The bucket of one address, or undefined when the text is not an IP address. */
function clientKeyOf(addr: string): string | undefined {
  const zone = addr.indexOf('%');
  if (zone >= 0) {
    // A zone id (`fe80::1%eth0`) names an interface of the sender's host, not a client, and it may be any length:
    // dropped, so it can make neither a new bucket nor a long key. Only IPv6 has zones.
    if (zone === 0 || zone > MAX_IP_TEXT || zone === addr.length - 1) return undefined;
    const base = addr.slice(0, zone);
    return isIP(base) === 6 ? ipv6Key(base) : undefined;
  }
  // Longer than any IP literal: not one, and net.isIP's regular expressions need not read 16 KB to say so.
  if (addr.length > MAX_IP_TEXT) return undefined;
  // What a dual-stack listener reports for every IPv4 peer: one slice, no parsing.
  if (addr.startsWith(MAPPED_PREFIX)) {
    const v4 = addr.slice(MAPPED_PREFIX.length);
    if (isIPv4(v4)) return v4;
  }
  switch (isIP(addr)) {
    case 4:
      // net.isIP accepts only the canonical dotted quad (no leading zeros, no shorthand): already one spelling.
      return addr;
    case 6:
      return ipv6Key(addr);
    default:
      return undefined;
  }
}

/** A valid IPv6 literal (no zone) as its IPv4 address when IPv4-mapped, else its /64 prefix, lowercase, no padding. */
function ipv6Key(addr: string): string {
  const g = ipv6Groups(addr);
  return mappedOf(g) ?? `${g[0]!.toString(16)}:${g[1]!.toString(16)}:${g[2]!.toString(16)}:${g[3]!.toString(16)}::/64`;
}

/** A group of ffff, any case: what every spelling of an IPv4-mapped address has. */
const MAPPED_GROUP = /(?:^|:)ffff:/i;

/** A valid IPv6 literal's IPv4 address when it is IPv4-mapped (::ffff:0:0/96), else undefined. */
function mappedV4(addr: string): string | undefined {
  return mappedOf(ipv6Groups(addr));
}

function mappedOf(g: readonly number[]): string | undefined {
  if (g[0] !== 0 || g[1] !== 0 || g[2] !== 0 || g[3] !== 0 || g[4] !== 0 || g[5] !== 0xffff) return undefined;
  return `${g[6]! >> 8}.${g[6]! & 0xff}.${g[7]! >> 8}.${g[7]! & 0xff}`;
}

/** The eight 16-bit groups of a valid IPv6 literal (`::` expanded, a trailing dotted quad as two groups). */
function ipv6Groups(addr: string): number[] {
  const gap = addr.indexOf('::');
  const head = gap < 0 ? addr : addr.slice(0, gap);
  const tail = gap < 0 ? '' : addr.slice(gap + 2);
  const headGroups = head === '' ? [] : parseGroups(head);
  const tailGroups = tail === '' ? [] : parseGroups(tail);
  const zeros = 8 - headGroups.length - tailGroups.length;
  const out = headGroups;
  for (let i = 0; i < zeros; i++) out.push(0);
  for (const v of tailGroups) out.push(v);
  return out;
}

function parseGroups(part: string): number[] {
  const out: number[] = [];
  for (const piece of part.split(':')) {
    if (piece.includes('.')) {
      const [a, b, c, d] = piece.split('.').map(Number);
      out.push((a! << 8) | b!, (c! << 8) | d!);
    } else {
      out.push(parseInt(piece, 16));
    }
  }
  return out;
}
