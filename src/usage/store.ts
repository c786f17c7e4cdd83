// Where the usage ledger and the deprecated-route report live: per key and UTC day, a hash of per-hour counts (a<h>
// admitted, r<h> refused by a window, b<h> refused by a ban, f<h> admitted, reached a target and got no complete
// answer (also in a<h>: upstreamFailed beside admitted), s<h> admitted though a window in shadow mode would have refused it; w<h> a request a ban in shadow mode would have refused; v<h> a request that did not match its operation's OpenAPI description (validationFailed, beside its own kind); m<h> peakMinute: the highest
// minute-window count a check reported in the hour, raised, never added); per deprecated route and day, calls by key
// id, and when each key last called; per validated operation and day, requests that did not match its description
// by key id, with when each key last sent one and where its last one first failed. Redis holds them for the
// fleet (the limit script itself counts what it decides, the refund script takes a never-reached request out of a<h>; this file writes what
// instances count locally and reads everything back); memory holds them for a Redis-less gateway.
// A request of a key with a consumer is counted under that consumer, as it was at the time: its day is the consumer's
// (usage:{c:<consumer>}:<key>:<day>, the consumer's slot, where its limit script runs), the deprecated-route and
// invalid-request hashes name it `<key>@<consumer>`, and the key's set of consumers (key:{<key>}:consumers) lists every
// consumer it was counted under, so reading a key's ledger reads its own days and its days under each of them.
import calculateSlot from 'cluster-key-slot';
import type { Keyspace } from '../storage/keyspace.js';
import type { RedisCommands } from '../storage/redis.js';
import type { ReadLimit } from '../storage/read-limit.js';
import { recordKeyConsumer } from '../storage/key-consumer-sets.js';
import { DAY_MS, HOUR_MS, dayOf } from '../util/time.js';
import type { UsageKind } from '../limits/types.js';
import { keySubject } from '../limits/subject.js';

/** Calls of a deprecated route (`route` as "<METHOD> <pattern>") by one key on one day, and the last one's time. */
export interface DeprecatedCall {
  route: string;
  id: string;
  /** The consumer the calls were counted under (absent: none). */
  consumer?: string | undefined;
  day: number;
  n: number;
  lastMs: number;
}

/** A caller of a report's hashes: a key, under a consumer or none (''). */
export interface LedgerCaller {
  id: string;
  consumer: string;
}

/** Most consumers read for one key (its set of every consumer it was counted under): past it the read fails. */
export const MAX_KEY_CONSUMERS = 100;

/**
 * A caller's field in the deprecated-route and invalid-request hashes: the key id, or `<key id>@<consumer id>` under a
 * consumer (ids are A-Z a-z 0-9 _ -: never an @).
 */
export function callerField(id: string, consumer: string | undefined): string {
  return consumer ? `${id}@${consumer}` : id;
}

/** The caller a field names (callerField the other way round). */
export function callerOf(field: string): LedgerCaller {
  const at = field.indexOf('@');
  return at < 0 ? { id: field, consumer: '' } : { id: field.slice(0, at), consumer: field.slice(at + 1) };
}

/**
 * Requests of a validated operation that did not match its description, by one key on one day: how many, the last
 * one's time, and the first problem's pointer of the last one (/body/name, /query/limit).
 */
export interface InvalidRequests {
  operation: string;
  id: string;
  /** The consumer the requests were counted under (absent: none). */
  consumer?: string | undefined;
  day: number;
  n: number;
  lastMs: number;
  pointer: string;
}

/** A caller's calls of a deprecated route over a report's days, and when it last called. */
export interface DeprecatedCaller extends LedgerCaller {
  calls: number;
  lastMs: number;
}

/** A caller's invalid requests to an operation over a report's days. */
export interface InvalidCaller extends LedgerCaller {
  calls: number;
  lastMs: number;
  pointer: string | undefined;
}

/** A key's highest minute-window count seen by one instance in the hour starting at `atMs`. */
export interface MinutePeak {
  id: string;
  /** The consumer the key's requests were counted under (absent: none). */
  consumer?: string | undefined;
  atMs: number;
  peak: number;
}

/** A key's counts over one UTC day: field `<kind><hour>` -> count. */
export type DayCounts = Record<string, number>;

export interface UsageCounts {
  admitted: number;
  /** Refused by the minute or day window (429 rate_limit_exceeded). */
  rateLimited: number;
  /** Refused by a ban (429 api_key_banned). */
  banned: number;
  /** Admitted, then given no response by the upstream (the gateway answered 502 or 504): given back, not billed. */
  upstreamFailed: number;
  /**
   * Admitted (and counted in admitted) though a window in shadow mode had no room for it: what enforcing that window
   * would have refused (the ledger's s<h>).
   */
  shadowRefused: number;
  /**
   * Requests a ban would have refused while bans run in shadow mode (the ledger's w<h>): those a would-be ban in force
   * covered and those that would have started one. Each is also in admitted or rateLimited, as it was answered.
   */
  wouldBan: number;
  /**
   * Requests that did not match their operation's OpenAPI description (request validation in shadow or enforce mode:
   * the ledger's v<h>). Each is also in admitted (or upstreamFailed), as the limit check counted it.
   */
  validationFailed: number;
}

/** A span's counts as sums() reads them: the counts added up, and the highest peakMinute (m<h>) of its hours. */
export interface LedgerSums extends UsageCounts {
  peakMinute: number;
}

