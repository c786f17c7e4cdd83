// Every Redis key and channel Tollgate uses, named in one place.
// All state one request's limit check touches (the key's record, windows, strikes, ban and ledger) carries its
// subject's hash tag ({<key id>} for a key), so on Redis Cluster each script and transaction stays in a single slot; a
// consumer's state (its record, its keys' mirror) carries {c:<consumer id>}.

/**
 * Whose limits a name is for: limits/subject.ts's QuotaSubject (a key, a consumer, an address), declared here by its
 * shape so storage need not import the limits. `tag` is the Redis Cluster hash tag every name of its state carries.
 */
export interface TaggedSubject {
  readonly kind: string;
  readonly id: string;
  readonly tag: string;
}

/**
 * Whether a key lives in another subject's slot (a key of a consumer, tagged `c:<consumer>`): its names then say both,
 * `{c:<consumer>}:key:<id>`.
 */
function inOtherSlot(s: TaggedSubject): boolean {
  return s.kind === 'key' && s.tag !== s.id;
}

/**
 * The part of a name that says whose state it is: `{<tag>}` (the hash tag itself), or for a key of a consumer
 * `{c:<consumer>}:key:<key id>` (in the consumer's slot; key ids hold no colon, so it cannot be a pool window's suffix).
 */
export function subjectPart(s: TaggedSubject): string {
  return inOtherSlot(s) ? `{${s.tag}}:key:${s.id}` : `{${s.tag}}`;
}

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
  /**
   * Hash: every webhook endpoint registered for a consumer (src/events/endpoints.ts), id -> its record (JSON, the
   * signing secret included). Hash tag {endpoints}: the per-consumer sets below share its slot, so a registration's
   * bound is checked and written by one script on Redis Cluster too.
   */
  eventEndpoints(): string {
    return `${this.prefix}events:{endpoints}`;
  }
  /** Set in the same slot: the ids of one consumer's registered endpoints (what its bound counts). */
  consumerEventEndpoints(consumerId: string): string {
    return `${this.eventEndpoints()}:consumer:${consumerId}`;
  }
  /**
   * Pub/sub channel: an endpoint id registered or deleted, so every instance's events thread reads the registry
   * (eventEndpoints) again at once instead of at its next periodic read.
   */
  eventEndpointsChanged(): string {
    return `${this.prefix}events:endpoints:changed`;
  }
  /** Pub/sub channel: a key id whose record changed, so every instance drops its cached copy. */
  keyEvents(): string {
    return `${this.prefix}keys:events`;
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
   * Where the limit check reads the key record it validates a request against, in the subject's slot: a key's own
   * record (keyRecord, a string); for a key of a consumer, the consumer's hash of its keys' records (consumerKeys: the
   * field is the key id). An address has no record: the name only keeps the script's declared keys in one slot.
   */
  limitRecord(s: TaggedSubject): string {
    return inOtherSlot(s) ? `${this.prefix}consumer:{${s.tag}}:keys` : `${this.prefix}key:{${s.tag}}`;
  }
  /**
   * Counter: points taken in one of the subject's windows (expires with the window). `suffix` names the window
   * (WindowSpec.suffix): "minute" and "day" for the plan's, "route:<route name>:minute" / ":day" for a route's. The
   * subject's hash tag comes first, so a route name holding braces cannot move it to another slot.
   */
  limitWindow(s: TaggedSubject, suffix: string): string {
    return `${this.prefix}rl:${subjectPart(s)}:${suffix}`;
  }
  /** Counter: points taken in the subject's current minute window of its plan. */
  minuteWindow(s: TaggedSubject): string {
    return this.limitWindow(s, 'minute');
  }
  /** Counter: points taken in the subject's current day window of its plan. */
  dayWindow(s: TaggedSubject): string {
    return this.limitWindow(s, 'day');
  }
  /** Key prefix of the anonymous per-IP limiter (rate-limiter-flexible appends the IP). */
  anonymousPrefix(): string {
    return `${this.prefix}anon`;
  }
  /** String: a portal sign-in link (JSON), by the SHA-256 hex of its code; expires with the link (src/access/). */
  portalLink(codeSha256: string): string {
    return `${this.prefix}portal:link:${codeSha256}`;
  }
  /** String: a portal session (JSON), by the SHA-256 hex of its id (the cookie value); expires with the session. */
  portalSession(idSha256: string): string {
    return `${this.prefix}portal:session:${idSha256}`;
  }
  /**
   * Hash in the consumer's slot: when its portal sessions and unused links were ended, epoch ms (field `*` for all of
   * them, `actor:<actor>` for one actor's).
   */
  portalEnded(consumerId: string): string {
    return `${this.prefix}portal:{c:${consumerId}}:ended`;
  }
  /** Key prefix of the portal's key sign-in limiter per client address (rate-limiter-flexible appends the address). */
  portalSignInPrefix(): string {
    return `${this.prefix}portal:signin`;
  }
  /** Hash: ban state of a subject (until, level, lastEnd). */
  ban(s: TaggedSubject): string {
    return `${this.prefix}ban:${subjectPart(s)}`;
  }
  /**
   * Hash: a subject's would-be ban while bans run in shadow mode (until, level, lastEnd): apart from the enforced one,
   * so switching modes neither enforces a would-be ban nor counts one toward the enforced ladder.
   */
  shadowBan(s: TaggedSubject): string {
    return `${this.prefix}wouldban:${subjectPart(s)}`;
  }
  /** Counter of 429s toward a would-be ban (bans in shadow mode), expiring windowSeconds after the first. */
  shadowStrikes(s: TaggedSubject): string {
    return `${this.prefix}wouldstrikes:${subjectPart(s)}`;
  }
  /** String /readyz writes (expiring after 5 s) to learn whether Redis still takes writes. */
  readinessProbe(): string {
    return `${this.prefix}readyz:probe`;
  }
  /**
   * One UTC day (days since 1970-01-01) of a key's usage ledger while it has no consumer: a hash of per-hour counts
   * (a<h>, r<h>, b<h>, f<h>, s<h>, w<h>, v<h>, and m<h> maxima), in the subject's slot (`key:{<id>}:usage:<day>`). Under
   * a consumer the same day is consumerUsageDay, in the consumer's slot. The limit check declares one even with no
   * ledger: its day is then the text it has at hand ('' before any day was).
   */
  usageDay(s: TaggedSubject, day: number | string): string {
    return inOtherSlot(s) ? `${this.prefix}usage:{${s.tag}}:${s.id}:${day}` : `${this.prefix}key:{${s.tag}}:usage:${day}`;
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
   * Set: every consumer a key was ever attached to or counted under (written with each write of a record that names
   * a consumer, and with counts an instance writes under a consumer), in the key's slot: where reading a key's ledger finds its days under each.
   */
  keyConsumers(keyId: string): string {
    return `${this.keyRecord(keyId)}:consumers`;
  }
  /**
   * Set: every key ever attached to or counted under the consumer (keyConsumers the other way round, written with
   * it: storage/key-consumer-sets.ts), in the consumer's slot.
   */
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
  /**
   * Stream: the events outbox (src/events/outbox.ts), one entry per event (id, type, consumer, key, plan, ce, and
   * percent for quota.threshold), bounded by XADD MAXLEN ~; read by the dispatcher's consumer group. Hash tag {outbox}:
   * the stream and every seen marker share a slot, so one script dedupes and appends.
   */
  eventsOutbox(): string {
    return `${this.prefix}events:{outbox}`;
  }
  /** String with a TTL (40 days): the event id was appended to the outbox; a second publish of it appends nothing. */
  eventSeen(eventId: string): string {
    return `${this.eventsOutbox()}:seen:${eventId}`;
  }
  /** Counter of 429s toward the ban threshold, expiring windowSeconds after the first. */
  strikes(s: TaggedSubject): string {
    return `${this.prefix}strikes:${subjectPart(s)}`;
  }
  /**
   * Hash per metering destination and UTC day (YYYY-MM-DD) of the hours it holds: `<key id>:<hour>` (and a split
   * hour's other parts) -> the counts acknowledged by that destination for that key-hour, as JSON. Per day, expiring
   * after the ledger's own day, so it never outgrows what the ledger keeps. The destination's id as hash tag: every
   * checkpoint of one destination in one slot.
   */
  meteringDone(destination: string, day: string): string {
    return `${this.prefix}metering:{${destination}}:done:${day}`;
  }
  /** String per metering destination: the hour (epoch ms of its end) through which every key was acknowledged. */
  meteringMark(destination: string): string {
    return `${this.prefix}metering:{${destination}}:mark`;
  }
  /** String with a TTL per metering destination: the token of the export run sending to it now (one at a time). */
  meteringLock(destination: string): string {
    return `${this.prefix}metering:{${destination}}:lock`;
  }

  // Webhook delivery (src/events/): each endpoint's queue carries the hash tag {ep:<endpoint id>}, so its scripts run
  // in one slot, and different endpoints' queues spread over a cluster.

  /** Sorted set: an endpoint's queued event ids -> when each one's next attempt is due (ms; a claimed one's lease end). */
  endpointDue(endpoint: string): string {
    return `${this.prefix}events:{ep:${endpoint}}:due`;
  }
  /** Hash: an endpoint's queued and dead events, event id -> {event, attempts, firstAt, lastError, ...} (JSON). */
  endpointEvents(endpoint: string): string {
    return `${this.prefix}events:{ep:${endpoint}}:ev`;
  }
  /** Sorted set: an endpoint's events given up after the schedule's last attempt -> when (ms); bounded. */
  endpointDead(endpoint: string): string {
    return `${this.prefix}events:{ep:${endpoint}}:dead`;
  }
  /** Hash: an endpoint's status (disabled, why, since) and counters (enqueued, delivered, failed, dropped), last error. */
  endpointState(endpoint: string): string {
    return `${this.prefix}events:{ep:${endpoint}}:state`;
  }
  /** Sorted set: an endpoint's queued event ids -> their order of arrival: the oldest go first when the queue is full. */
  endpointQueued(endpoint: string): string {
    return `${this.prefix}events:{ep:${endpoint}}:queued`;
  }
}
