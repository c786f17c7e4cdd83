// Every Redis key and channel Tollgate uses, named in one place.
// All state one request's limit check touches (the key's record, windows, strikes and ban) carries the
// hash tag {<key id>}, so on Redis Cluster each script and transaction stays in a single slot.

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
   * One UTC day (days since 1970-01-01) of the key's usage ledger while it has no consumer: a hash of per-hour counts
   * (a<h>, r<h>, b<h>, f<h>, s<h>, w<h>, v<h>, and m<h> maxima), in the key's own slot. Under a consumer the same day
   * is consumerUsageDay.
   */
  usageDay(id: string, day: number): string {
    return `${this.keyRecord(id)}:usage:${day}`;
  }
  /**
   * One UTC day of a key's usage counted under a consumer (the consumer the request was counted under, at the time):
   * the same per-hour fields as usageDay, in the consumer's slot ({c:<consumer id>}), where the limit script of a key
   * with a consumer runs. A key moved to another consumer starts days under the new one; its days under the old stay
   * where they are until they expire, so a move never rewrites what was counted before it.
   */
  consumerUsageDay(consumerId: string, keyId: string, day: number): string {
    return `${this.prefix}usage:{c:${consumerId}}:${keyId}:${day}`;
  }
  /**
   * Set: every consumer a key was ever counted under (written when the key is attached to one, and with counts an
   * instance writes under a consumer), in the key's slot: where reading a key's ledger finds its days under each.
   */
  keyConsumers(keyId: string): string {
    return `${this.keyRecord(keyId)}:consumers`;
  }
  /** Set: every key ever counted under the consumer (keyConsumers the other way round), in the consumer's slot. */
  consumerUsageKeys(consumerId: string): string {
    return `${this.prefix}usage:{c:${consumerId}}:keys`;
  }
  /**
   * Hash per deprecated route and UTC day: caller -> calls, the caller being the key id, or `<key id>@<consumer id>`
   * for calls counted under a consumer (neither id can hold an @). The route's hash tag keeps its hashes in one slot.
   */
  deprecatedCalls(route: string, day: number): string {
    return `${this.prefix}depr:{${route}}:${day}`;
  }
  /** Hash per deprecated route: caller (as deprecatedCalls names it) -> when it last called (epoch ms). */
  deprecatedLastSeen(route: string): string {
    return `${this.prefix}depr:{${route}}:last`;
  }
  /**
   * Hash per validated operation and UTC day: caller (the key id, or `<key id>@<consumer id>` under a consumer) ->
   * requests that did not match the operation's description. The operation's hash tag keeps its hashes in one slot.
   */
  invalidRequests(operation: string, day: number): string {
    return `${this.prefix}invalid:{${operation}}:${day}`;
  }
  /** Hash per validated operation: caller -> when it last sent an invalid request (epoch ms). */
  invalidLastSeen(operation: string): string {
    return `${this.prefix}invalid:{${operation}}:last`;
  }
  /** Hash per validated operation: caller -> the first problem's pointer of its last invalid request. */
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