/** Each counted kind's letter in the ledger and its name in reports, in the order sums() returns them. */
const KINDS: ReadonlyArray<readonly [UsageKind, keyof UsageCounts]> = [
  ['a', 'admitted'],
  ['r', 'rateLimited'],
  ['b', 'banned'],
  ['f', 'upstreamFailed'],
  ['s', 'shadowRefused'],
  ['w', 'wouldBan'],
  ['v', 'validationFailed'],
];
/** The ledger's one field taken as a maximum, not a sum: the busiest minute window of the hour. */
const PEAK_LETTER = 'm';
const KIND_LETTERS = KINDS.map(([letter]) => letter).join('');

const noCounts = (): LedgerSums => ({
  admitted: 0,
  rateLimited: 0,
  banned: 0,
  upstreamFailed: 0,
  shadowRefused: 0,
  wouldBan: 0,
  validationFailed: 0,
  peakMinute: 0,
});

/**
 * Whole hours of consecutive UTC days: every hour of each day but the first (from `firstHour`) and the last (up to
 * `endHour`, exclusive; 24 for the whole day). One day alone runs from firstHour to endHour.
 */
export interface LedgerSpan {
  days: readonly number[];
  firstHour: number;
  endHour: number;
}

/** How a report wants a span's counts: all added up, by day, or by hour (a day's 24 hours in order). */
export type SumBy = 'total' | 'day' | 'hour';

/** The hour of its UTC day (0-23) of an instant. */
export const hourOfDay = (ms: number): number => Math.floor((((ms % DAY_MS) + DAY_MS) % DAY_MS) / HOUR_MS);

/** The whole hours [fromMs, toMs) touches. */
export function spanOf(fromMs: number, toMs: number): LedgerSpan {
  const days: number[] = [];
  for (let d = dayOf(fromMs); d <= dayOf(toMs - 1); d++) days.push(d);
  return { days, firstHour: hourOfDay(fromMs), endHour: hourOfDay(toMs - 1) + 1 };
}

/** Whether the span counts hour `h` of its `i`-th day. */
function inSpan(span: LedgerSpan, i: number, h: number): boolean {
  return (i > 0 || h >= span.firstHour) && (i < span.days.length - 1 || h < span.endHour);
}

/** A count made outside the limit script: one key, kind and hour (`atMs` its start), under a consumer or none. */
export interface UsageEntry {
  id: string;
  /** The consumer the request was counted under when it was decided (absent: none). */
  consumer?: string | undefined;
  kind: UsageKind;
  atMs: number;
  n: number;
}

export interface UsageStore {
  /**
   * Adds counts made outside the limit script (one entry per key, kind and hour). Answers the entries whose count
   * was not written (empty when all were): the caller keeps those, and only those, for another try, so a count is
   * never added twice because another entry of its batch failed.
   */
  add(entries: readonly UsageEntry[], ttlMs: number): Promise<UsageEntry[]>;
  /**
   * Raises each key's peakMinute field (m<h>) to the value given where it is larger, in script calls of many keys.
   * Answers the entries not written (those of a call that failed).
   */
  raisePeaks(entries: readonly MinutePeak[], ttlMs: number): Promise<MinutePeak[]>;
  /**
   * The key's counts for each day asked, in order (an empty object for a day without any): its own day and its days
   * under every consumer it was counted under, added up (peakMinute fields: the largest).
   */
  days(id: string, days: readonly number[]): Promise<DayCounts[]>;
  /**
   * The same split by the consumer the counts were made under: '' (none) always, then each consumer of the key's set
   * whose days hold anything. At most MAX_KEY_CONSUMERS consumers: a key with more fails the read.
   */
  daysByConsumer(id: string, days: readonly number[]): Promise<Map<string, DayCounts[]>>;
  /**
   * The key's counts over the span's hours, added up as asked: one for 'total', one per day for 'day', one per hour
   * of the span for 'hour', in order, whatever consumer they were counted under. What reports over every key read:
   * numbers, not the day hashes.
   */
  sums(id: string, span: LedgerSpan, by: SumBy): Promise<LedgerSums[]>;
  /** The same split by consumer, as daysByConsumer: '' always, then each consumer with counts in the span. */
  sumsByConsumer(id: string, span: LedgerSpan, by: SumBy): Promise<Map<string, LedgerSums[]>>;
  /** The key's counts under one consumer ('' none) alone, as sums. */
  sumsUnder(id: string, consumer: string, span: LedgerSpan, by: SumBy): Promise<LedgerSums[]>;
  /**
   * Records that the key is counted under the consumer from now on: the key's set of consumers and the consumer's set
   * of keys, which reports read to find its days there. On Redis the key store writes them itself before any record
   * naming the consumer is written (storage/key-consumer-sets.ts: every way of attaching a key), so they are there
   * before its first request counted under it; counts written under a consumer write them again. Idempotent. Nothing
   * is removed when it leaves: its days there stay its days.
   */
  recordKeyConsumer(keyId: string, consumerId: string): Promise<void>;
  /** Every key ever counted under the consumer (as recordKeyConsumer and counts under it wrote them), sorted. */
  consumerKeys(consumerId: string): Promise<string[]>;
  /**
   * Adds calls of deprecated routes by keys, and raises each key's last-seen time. Answers what was not written: an
   * entry whose count failed, whole; one whose count went in but whose last-seen time did not, with `n` 0 (a count is
   * never sent twice: it would be counted twice).
   */
  addDeprecated(entries: readonly DeprecatedCall[], ttlMs: number): Promise<DeprecatedCall[]>;
  /**
   * Per caller (its field: callerField): calls of the route over the days asked, and when it last called (ever, within
   * retention).
   */
  deprecated(route: string, days: readonly number[]): Promise<Map<string, DeprecatedCaller>>;
  /**
   * Adds invalid requests by keys to operations, raises each key's last-seen time and keeps its last pointer. Answers
   * what was not written, as addDeprecated does.
   */
  addInvalid(entries: readonly InvalidRequests[], ttlMs: number): Promise<InvalidRequests[]>;
  /** Per caller (its field): invalid requests to the operation over the days asked, when last, where that one failed. */
  invalid(operation: string, days: readonly number[]): Promise<Map<string, InvalidCaller>>;
}

