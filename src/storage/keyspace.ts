// Every Redis key and channel Tollgate uses, named in one place.
// All state one request's limit check touches (the key's record, windows, strikes and ban) carries the
// hash tag {<key id>}, so on Redis Cluster each script and transaction stays in a single slot; a consumer's state (its
// record, its keys' mirror) carries {c:<consumer id>}.

export class Keyspace {
  constructor(readonly prefix: string) {}

  /** Hash: the key's record (metadata, current hash, grace hash). */
  keyRecord(id: string): string {
    return `${this.prefix}key:{${id}}`;
  }
  /** String: SHA-256 hex of a plaintext key -> key id. */
  keyByHash(sha256: string): string {
    return `${this.prefix}keyhash:${sha256}`;
  }
  /**
   * String: a hash a key once had (rotated away, revoked) -> the key id. Kept for good and never read on the request
   * path: an import that would bring the hash back, under any id, is refused.
   */
  retiredHash(sha256: string): string {
    return `${this.prefix}keyretired:${sha256}`;
  }
  /** Set: every hash retired from the key (what `keys export` carries), in the key's slot. */
  keyRetiredHashes(id: string): string {
    return `${this.keyRecord(id)}:retired`;
  }
  /** String: the token of the import writing now (one import at a time across every instance), with a TTL. */
  importLock(): string {
    return `${this.prefix}keys:import:lock`;
  }
  /** Set of every key id (for `keys list`). */
  keyIds(): string {
    return `${this.prefix}keys`;
  }
  /** Pub/sub channel: a key id whose record changed, so every instance drops its cached copy. */
  keyEvents(): string {
    return `${this.prefix}keys:events`;
  }
  /**
   * Set: every consumer a key was ever attached to, in the key's slot (written with each write of a record that names
   * a consumer): where reports find the days a key spent in each consumer's ledger.
   */
  keyConsumers(keyId: string): string {
    return `${this.keyRecord(keyId)}:consumers`;
  }
  /**
   * String: a consumer's record (JSON). Its hash tag is {c:<id>}, the consumer's slot: its keys' mirror, its lock and
   * its pool's windows share it, so one script can read them all on Redis Cluster.
   */
  consumerRecord(id: string): string {
    return `${this.prefix}consumer:{c:${id}}`;
  }
  /**
   * Hash in the consumer's slot: key id -> that key's record, byte for byte as stored under keyRecord (written by
   * every key-store write of a key that names the consumer, removed when the key leaves it). What the limit script
   * reads to validate a consumer's key in the consumer's slot, and what lists and counts a consumer's keys.
   */
  consumerKeys(id: string): string {
    return `${this.consumerRecord(id)}:keys`;
  }
  /** String with a TTL: the holder's token while one change of the consumer's keys (attach, delete) is made. */
  consumerLock(id: string): string {
    return `${this.consumerRecord(id)}:lock`;
  }
  /** Set of every consumer id. */
  consumerIds(): string {
    return `${this.prefix}consumers`;
  }
  /** Pub/sub channel: a consumer id whose record changed, so every instance drops its cached copy. */
  consumerEvents(): string {
    return `${this.prefix}consumers:events`;
  }
  /**
   * Counter: points taken in one of the key's windows (expires with the window). `suffix` names the window
   * (WindowSpec.suffix): "minute" and "day" for the plan's, "route:<route name>:minute" / ":day" for a route's. The
   * key's hash tag comes first, so a route name holding braces cannot move it to another slot.
   */
  limitWindow(id: string, suffix: string): string {
    return `${this.prefix}rl:{${id}}:${suffix}`;
  }
  /** Counter: points taken in the key's current minute window of its plan. */
  minuteWindow(id: string): string {
    return this.limitWindow(id, 'minute');
  }
  /** Counter: points taken in the key's current day window of its plan. */
  dayWindow(id: string): string {
    return this.limitWindow(id, 'day');
  }
  /** Key prefix of the anonymous per-IP limiter (rate-limiter-flexible appends the IP). */
  anonymousPrefix(): string {
    return `${this.prefix}anon`;
  }
  /** Hash: ban state of a key (until, level, lastEnd). */
  ban(id: string): string {
    return `${this.prefix}ban:{${id}}`;
  }
  /**
   * Hash: a key's would-be ban while bans run in shadow mode (until, level, lastEnd): apart from the enforced one, so
   * switching modes neither enforces a would-be ban nor counts one toward the enforced ladder.
   */
  shadowBan(id: string): string {
    return `${this.prefix}wouldban:{${id}}`;
  }
  /** Counter of 429s toward a would-be ban (bans in shadow mode), expiring windowSeconds after the first. */
  shadowStrikes(id: string): string {
    return `${this.prefix}wouldstrikes:{${id}}`;
  }
  /** String /readyz writes (expiring after 5 s) to learn whether Redis still takes writes. */
  readinessProbe(): string {
    return `${this.prefix}readyz:probe`;
  }
  /**
   * One UTC day (days since 1970-01-01) of the key's usage ledger: a hash of per-hour counts (a<h>, r<h>, b<h>, s<h>,
   * f<h>), in the key's own slot.
   */
  usageDay(id: string, day: number): string {
    return `${this.keyRecord(id)}:usage:${day}`;
  }
  /** Hash per deprecated route and UTC day: key id -> calls. The route's hash tag keeps both of its hashes in one slot. */
  deprecatedCalls(route: string, day: number): string {
    return `${this.prefix}depr:{${route}}:${day}`;
  }
  /** Hash per deprecated route: key id -> when it last called (epoch ms). */
  deprecatedLastSeen(route: string): string {
    return `${this.prefix}depr:{${route}}:last`;
  }
  /**
   * Hash per validated operation and UTC day: key id -> requests that did not match the operation's description. The
   * operation's hash tag keeps its three hashes in one slot.
   */
  invalidRequests(operation: string, day: number): string {
    return `${this.prefix}invalid:{${operation}}:${day}`;
  }
  /** Hash per validated operation: key id -> when it last sent an invalid request (epoch ms). */
  invalidLastSeen(operation: string): string {
    return `${this.prefix}invalid:{${operation}}:last`;
  }
  /** Hash per validated operation: key id -> the first problem's pointer of its last invalid request. */
  invalidPointers(operation: string): string {
    return `${this.prefix}invalid:{${operation}}:pointer`;
  }
  /**
   * List: a report kept for its pages (its head, then its rows), expiring a few minutes after its last page was read.
   * Its id as hash tag: the list and the copy it is built in share a slot.
   */
  keptReport(id: string): string {
    return `${this.prefix}report:{${id}}`;
  }
  /** Counter of 429s toward the ban threshold, expiring windowSeconds after the first. */
  strikes(id: string): string {
    return `${this.prefix}strikes:{${id}}`;
  }
}
