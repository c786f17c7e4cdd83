// What a caller may reach and where from: its scopes (the routes it may call) and its allowed client addresses, each
// from the key and from its consumer. Compiled once per record (a Set of scope names, a node:net BlockList of
// networks), so that the request path's checks are a few lookups with no I/O: they read the cached Caller only,
// never Redis. A key narrows its consumer's, never widens them: a request must be allowed by every list there is.
//
// CIDRs are matched with node:net's BlockList rather than ipaddr.js: it is part of Node (no package to add; ipaddr.js
// is only there under Express), it compares in C++ whatever the number of networks, and it treats an IPv4-mapped IPv6
// address (::ffff:203.0.113.7) as the IPv4 address it is, against IPv4 and IPv6 rules alike. Its one cost is turning
// address text into a SocketAddress (about 2 µs in Node 20, ipaddr.js's parse costs as much): done once per client
// address and kept (a bounded map), so a request pays a map lookup and a check (bench/access-check.mjs).
import { BlockList, isIP, SocketAddress } from 'node:net';

/** Scopes and allowed CIDRs, as a key record and a consumer record carry them. */
export interface AccessLists {
  readonly scopes?: readonly string[] | undefined;
  readonly allowedCidrs?: readonly string[] | undefined;
}

/** One record's lists, compiled. */
interface Compiled {
  readonly scopes: ReadonlySet<string> | undefined;
  readonly addresses: BlockList | undefined;
}

export class CallerAccess {
  /** Whether some list restricts the routes (the scopes stage has work to do). */
  readonly limitsScopes: boolean;
  /** Whether some list restricts the addresses (the allowedAddress stage has work to do). */
  readonly limitsAddresses: boolean;

  constructor(
    private readonly scopeSets: readonly ReadonlySet<string>[],
    private readonly addressLists: readonly BlockList[],
  ) {
    this.limitsScopes = scopeSets.length > 0;
    this.limitsAddresses = addressLists.length > 0;
  }

  /**
   * Whether every scope list names one of `names`, the names the request's route answers to (its name,
   * `service:<name>`, `operation:<operationId>`: CompiledRoute.scopeNames).
   */
  allowsRoute(names: readonly string[]): boolean {
    for (const set of this.scopeSets) {
      let named = false;
      for (const n of names) {
        if (set.has(n)) {
          named = true;
          break;
        }
      }
      if (!named) return false;
    }
    return true;
  }

  /** Whether every address list holds `address` (an IP address as text; undefined or not an address: no). */
  allowsAddress(address: string | undefined): boolean {
    if (this.addressLists.length === 0) return true;
    const at = address === undefined ? null : socketAddress(address);
    if (at === null) return false;
    for (const list of this.addressLists) if (!list.check(at)) return false;
    return true;
  }
}

const compiledLists = new WeakMap<AccessLists, Compiled>();

/** A record's lists compiled, once per record object. */
function compiled(record: AccessLists): Compiled {
  let made = compiledLists.get(record);
  if (made) return made;
  made = {
    scopes: record.scopes ? new Set(record.scopes) : undefined,
    addresses: record.allowedCidrs ? blockListOf(record.allowedCidrs) : undefined,
  };
  compiledLists.set(record, made);
  return made;
}

/**
 * The networks as a BlockList (used as an allow-list). Entries were checked when stored (config/key-fields.ts
 * cidrProblem); one that is not an address anyway (a record written by hand) adds nothing, so it allows nothing.
 */
export function blockListOf(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const text of cidrs) {
    const slash = text.indexOf('/');
    const address = slash < 0 ? text : text.slice(0, slash);
    const family = isIP(address);
    if (family === 0) continue;
    const type = family === 4 ? 'ipv4' : 'ipv6';
    try {
      if (slash < 0) list.addAddress(address, type);
      else list.addSubnet(address, Number(text.slice(slash + 1)), type);
    } catch {
      // A prefix out of range: as above, nothing added.
    }
  }
  return list;
}

/** What a key's access was compiled with: the consumer record it was made for (objects, compared by identity). */
const combined = new WeakMap<AccessLists, { consumer: AccessLists | undefined; access: CallerAccess | undefined }>();

/**
 * The caller's access from its key's lists and its consumer's: undefined when neither restricts anything. Made once per
 * key record and consumer record (the objects the caches hand out), so a request allocates nothing for it.
 */
export function accessFor(key: AccessLists, consumer?: AccessLists): CallerAccess | undefined {
  const known = combined.get(key);
  if (known && known.consumer === consumer) return known.access;
  const lists = consumer ? [compiled(consumer), compiled(key)] : [compiled(key)];
  const scopeSets = lists.flatMap((l) => (l.scopes ? [l.scopes] : []));
  const addressLists = lists.flatMap((l) => (l.addresses ? [l.addresses] : []));
  const access = scopeSets.length + addressLists.length > 0 ? new CallerAccess(scopeSets, addressLists) : undefined;
  combined.set(key, { consumer, access });
  return access;
}

/**
 * Client addresses turned into SocketAddresses, kept: making one costs about 2 µs, checking it 50 ns. Bounded (a
 * flood of new addresses empties it, and costs each of them the 2 µs). Null: the text is no IP address.
 */
const socketAddresses = new Map<string, SocketAddress | null>();
const SOCKET_ADDRESSES_MAX = 10_000;

function socketAddress(text: string): SocketAddress | null {
  let at = socketAddresses.get(text);
  if (at !== undefined) return at;
  const family = isIP(text);
  at = family === 0 ? null : new SocketAddress({ address: text, family: family === 4 ? 'ipv4' : 'ipv6' });
  if (socketAddresses.size >= SOCKET_ADDRESSES_MAX) socketAddresses.clear();
  socketAddresses.set(text, at);
  return at;
}