function toCounts(raw: Record<string, string>): DayCounts {
  const out: DayCounts = {};
  for (const [k, v] of Object.entries(raw)) out[k] = Number(v);
  return out;
}

/** One key's days under each consumer added up, day by day: counts added, peakMinute fields (m<h>) the largest. */
export function mergeDays(parts: Iterable<readonly DayCounts[]>, n: number): DayCounts[] {
  const out: DayCounts[] = Array.from({ length: n }, () => ({}));
  for (const days of parts)
    days.forEach((day, i) => {
      const to = out[i]!;
      for (const [f, v] of Object.entries(day)) to[f] = f.startsWith(PEAK_LETTER) ? Math.max(to[f] ?? 0, v) : (to[f] ?? 0) + v;
    });
  return out;
}

/** One key's sums under each consumer added up, figure by figure (peakMinute: the largest). */
export function mergeSums(parts: Iterable<readonly LedgerSums[]>): LedgerSums[] {
  const out: LedgerSums[] = [];
  for (const sums of parts)
    sums.forEach((c, i) => {
      const to = (out[i] ??= noCounts());
      for (const [, name] of KINDS) to[name] += c[name];
      to.peakMinute = Math.max(to.peakMinute, c.peakMinute);
    });
  return out;
}

/** Whether any figure of any day is above 0. */
const anyDay = (days: readonly DayCounts[]): boolean => days.some((d) => Object.values(d).some((v) => v !== 0));
const anySum = (sums: readonly LedgerSums[]): boolean => sums.some((c) => KINDS.some(([, name]) => c[name] !== 0) || c.peakMinute !== 0);

/** A key's set of consumers as read, sorted; more than MAX_KEY_CONSUMERS fails the read (bounded, never partial). */
function boundedConsumers(id: string, members: readonly string[]): string[] {
  if (members.length > MAX_KEY_CONSUMERS)
    throw new Error(`key ${id} was counted under ${members.length} consumers, more than the ${MAX_KEY_CONSUMERS} a read of its ledger takes`);
  return [...members].sort();
}

/**
 * Raises hash fields to values only where they are larger (last-seen times, peakMinute maxima: from instances whose
 * flushes interleave; a read and a write in one script, so no instance's larger value is overwritten).
 * KEYS: 1 the hash. ARGV: 1 its time to live in ms, then field, value pairs.
 */
const RAISE_LAST_SEEN = `
for i = 2, #ARGV, 2 do
  local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')
  if tonumber(ARGV[i + 1]) > cur then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
`;

/**
 * A key's ledger over a span, added up in Redis: a report over 20,000 keys then reads a few numbers per key in one call
 * instead of a day hash (up to 96 fields) per key and day, parsed and added up on the event loop that serves the
 * request path (bench/README.md, "Reports"). Read-only; its keys are one key's days, which share its hash tag (one
 * slot on a cluster), and a call touches at most retentionDays + 1 small hashes, so Redis spends well under a
 * millisecond on it. KEYS: the day hashes, in order, then (with ARGV 6 '1') the key's set of consumers (keyConsumers:
 * the key's slot too). ARGV: 1 the first day's first hour, 2 the last day's end hour (exclusive), 3 'total', 'day' or
 * 'hour', 4 the kinds' letters to add up, in order (KIND_LETTERS), 5 the letter taken as a maximum instead
 * (PEAK_LETTER), 6 '1' when the last key is the set. Returns one count per kind, then the maximum: once, once per day,
 * or once per hour of the span (its hours only: a 24-hour chart reads 24 hours' figures per key, not two days'); with
 * the set, those numbers and the set's members, as two arrays: a key never counted under a consumer still costs one
 * call, and one with consumers one more per consumer (their days are in the consumer's slot).
 * Redis's time is what a report costs the request path (the limit checks wait for the same Redis), so each field
 * costs as little as it can: its kind by its first byte (no substring), and its hour parsed only on a day the span
 * cuts (a whole day's fields all count): 25% less Redis time per call for a 35-day total than reading every hour.
 */
const SUM_LEDGER = `
local first, last, by, kinds, peak = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local withSet = ARGV[6] == '1'
local nd = #KEYS
if withSet then nd = nd - 1 end
local nk = #kinds
local w = nk + 1
local slot = {}
for k = 1, nk do slot[string.byte(kinds, k)] = k - 1 end
local peakByte = string.byte(peak)
local byHour = by == 'hour'
local out = {}
local total = {}
for k = 0, nk do total[k] = 0 end
for i = 1, nd do
  local lo = 0
  local hi = 24
  if i == 1 then lo = first end
  if i == nd then hi = last end
  local whole = lo == 0 and hi == 24 and not byHour
  local hours
  if byHour then
    hours = {}
    for x = lo * w, hi * w - 1 do hours[x] = 0 end
  end
  local day = {}
  for k = 0, nk do day[k] = 0 end
  local f = redis.call('HGETALL', KEYS[i])
  for j = 1, #f, 2 do
    local name = f[j]
    local b = string.byte(name)
    local k = slot[b]
    if k == nil and b == peakByte then k = nk end
    if k then
      local h = 0
      if not whole then h = tonumber(string.sub(name, 2)) end
      if whole or (h and h >= lo and h < hi) then
        local n = tonumber(f[j + 1]) or 0
        if k < nk then
          day[k] = day[k] + n
        elseif n > day[nk] then
          day[nk] = n
        end
        if byHour then
          if k < nk then hours[h * w + k] = hours[h * w + k] + n else hours[h * w + k] = n end
        end
      end
    end
  end
  if byHour then
    for x = lo * w, hi * w - 1 do out[#out + 1] = hours[x] end
  elseif by == 'day' then
    for k = 0, nk do out[#out + 1] = day[k] end
  else
    for k = 0, nk - 1 do total[k] = total[k] + day[k] end
    if day[nk] > total[nk] then total[nk] = day[nk] end
  end
end
if by == 'total' then
  for k = 0, nk do out[#out + 1] = total[k] end
end
if withSet then return {out, redis.call('SMEMBERS', KEYS[#KEYS])} end
return out
`;

/** A flat list of numbers, one per kind in KINDS' order and then the peak, as counts. */
function groups(xs: readonly number[]): LedgerSums[] {
  const out: LedgerSums[] = [];
  const w = KINDS.length + 1;
  for (let i = 0; i + w <= xs.length; i += w) {
    const c = noCounts();
    KINDS.forEach(([, name], k) => (c[name] = xs[i + k]!));
    c.peakMinute = xs[i + KINDS.length]!;
    out.push(c);
  }
  return out;
}

const SUM_LEDGER_COMMAND = 'tollgateSumLedger';

/**
 * The peakMinute flush's raise, for many keys in one call: a flush after a busy hour raises a figure for every key in
 * use (10,000 in the bench's scenario b), and one call per key was as many round trips and script texts (bench/README.md,
 * "peakMinute"). KEYS: the day hashes. ARGV: 1 their time to live in ms, then per key in KEYS' order the number of its
 * fields and its field, value pairs. Per key the same commands as one call each: HGET per field, HSET where larger,
 * PEXPIRE.
 */
const RAISE_PEAKS = `
local ttl = ARGV[1]
local a = 2
for k = 1, #KEYS do
  local key = KEYS[k]
  local n = tonumber(ARGV[a])
  a = a + 1
  for j = 1, n do
    local f, v = ARGV[a], ARGV[a + 1]
    a = a + 2
    local cur = redis.call('HGET', key, f)
    if not cur or tonumber(v) > tonumber(cur) then redis.call('HSET', key, f, v) end
  end
  redis.call('PEXPIRE', key, ttl)
end
`;

const RAISE_PEAKS_COMMAND = 'tollgateRaisePeaks';
const RAISE_LAST_SEEN_COMMAND = 'tollgateRaiseLastSeen';

/** Keys per raise call: a call's arguments stay small (a few KB) and Redis runs it in well under a millisecond. */
export const PEAK_KEYS_PER_CALL = 200;

/** Raise calls in flight at once: a 10,000-key flush on a cluster (a call per slot) never queues thousands of them. */
const PEAK_CALLS_IN_FLIGHT = 8;

/** How the store's writes may group keys: 'any' (one server: any keys in one script call), or 'slot' (a cluster). */
export interface UsageStoreOptions {
  scriptKeys?: 'any' | 'slot';
}

/** Runs `fn` over `items`, at most `limit` at a time. */
async function eachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

export class RedisUsageStore implements UsageStore {
  /**
   * `reads` bounds days()'s reads in flight (a report's thousands of them); writes are not bounded by it.
   * `scriptKeys`: 'slot' (the default, safe on any topology) puts only keys of one hash slot in a script call; 'any',
   * for a standalone or Sentinel-managed server, puts up to PEAK_KEYS_PER_CALL keys in each.
   */
  private readonly scriptKeys: 'any' | 'slot';

  constructor(
    private readonly redis: RedisCommands,
    private readonly ks: Keyspace,
    private readonly reads: ReadLimit = (fn) => fn(),
    opts: UsageStoreOptions = {},
  ) {
    this.scriptKeys = opts.scriptKeys ?? 'slot';
    // defineCommand sends EVALSHA, and EVAL once where Redis does not have the script yet (e.g. after a restart).
    if (!(SUM_LEDGER_COMMAND in redis)) redis.defineCommand(SUM_LEDGER_COMMAND, { lua: SUM_LEDGER });
    if (!(RAISE_PEAKS_COMMAND in redis)) redis.defineCommand(RAISE_PEAKS_COMMAND, { lua: RAISE_PEAKS });
    if (!(RAISE_LAST_SEEN_COMMAND in redis)) redis.defineCommand(RAISE_LAST_SEEN_COMMAND, { lua: RAISE_LAST_SEEN });
  }

  async add(entries: readonly UsageEntry[], ttlMs: number): Promise<UsageEntry[]> {
    // One command per entry, never a pipeline across keys: on a cluster each key's ledger lives in its own slot.
    // An entry whose HINCRBY failed is answered back; one whose HINCRBY was written is not, even if its PEXPIRE failed
    // (the count is in; the next write to that day sets its expiry).
    const failed: UsageEntry[] = [];
    // A count under a consumer: the key is in that consumer's set first (reports read its days there by it). Once per
    // key and consumer of the batch; a set that fails fails the entries it was for (sent again, set again: no harm).
    const sets = new Map<string, Promise<boolean>>();
    for (const e of entries)
      if (e.consumer && !sets.has(callerField(e.id, e.consumer)))
        sets.set(
          callerField(e.id, e.consumer),
          this.recordKeyConsumer(e.id, e.consumer).then(
            () => true,
            () => false,
          ),
        );
    await Promise.all(
      entries.map(async (e) => {
        if (e.consumer && !(await sets.get(callerField(e.id, e.consumer)))) {
          failed.push(e);
          return;
        }
        const key = this.dayKey(e.id, e.consumer, dayOf(e.atMs));
        try {
          await this.redis.hincrby(key, `${e.kind}${Math.floor((e.atMs % DAY_MS) / HOUR_MS)}`, e.n);
        } catch {
          failed.push(e);
          return;
        }
        await this.redis.pexpire(key, ttlMs).catch(() => undefined);
      }),
    );
    return failed;
  }

  /** A key's ledger day: its own (consumer '' or absent), or under the consumer. */
  private dayKey(id: string, consumer: string | undefined, day: number): string {
    return consumer ? this.ks.consumerUsageDay(consumer, id, day) : this.ks.usageDay(keySubject(id), day);
  }

  async recordKeyConsumer(keyId: string, consumerId: string): Promise<void> {
    await recordKeyConsumer(this.redis, this.ks, keyId, consumerId);
  }

  async consumerKeys(consumerId: string): Promise<string[]> {
    return (await this.reads(() => this.redis.smembers(this.ks.consumerUsageKeys(consumerId)))).sort();
  }

  async days(id: string, days: readonly number[]): Promise<DayCounts[]> {
    return mergeDays((await this.daysByConsumer(id, days)).values(), days.length);
  }

  async daysByConsumer(id: string, days: readonly number[]): Promise<Map<string, DayCounts[]>> {
    // The key's own days and its set of consumers at once (its slot), then its days under each consumer at once.
    const [members, own] = await Promise.all([this.reads(() => this.redis.smembers(this.ks.keyConsumers(id))), this.daysUnder(id, '', days)]);
    const consumers = boundedConsumers(id, members);
    const theirs = await Promise.all(consumers.map((c) => this.daysUnder(id, c, days)));
    const out = new Map<string, DayCounts[]>([['', own]]);
    consumers.forEach((c, i) => {
      if (anyDay(theirs[i]!)) out.set(c, theirs[i]!);
    });
    return out;
  }

  private daysUnder(id: string, consumer: string, days: readonly number[]): Promise<DayCounts[]> {
    return Promise.all(days.map(async (d) => toCounts(await this.reads(() => this.redis.hgetall(this.dayKey(id, consumer, d))))));
  }

  async sums(id: string, span: LedgerSpan, by: SumBy): Promise<LedgerSums[]> {
    return mergeSums((await this.sumsByConsumer(id, span, by)).values());
  }

  async sumsByConsumer(id: string, span: LedgerSpan, by: SumBy): Promise<Map<string, LedgerSums[]>> {
    // One call in the key's slot answers its own sums and its set of consumers: a key never counted under a consumer
    // costs what it did before consumers; one with consumers, one more call per consumer (in that consumer's slot).
    const keys = [...span.days.map((d) => this.ks.usageDay(keySubject(id), d)), this.ks.keyConsumers(id)];
    const r = this.redis as RedisCommands & Record<typeof SUM_LEDGER_COMMAND, (...args: Array<string | number>) => Promise<[number[], string[]]>>;
    const [own, members] = await this.reads(() =>
      r[SUM_LEDGER_COMMAND](keys.length, ...keys, span.firstHour, span.endHour, by, KIND_LETTERS, PEAK_LETTER, '1'),
    );
    const consumers = boundedConsumers(id, members);
    const theirs = await Promise.all(consumers.map((c) => this.sumsUnder(id, c, span, by)));
    const out = new Map<string, LedgerSums[]>([['', groups(own)]]);
    consumers.forEach((c, i) => {
      if (anySum(theirs[i]!)) out.set(c, theirs[i]!);
    });
    return out;
  }

  async sumsUnder(id: string, consumer: string, span: LedgerSpan, by: SumBy): Promise<LedgerSums[]> {
    const keys = span.days.map((d) => this.dayKey(id, consumer, d));
    const r = this.redis as RedisCommands & Record<typeof SUM_LEDGER_COMMAND, (...args: Array<string | number>) => Promise<number[]>>;
    return groups(await this.reads(() => r[SUM_LEDGER_COMMAND](keys.length, ...keys, span.firstHour, span.endHour, by, KIND_LETTERS, PEAK_LETTER, '0')));
  }

  async raisePeaks(entries: readonly MinutePeak[], ttlMs: number): Promise<MinutePeak[]> {
    // Each key and day once, every hour of it in the same call; keys grouped into calls (by slot on a cluster), a few
    // calls in flight at once (auto-pipelining sends those together). What a failed call carried is answered back.
    const groups = new Map<string | number, Array<{ key: string; fields: Map<string, number>; entries: MinutePeak[] }>>();
    for (const g of peakFields(entries)) {
      const key = this.dayKey(g.id, g.consumer, g.day);
      const group = this.scriptKeys === 'any' ? '' : calculateSlot(key);
      const list = groups.get(group) ?? [];
      list.push({ key, fields: g.fields, entries: g.entries });
      groups.set(group, list);
    }
    const calls: Array<typeof groups extends Map<unknown, infer V> ? V : never> = [];
    for (const list of groups.values()) for (let i = 0; i < list.length; i += PEAK_KEYS_PER_CALL) calls.push(list.slice(i, i + PEAK_KEYS_PER_CALL));
    const r = this.redis as RedisCommands & Record<typeof RAISE_PEAKS_COMMAND, (...args: Array<string | number>) => Promise<unknown>>;
    const failed: MinutePeak[] = [];
    await eachLimited(calls, PEAK_CALLS_IN_FLIGHT, async (call) => {
      const args: string[] = [String(ttlMs)];
      for (const k of call) {
        args.push(String(k.fields.size));
        for (const [f, v] of k.fields) args.push(f, String(v));
      }
      try {
        await r[RAISE_PEAKS_COMMAND](call.length, ...call.map((k) => k.key), ...args);
      } catch {
        for (const k of call) failed.push(...k.entries);
      }
    });
    return failed;
  }

  async addDeprecated(entries: readonly DeprecatedCall[], ttlMs: number): Promise<DeprecatedCall[]> {
    const byRoute = new Map<string, DeprecatedCall[]>();
    for (const e of entries) byRoute.set(e.route, [...(byRoute.get(e.route) ?? []), e]);
    const unwritten: DeprecatedCall[] = [];
    await Promise.all(
      [...byRoute].map(async ([route, list]) => {
        const counted: DeprecatedCall[] = [];
        for (const e of list) {
          const key = this.ks.deprecatedCalls(route, e.day);
          try {
            await this.redis.hincrby(key, callerField(e.id, e.consumer), e.n);
          } catch {
            unwritten.push(e);
            continue;
          }
          counted.push(e);
          await this.redis.pexpire(key, ttlMs).catch(() => undefined);
        }
        if (!counted.length) return;
        const last = new Map<string, number>();
        for (const e of counted) {
          const field = callerField(e.id, e.consumer);
          last.set(field, Math.max(last.get(field) ?? 0, e.lastMs));
        }
        const pairs = [...last].flatMap(([field, ms]) => [field, String(ms)]);
        try {
          await (this.redis as RedisCommands & Record<typeof RAISE_LAST_SEEN_COMMAND, (...args: string[]) => Promise<unknown>>)[RAISE_LAST_SEEN_COMMAND](
            '1',
            this.ks.deprecatedLastSeen(route),
            String(ttlMs),
            ...pairs,
          );
        } catch {
          // The counts are in; only the last-seen times go again (a maximum raised twice changes nothing).
          for (const e of counted) unwritten.push({ ...e, n: 0 });
        }
      }),
    );
    return unwritten;
  }

  async deprecated(route: string, days: readonly number[]): Promise<Map<string, DeprecatedCaller>> {
    const [perDay, last] = await Promise.all([
      Promise.all(days.map((d) => this.redis.hgetall(this.ks.deprecatedCalls(route, d)))),
      this.redis.hgetall(this.ks.deprecatedLastSeen(route)),
    ]);
    return deprecatedCallers(perDay, last);
  }

  async addInvalid(entries: readonly InvalidRequests[], ttlMs: number): Promise<InvalidRequests[]> {
    const byOperation = new Map<string, InvalidRequests[]>();
    for (const e of entries) byOperation.set(e.operation, [...(byOperation.get(e.operation) ?? []), e]);
    const unwritten: InvalidRequests[] = [];
    await Promise.all(
      [...byOperation].map(async ([operation, list]) => {
        const counted: InvalidRequests[] = [];
        for (const e of list) {
          if (e.n === 0) {
            counted.push(e);
            continue;
          }
          const key = this.ks.invalidRequests(operation, e.day);
          try {
            await this.redis.hincrby(key, callerField(e.id, e.consumer), e.n);
          } catch {
            unwritten.push(e);
            continue;
          }
          counted.push(e);
          await this.redis.pexpire(key, ttlMs).catch(() => undefined);
        }
        if (!counted.length) return;
        const last = new Map<string, InvalidRequests>();
        for (const e of counted) {
          const field = callerField(e.id, e.consumer);
          if (e.lastMs >= (last.get(field)?.lastMs ?? 0)) last.set(field, e);
        }
        try {
          await (this.redis as RedisCommands & Record<typeof RAISE_LAST_SEEN_COMMAND, (...args: string[]) => Promise<unknown>>)[RAISE_LAST_SEEN_COMMAND](
            '1',
            this.ks.invalidLastSeen(operation),
            String(ttlMs),
            ...[...last].flatMap(([id, e]) => [id, String(e.lastMs)]),
          );
          // The last pointer per key: whichever instance writes last wins, close enough for "where it fails".
          const pointers = this.ks.invalidPointers(operation);
          await this.redis.hset(pointers, Object.fromEntries([...last].map(([id, e]) => [id, e.pointer])));
          await this.redis.pexpire(pointers, ttlMs).catch(() => undefined);
        } catch {
          // The counts are in; only the last-seen times and pointers go again.
          for (const e of counted) unwritten.push({ ...e, n: 0 });
        }
      }),
    );
    return unwritten;
  }

  async invalid(operation: string, days: readonly number[]): Promise<Map<string, InvalidCaller>> {
    const [perDay, last, pointers] = await Promise.all([
      Promise.all(days.map((d) => this.redis.hgetall(this.ks.invalidRequests(operation, d)))),
      this.redis.hgetall(this.ks.invalidLastSeen(operation)),
      this.redis.hgetall(this.ks.invalidPointers(operation)),
    ]);
    return invalidCallers(perDay, last, pointers);
  }
}

/** The callers of a deprecated route from its day hashes (caller -> calls) and last-seen times, by caller field. */
function deprecatedCallers(
  perDay: ReadonlyArray<Record<string, string | number>>,
  last: Readonly<Record<string, string | number>>,
): Map<string, DeprecatedCaller> {
  const out = new Map<string, DeprecatedCaller>();
  for (const day of perDay) {
    for (const [field, n] of Object.entries(day)) {
      const e = out.get(field) ?? { ...callerOf(field), calls: 0, lastMs: Number(last[field] ?? 0) };
      e.calls += Number(n);
      out.set(field, e);
    }
  }
  return out;
}

/** The callers of an operation from its day hashes (caller -> count), last-seen times and pointers, by caller field. */
function invalidCallers(
  perDay: ReadonlyArray<Record<string, string | number>>,
  last: Readonly<Record<string, string | number>>,
  pointers: Readonly<Record<string, string>>,
): Map<string, InvalidCaller> {
  const out = new Map<string, InvalidCaller>();
  for (const day of perDay) {
    for (const [field, n] of Object.entries(day)) {
      const e = out.get(field) ?? {
        ...callerOf(field),
        calls: 0,
        lastMs: Number(last[field] ?? 0),
        pointer: Object.hasOwn(pointers, field) ? pointers[field] : undefined,
      };
      e.calls += Number(n);
      out.set(field, e);
    }
  }
  return out;
}

/** Entries grouped by key, consumer and day, each hour's field (m<h>) with the largest value given for it. */
function peakFields(entries: readonly MinutePeak[]): Array<{ id: string; consumer: string; day: number; fields: Map<string, number>; entries: MinutePeak[] }> {
  const byName = new Map<string, { id: string; consumer: string; day: number; fields: Map<string, number>; entries: MinutePeak[] }>();
  for (const e of entries) {
    const day = dayOf(e.atMs);
    const consumer = e.consumer ?? '';
    const name = `${e.id}\u0000${consumer}\u0000${day}`;
    let g = byName.get(name);
    if (!g) byName.set(name, (g = { id: e.id, consumer, day, fields: new Map(), entries: [] }));
    const field = `m${Math.floor((e.atMs % DAY_MS) / HOUR_MS)}`;
    g.fields.set(field, Math.max(g.fields.get(field) ?? 0, e.peak));
    g.entries.push(e);
  }
  return [...byName.values()];
}

/** The same data in process memory, for a Redis-less gateway (`tollgate dev`): one instance, lost on restart. */
export class MemoryUsageStore implements UsageStore {
  /** Day hashes by `<consumer>\0<key>\0<day>` ('' consumer: the key's own day). */
  private readonly ledger = new Map<string, DayCounts>();
  /** Per key, every consumer it was counted under; per consumer, every key (the Redis sets' equivalents). */
  private readonly consumersOf = new Map<string, Set<string>>();
  private readonly keysOf = new Map<string, Set<string>>();
  private readonly calls = new Map<string, Map<string, number>>();
  private readonly last = new Map<string, Map<string, number>>();
  private readonly invalidCounts = new Map<string, Record<string, number>>();
  private readonly invalidLast = new Map<string, Record<string, number>>();
  private readonly invalidPointer = new Map<string, Record<string, string>>();

  private static dayName(id: string, consumer: string | undefined, day: number): string {
    return `${consumer ?? ''}\u0000${id}\u0000${day}`;
  }

  async add(entries: readonly UsageEntry[]): Promise<UsageEntry[]> {
    for (const e of entries) {
      // Here every count comes through add (no limit script): a count under a consumer records the pair itself.
      if (e.consumer) await this.recordKeyConsumer(e.id, e.consumer);
      const key = MemoryUsageStore.dayName(e.id, e.consumer, dayOf(e.atMs));
      const day = this.ledger.get(key) ?? {};
      const field = `${e.kind}${Math.floor((e.atMs % DAY_MS) / HOUR_MS)}`;
      day[field] = (day[field] ?? 0) + e.n;
      this.ledger.set(key, day);
    }
    return [];
  }

  async raisePeaks(entries: readonly MinutePeak[]): Promise<MinutePeak[]> {
    for (const g of peakFields(entries)) {
      if (g.consumer) await this.recordKeyConsumer(g.id, g.consumer);
      const name = MemoryUsageStore.dayName(g.id, g.consumer, g.day);
      const day = this.ledger.get(name) ?? {};
      for (const [f, v] of g.fields) day[f] = Math.max(day[f] ?? 0, v);
      this.ledger.set(name, day);
    }
    return [];
  }

  async recordKeyConsumer(keyId: string, consumerId: string): Promise<void> {
    const of = (m: Map<string, Set<string>>, k: string): Set<string> => {
      let set = m.get(k);
      if (!set) m.set(k, (set = new Set()));
      return set;
    };
    of(this.consumersOf, keyId).add(consumerId);
    of(this.keysOf, consumerId).add(keyId);
  }

  async consumerKeys(consumerId: string): Promise<string[]> {
    return [...(this.keysOf.get(consumerId) ?? [])].sort();
  }

  /** '' then the key's consumers, sorted, bounded as on Redis. */
  private owners(id: string): string[] {
    return ['', ...boundedConsumers(id, [...(this.consumersOf.get(id) ?? [])])];
  }

  async days(id: string, days: readonly number[]): Promise<DayCounts[]> {
    return mergeDays((await this.daysByConsumer(id, days)).values(), days.length);
  }

  async daysByConsumer(id: string, days: readonly number[]): Promise<Map<string, DayCounts[]>> {
    const out = new Map<string, DayCounts[]>();
    for (const c of this.owners(id)) {
      const list = days.map((d) => ({ ...(this.ledger.get(MemoryUsageStore.dayName(id, c, d)) ?? {}) }));
      if (c === '' || anyDay(list)) out.set(c, list);
    }
    return out;
  }

  async sums(id: string, span: LedgerSpan, by: SumBy): Promise<LedgerSums[]> {
    return mergeSums((await this.sumsByConsumer(id, span, by)).values());
  }

  async sumsByConsumer(id: string, span: LedgerSpan, by: SumBy): Promise<Map<string, LedgerSums[]>> {
    const out = new Map<string, LedgerSums[]>();
    for (const c of this.owners(id)) {
      const sums = await this.sumsUnder(id, c, span, by);
      if (c === '' || anySum(sums)) out.set(c, sums);
    }
    return out;
  }

  async sumsUnder(id: string, consumer: string, span: LedgerSpan, by: SumBy): Promise<LedgerSums[]> {
    const out: LedgerSums[] = [];
    const total = noCounts();
    span.days.forEach((d, i) => {
      const counts = this.ledger.get(MemoryUsageStore.dayName(id, consumer, d)) ?? {};
      const day = noCounts();
      for (let h = 0; h < 24; h++) {
        const c = noCounts();
        if (inSpan(span, i, h)) {
          for (const [letter, name] of KINDS) c[name] = counts[`${letter}${h}`] ?? 0;
          c.peakMinute = counts[`${PEAK_LETTER}${h}`] ?? 0;
        }
        if (by === 'hour' && inSpan(span, i, h)) out.push(c);
        for (const to of [day, total]) {
          for (const [, name] of KINDS) to[name] += c[name];
          to.peakMinute = Math.max(to.peakMinute, c.peakMinute);
        }
      }
      if (by === 'day') out.push(day);
    });
    return by === 'total' ? [total] : out;
  }

  async addDeprecated(entries: readonly DeprecatedCall[]): Promise<DeprecatedCall[]> {
    for (const e of entries) {
      const field = callerField(e.id, e.consumer);
      const key = `${e.route}\u0000${e.day}`;
      const m = this.calls.get(key) ?? new Map<string, number>();
      m.set(field, (m.get(field) ?? 0) + e.n);
      this.calls.set(key, m);
      const l = this.last.get(e.route) ?? new Map<string, number>();
      l.set(field, Math.max(l.get(field) ?? 0, e.lastMs));
      this.last.set(e.route, l);
    }
    return [];
  }

  async deprecated(route: string, days: readonly number[]): Promise<Map<string, DeprecatedCaller>> {
    return deprecatedCallers(
      days.map((d) => Object.fromEntries(this.calls.get(`${route}\u0000${d}`) ?? [])),
      Object.fromEntries(this.last.get(route) ?? []),
    );
  }

  async addInvalid(entries: readonly InvalidRequests[]): Promise<InvalidRequests[]> {
    const hash = <T>(m: Map<string, Record<string, T>>, k: string): Record<string, T> => {
      let h = m.get(k);
      if (!h) m.set(k, (h = Object.create(null) as Record<string, T>));
      return h;
    };
    for (const e of entries) {
      const field = callerField(e.id, e.consumer);
      const day = hash(this.invalidCounts, `${e.operation}\u0000${e.day}`);
      day[field] = (day[field] ?? 0) + e.n;
      const last = hash(this.invalidLast, e.operation);
      if (e.lastMs >= (last[field] ?? 0)) {
        last[field] = e.lastMs;
        hash(this.invalidPointer, e.operation)[field] = e.pointer;
      }
    }
    return [];
  }

  async invalid(operation: string, days: readonly number[]): Promise<Map<string, InvalidCaller>> {
    return invalidCallers(
      days.map((d) => this.invalidCounts.get(`${operation}\u0000${d}`) ?? {}),
      this.invalidLast.get(operation) ?? {},
      this.invalidPointer.get(operation) ?? {},
    );
  }
}
