// Limits on the shared Redis: the whole decision (key still valid, ban, both windows, strikes, starting a ban) is one Lua script,
// so it is atomic across every gateway instance and costs one round trip. Every key it touches carries the
// hash tag {<key id>}, so on Redis Cluster it runs in a single slot.
//
// Why not rate-limiter-flexible here (it meters the anonymous limit instead): its RateLimiterUnion consumes every
// window with no rollback, so a request refused by the minute window would still spend day quota, and separate
// consume() calls plus a ban check would be three round trips.
import { isRedirection, type RedisCommands } from '../storage/redis.js';
import type { Keyspace } from '../storage/keyspace.js';
import { dayOf, HOUR_MS, type UsageKind } from '../usage/store.js';
import {
  DAY_MS,
  MINUTE_MS,
  type BanStore,
  type BanPolicy,
  type Decision,
  type KeyLimits,
  type LimiterStore,
  type LimitSnapshot,
  type Outcome,
  type Refund,
  type WindowCredit,
} from './types.js';

// KEYS: 1 minute counter, 2 day counter, 3 ban hash (until, level, lastEnd), 4 strike counter, 5 the key record, 6 the
// usage ledger's day as the gateway's clock has it (Keyspace.usageDay, the same hash tag: the same slot; declared like
// every other key, as Redis Cluster's slot migrations and Redis-compatible servers require): a hash of per-hour counts,
// a<h> admitted, r<h> refused by a window, b<h> refused by a ban, f<h> admitted but failed by the upstream (h = UTC
// hour 0-23), expiring ledgerMs after the first count of each kind in each hour.
// ARGV: 1 perMinute, 2 perDay, 3 the ledger's day as the gateway's clock has it (UTC days since 1970; '' = no
// ledger), 4 the ban ladder, numbers separated by spaces (threshold strikeWindowMs resetAfterMs durationsMs...: built
// once per ladder, not per request, and parsed only when a request meets a ban or a full window), 5 keyHash ('' =
// skip), 6 the revision of the record the gateway has cached, sent only when that copy is active and holds keyHash as
// its current hash ('' = skip): the SHA-1 of its bytes (recordRevision in src/keys/redis-store.ts), 7 a credit ('' =
// none): "minute minuteMs day dayMs", requests the gateway admitted from its memory windows while Redis was out of
// reach, counted here before the decision (see KeyLimiter: why a credit, and not a local max), 8 ledgerMs ('' with no
// ledger; Redis reads it, the script never needs it as a number).
// Reply: outcome ('invalid_record': the key record is not a JSON object), minute used, minute ttl, day used, day ttl, retry ms, ban level, and whether the record is still
// that revision (1 yes, 0 changed, -1 not compared), so a key in steady use never needs its cache entry re-read; with
// the ledger, the hour it counts in on Redis's clock (hours since 1970). When that hour is not in the declared day
// (Redis's clock in another UTC day than the gateway's: a request at midnight, or a gateway clock that is off) the
// script counts nothing in the ledger and the gateway counts the request in Redis's day itself (a second call, only
// then), and sends Redis's day from then on.
// Time is Redis's own clock (TIME), so instances with skewed clocks still agree on windows, bans and the ledger's
// hours. Its cost is Redis CPU on every admitted request, so the admitted path makes as few calls as it can (TIME,
// GET of the record, HMGET of the ban, INCR and PTTL per window, the ledger's HINCRBY), and turns no number into a
// string: Lua does that with sprintf("%.14g"), and formatting the ledger's two names cost Redis nearly as many
// instructions as the HINCRBY itself (bench/README.md, "What the usage ledger costs Redis"). So the day's key comes
// from the gateway, checked against Redis's clock, and the hour's field is cut from a constant string.
/**
 * The ledger's count of `n` requests of a kind (a, r, b; n a Lua expression, 1 for this request), inlined where the
 * script decides: no closure per call. A count that creates its hour's field gives the day its expiry.
 */
function ledger(kind: UsageKind, n = '1'): string {
  return `if usageDay and redis.call('HINCRBY', usageDay, ${ledgerHourField(kind)}, ${n}) == ${n} then redis.call('PEXPIRE', usageDay, ARGV[8]) end`;
}

/**
 * The Lua expression for a kind's field in hour `h` (0-23) of the ledger's day, "a0" to "a23": cut from a constant
 * string of all 24, so no number is formatted (Lua's tostring is a sprintf: it cost Redis half as much as the HINCRBY).
 * Exported for its test.
 */
export function ledgerHourField(kind: UsageKind): string {
  const fields = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `${kind}${from + i}`).join('');
  // Hours 0-9 are 2 characters each ("a0".."a9"), hours 10-23 are 3 ("a10".."a23").
  return `(h < 10 and string.sub('${fields(0, 9)}', 2 * h + 1, 2 * h + 2) or string.sub('${fields(10, 23)}', 3 * h - 29, 3 * h - 27))`;
}

const CHECK_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local perMinute, perDay, ledgerDay = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local keyHash = ARGV[5]
local same = -1

-- The key record decides validity: the gateway's key cache may be older than a revoke or rotation.
if keyHash ~= '' then
  -- pcall: a record that is not a JSON object (or not a string at all) is that key's fault, reported as such, and
  -- must not surface as a script error the gateway would take for Redis failing.
  local raw = redis.pcall('GET', KEYS[5])
  if not raw then return {'invalid_key', 0, 0, 0, 0, 0, 0, -1} end
  if type(raw) ~= 'string' then return {'invalid_record', 0, 0, 0, 0, 0, 0, -1} end
  if ARGV[6] ~= '' then same = (redis.sha1hex(raw) == ARGV[6]) and 1 or 0 end
  -- Still, byte for byte, the copy the gateway judged this key valid against (active, the key its current hash):
  -- nothing to decode. Anything else is decoded and judged here.
  if same ~= 1 then
    local ok, rec = pcall(cjson.decode, raw)
    if not ok or type(rec) ~= 'table' then return {'invalid_record', 0, 0, 0, 0, 0, 0, -1} end
    local current = rec.hash == keyHash
    local grace = rec.prevHash == keyHash and now < (tonumber(rec.prevHashUntil) or 0)
    if rec.status ~= 'active' or not (current or grace) then return {'invalid_key', 0, 0, 0, 0, 0, 0, -1} end
  end
end

-- The ledger's hour on Redis's clock, counted in the day the gateway declared (KEYS[6]) when Redis's clock is in that
-- day (nearly always); else not here: the gateway counts it in Redis's day from the hour in the reply.
local usageDay, h, hour
if ledgerDay then
  hour = (now - now % 3600000) / 3600000
  h = hour - ledgerDay * 24
  if h >= 0 and h < 24 then usageDay = KEYS[6] end
end

-- A credit goes into the window as it stands; a window that lapsed meanwhile starts with it, for what was left of the
-- gateway's memory window. (Nearly every call has none: nothing of this runs then.)
if ARGV[7] ~= '' then
  local c = {}
  for v in string.gmatch(ARGV[7], '%S+') do c[#c + 1] = tonumber(v) end
  for i = 0, 1 do
    local n, ttl = c[1 + 2 * i], c[2 + 2 * i]
    if n > 0 and redis.call('INCRBY', KEYS[1 + i], n) == n then redis.call('PEXPIRE', KEYS[1 + i], ttl) end
  end
  -- Requests admitted from memory while Redis was away: in the ledger too, in the hour they reached it.
  if c[3] > 0 then ${ledger('a', 'c[3]')} end
end

-- The ban ladder (ARGV[4]): threshold, strike window, reset after, then the ban durations, level 1 first.
local p
local function ladder()
  if not p then
    p = {}
    for v in string.gmatch(ARGV[4], '%S+') do p[#p + 1] = tonumber(v) end
  end
  return p
end

-- The time left in a window that holds a count. One without an expiry (a PERSIST by hand) would never end, and a full
-- one would refuse for good: it is given a whole window from now.
local function remaining(key, len)
  local ttl = redis.call('PTTL', key)
  if ttl >= 0 then return ttl end
  redis.call('PEXPIRE', key, len)
  return len
end

-- A window's count and time left as it stands (a lapsed window: 0, and the whole length).
local function window(key, len)
  local used = tonumber(redis.call('GET', key) or '0')
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then used = 0; ttl = len end
  return used, ttl
end

local ban = redis.call('HMGET', KEYS[3], 'until', 'level', 'lastEnd')
local banUntil, level, lastEnd = tonumber(ban[1] or '0'), tonumber(ban[2] or '0'), tonumber(ban[3] or '0')
if lastEnd > 0 and now >= lastEnd + ladder()[3] then level = 0 end
if banUntil > now then
  local m, mttl = window(KEYS[1], ${MINUTE_MS})
  local d, dttl = window(KEYS[2], ${DAY_MS})
  ${ledger('b')}
  return {'banned', m, mttl, d, dttl, banUntil - now, level, same, hour}
end

-- The request is counted in both windows at once (most are admitted: one call per window). One that either window
-- refuses is taken out of both again before anyone else can see it (the script is atomic), so a refusal spends no
-- quota, and a window this request opened is removed: a window starts with its first admitted request.
local m = redis.call('INCR', KEYS[1])
local d = redis.call('INCR', KEYS[2])
if m > perMinute or d > perDay then
  if m == 1 then redis.call('DEL', KEYS[1]) else redis.call('DECR', KEYS[1]) end
  if d == 1 then redis.call('DEL', KEYS[2]) else redis.call('DECR', KEYS[2]) end
  m, d = m - 1, d - 1
  local mttl = m > 0 and remaining(KEYS[1], ${MINUTE_MS}) or ${MINUTE_MS}
  local dttl = d > 0 and remaining(KEYS[2], ${DAY_MS}) or ${DAY_MS}
  local minuteFull, dayFull = m >= perMinute, d >= perDay
  local outcome, retry
  if minuteFull and dayFull then outcome = 'limited_both'; retry = math.max(mttl, dttl)
  elseif minuteFull then outcome = 'limited_minute'; retry = mttl
  else outcome = 'limited_day'; retry = dttl end
  local lad = ladder()
  local strikes = redis.call('INCR', KEYS[4])
  if strikes == 1 then redis.call('PEXPIRE', KEYS[4], lad[2]) end
  if strikes >= lad[1] then
    level = level + 1
    local dur = lad[3 + math.min(level, #lad - 3)]
    redis.call('HSET', KEYS[3], 'until', now + dur, 'level', level, 'lastEnd', now + dur)
    redis.call('PEXPIRE', KEYS[3], dur + lad[3])
    redis.call('DEL', KEYS[4])
    ${ledger('b')}
    return {'banned_now', m, mttl, d, dttl, dur, level, same, hour}
  end
  ${ledger('r')}
  return {outcome, m, mttl, d, dttl, retry, level, same, hour}
end

-- Admitted. A window that this request opened runs from now.
local mttl, dttl = ${MINUTE_MS}, ${DAY_MS}
if m == 1 then redis.call('PEXPIRE', KEYS[1], mttl) else mttl = remaining(KEYS[1], mttl) end
if d == 1 then redis.call('PEXPIRE', KEYS[2], dttl) else dttl = remaining(KEYS[2], dttl) end
-- The usage ledger, counted here in the same call as the decision: exact across the fleet, no round trip of its own.
${ledger('a')}
return {'admitted', m, mttl, d, dttl, 0, level, same, hour}
`;

/** The ledger's kind of each outcome the script counts. */
const LEDGER_KIND: Record<Outcome, UsageKind> = {
  admitted: 'a',
  limited_minute: 'r',
  limited_day: 'r',
  limited_both: 'r',
  banned: 'b',
  banned_now: 'b',
  invalid_key: 'r',
  invalid_record: 'r',
};

type ScriptReply = [Outcome, number, number, number, number, number, number, number, number?];

/**
 * The script is defined on a client twice, as two commands that send the same EVALSHA: one ioredis auto-pipelines,
 * and one it sends at once (it is in the client's autoPipeliningIgnoredCommands).
 */
const PIPELINED = 'tollgateCheck';
const AT_ONCE = 'tollgateCheckNow';
type CheckCommand = (...args: Array<string | number>) => Promise<ScriptReply>;
type WithCheck = RedisCommands & Record<typeof PIPELINED | typeof AT_ONCE, CheckCommand>;

/** The check script's two commands on a client, defined the first time the client is used (once per connection). */
function withCheck(redis: RedisCommands): WithCheck {
  if (!(PIPELINED in redis)) {
    // defineCommand sends EVALSHA and falls back to EVAL once when the script is not cached (e.g. after a restart).
    redis.defineCommand(PIPELINED, { numberOfKeys: 6, lua: CHECK_SCRIPT });
    redis.defineCommand(AT_ONCE, { numberOfKeys: 6, lua: CHECK_SCRIPT });
    // A new array: ioredis's default one is shared by every client.
    redis.options.autoPipeliningIgnoredCommands = [...(redis.options.autoPipeliningIgnoredCommands ?? []), AT_ONCE];
  }
  return redis as WithCheck;
}

export class RedisLimiterStore implements LimiterStore {
  private readonly redis: WithCheck;
  private readonly ladders = new WeakMap<BanPolicy, string>();

  /**
   * `ledgerTtlMs`: how long a day of the usage ledger is kept (read per call: a reload applies); 0 = no ledger.
   * `clientForSlotOf`: the connection serving a key's slot (RedisConnection.clientForSlotOf; on a cluster, its
   * primary's own connection): every key of a check shares the id's slot, so the check goes straight there.
   */
  constructor(
    redis: RedisCommands,
    private readonly ks: Keyspace,
    private readonly ledgerTtlMs: () => number = () => 0,
    private readonly clientForSlotOf: (key: string) => RedisCommands = () => redis,
  ) {
    this.redis = withCheck(redis);
  }

  /** Checks sent and not yet answered. */
  private awaiting = 0;

  async check(id: string, limits: KeyLimits, ban: BanPolicy, keyHash = '', keyRevision = '', credit?: WindowCredit): Promise<Decision> {
    const record = this.ks.keyRecord(id);
    const ladder = this.ladderArg(ban);
    const ledgerMs = this.ledgerTtlMs();
    const ledgerDay = ledgerMs > 0 ? this.dayArg(Date.now() + this.redisAheadMs) : '';
    // Declared even with no ledger (the script then leaves it alone): the script's keys are always six.
    const usageDay = `${record}:usage:${ledgerDay === '' ? this.day.arg : ledgerDay}`;
    const creditArg = credit ? `${credit.minute} ${credit.minuteMs} ${credit.day} ${credit.dayMs}` : '';
    // A check with none other awaiting Redis is written to the socket now. Auto-pipelining would hold it until
    // setImmediate, to write with it whatever else this turn of the event loop sends; at one request at a time
    // there is nothing else, and the wait and the pipeline per command raised the p99 at one connection by about
    // 0.9 ms (bench/README.md, "p99 at one connection: the limit check's write"). Checks that overlap (concurrent
    // requests) still share one write per turn (per node, on a cluster).
    const command = this.awaiting === 0 ? AT_ONCE : PIPELINED;
    const minute = this.ks.minuteWindow(id);
    const day = this.ks.dayWindow(id);
    const banKey = this.ks.ban(id);
    const strikes = this.ks.strikes(id);
    const direct = withCheck(this.clientForSlotOf(record));
    this.awaiting++;
    let reply: ScriptReply;
    try {
      // At most twice: straight to the slot's primary, then (after a redirection) through the cluster client.
      for (let client = direct; ; client = this.redis) {
        try {
          reply = await client[command](
            minute,
            day,
            banKey,
            strikes,
            record,
            usageDay,
            limits.perMinute,
            limits.perDay,
            ledgerDay,
            ladder,
            keyHash,
            keyRevision,
            creditArg,
            ledgerMs > 0 ? ledgerMs : '',
          );
          break;
        } catch (err) {
          // The slot moved (resharding, failover) since the cluster client's table was read: the script did not run;
          // the cluster client follows the redirection and refreshes its table for the next check.
          if (client === this.redis || !isRedirection(err)) throw err;
        }
      }
    } finally {
      this.awaiting--;
    }
    const [outcome, m, mttl, d, dttl, retryMs, banLevel, same, hour] = reply;
    const decision: Decision = {
      outcome,
      minute: { used: Number(m), resetMs: Number(mttl) },
      day: { used: Number(d), resetMs: Number(dttl) },
      retryMs: Number(retryMs),
      banLevel: Number(banLevel),
    };
    if (same !== -1) decision.keyRecord = same === 1 ? 'current' : 'changed';
    if (hour !== undefined && hour !== null) {
      decision.ledgerHour = Number(hour);
      if (Math.floor(decision.ledgerHour / 24) !== Number(ledgerDay)) await this.countInRedisDay(id, decision, credit, ledgerMs);
    }
    return decision;
  }

  /** How far Redis's clock runs ahead of this process's (negative: behind), learned when their UTC days differed. */
  private redisAheadMs = 0;

  /**
   * The script counted nothing in the ledger: Redis's clock was in another UTC day than the one declared. The
   * request (and a credit's requests) is counted here, in Redis's hour, and the gateway's clock is corrected by what
   * it was off at least, so its next checks declare Redis's day. Rare (midnight, or a clock that is off); a count that
   * fails here is lost, never retried as a second decision.
   */
  private async countInRedisDay(id: string, d: Decision, credit: WindowCredit | undefined, ledgerMs: number): Promise<void> {
    const client = this.redis;
    const hour = d.ledgerHour!;
    const hourStart = hour * HOUR_MS;
    const now = Date.now();
    this.redisAheadMs = now < hourStart ? hourStart - now : now >= hourStart + HOUR_MS ? hourStart + HOUR_MS - 1 - now : 0;
    const key = this.ks.usageDay(id, Math.floor(hour / 24));
    const h = hour % 24;
    try {
      await client.hincrby(key, `${LEDGER_KIND[d.outcome]}${h}`, 1);
      if (credit && credit.day > 0) await client.hincrby(key, `a${h}`, credit.day);
      await client.pexpire(key, ledgerMs);
    } catch {
      // Redis failed right after deciding: the decision stands; these counts are lost.
    }
  }

  snapshot(id: string, ban: BanPolicy, keyHash?: string): Promise<LimitSnapshot> {
    return readSnapshot(this.redis, this.ks, id, ban, keyHash);
  }

  async refund(id: string, r: Refund): Promise<void> {
    if (!(REFUND in this.redis)) this.redis.defineCommand(REFUND, { numberOfKeys: 3, lua: REFUND_SCRIPT });
    const hour = r.ledgerHour;
    const day = hour === undefined ? 0 : Math.floor(hour / 24);
    const h = hour === undefined ? 0 : hour % 24;
    const client = this.redis as unknown as Record<typeof REFUND, (...args: Array<string | number>) => Promise<number>>;
    await client[REFUND](
      this.ks.minuteWindow(id),
      this.ks.dayWindow(id),
      this.ks.usageDay(id, day),
      Math.round(r.minuteMs),
      Math.round(r.dayMs),
      hour === undefined ? '' : `a${h}`,
      `f${h}`,
    );
  }

  private day = { at: -1, arg: '' };

  /** The UTC day of `nowMs` as the script's ledger argument (days since 1970), formatted once a day. */
  private dayArg(nowMs: number): string {
    const at = dayOf(nowMs);
    if (at !== this.day.at) this.day = { at, arg: String(at) };
    return this.day.arg;
  }

  /** The script's ban ladder argument, built once per ladder (the config's, replaced whole on reload). */
  private ladderArg(ban: BanPolicy): string {
    let arg = this.ladders.get(ban);
    if (arg === undefined) {
      arg = [ban.threshold, ban.windowSeconds * 1000, ban.resetAfterSeconds * 1000, ...ban.durationsSeconds.map((s) => s * 1000)].join(' ');
      this.ladders.set(ban, arg);
    }
    return arg;
  }
}

/**
 * The key's windows and ban as the limit script would see them, writing nothing: the quota endpoint and the admin
 * API read them without spending a request. KEYS: 1 minute counter, 2 day counter, 3 ban hash, 4 the key record
 * (the same slot: every one carries the id's hash tag). ARGV: 1 resetAfterMs, 2 keyHash ('' = skip the record check).
 * Reply: key state, now, minute used, minute ttl (-1: not started), day used, day ttl, ms until the ban ends, level.
 */
const SNAPSHOT_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[2] ~= '' then
  local raw = redis.pcall('GET', KEYS[4])
  if not raw then return {'invalid_key', now, 0, -1, 0, -1, 0, 0} end
  if type(raw) ~= 'string' then return {'invalid_record', now, 0, -1, 0, -1, 0, 0} end
  local ok, rec = pcall(cjson.decode, raw)
  if not ok or type(rec) ~= 'table' then return {'invalid_record', now, 0, -1, 0, -1, 0, 0} end
  local current = rec.hash == ARGV[2]
  local grace = rec.prevHash == ARGV[2] and now < (tonumber(rec.prevHashUntil) or 0)
  if rec.status ~= 'active' or not (current or grace) then return {'invalid_key', now, 0, -1, 0, -1, 0, 0} end
end
local function window(key)
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then return 0, -1 end
  return tonumber(redis.call('GET', key) or '0'), ttl
end
local m, mttl = window(KEYS[1])
local d, dttl = window(KEYS[2])
local ban = redis.call('HMGET', KEYS[3], 'until', 'level', 'lastEnd')
local banUntil, level, lastEnd = tonumber(ban[1] or '0'), tonumber(ban[2] or '0'), tonumber(ban[3] or '0')
if lastEnd > 0 and now >= lastEnd + tonumber(ARGV[1]) then level = 0 end
return {'ok', now, m, mttl, d, dttl, math.max(0, banUntil - now), level}
`;
const SNAPSHOT = 'tollgateSnapshot';

/**
 * One admitted request given back (the upstream failed it). KEYS: 1 minute counter, 2 day counter, 3 the ledger's day
 * the check counted it in (one slot: the id's hash tag). ARGV: 1, 2 how long the minute and day windows the check
 * counted in run from now, as the gateway reckons it (their reset then, less the time since: no clock is compared),
 * 3 the ledger's admitted field of that hour ('' = not counted there), 4 its upstreamFailed field.
 * A window is given the request back only while it is the same window: one opened since ends at least a whole window
 * later than the one the check saw, so a remaining time past half a window more than reckoned is another window (and
 * left alone); never below zero. The ledger moves one count from admitted to upstreamFailed only when there is one.
 * Strikes and bans are not touched: a refund never lifts or shortens a ban, nor takes back a strike.
 */
const REFUND_SCRIPT = `
local lens = {${MINUTE_MS}, ${DAY_MS}}
for i = 1, 2 do
  local ttl = redis.call('PTTL', KEYS[i])
  if ttl > 0 and ttl < tonumber(ARGV[i]) + lens[i] / 2 and (tonumber(redis.call('GET', KEYS[i])) or 0) > 0 then
    redis.call('DECR', KEYS[i])
  end
end
if ARGV[3] ~= '' and (tonumber(redis.call('HGET', KEYS[3], ARGV[3])) or 0) > 0 then
  redis.call('HINCRBY', KEYS[3], ARGV[3], -1)
  redis.call('HINCRBY', KEYS[3], ARGV[4], 1)
end
return 1
`;
const REFUND = 'tollgateRefund';
type SnapshotReply = [LimitSnapshot['key'], number, number, number, number, number, number, number];

/** The snapshot script on a client (defined once per client: EVALSHA, EVAL once after a Redis restart). */
function readSnapshot(redis: RedisCommands, ks: Keyspace, id: string, ban: BanPolicy, keyHash = ''): Promise<LimitSnapshot> {
  if (!(SNAPSHOT in redis)) redis.defineCommand(SNAPSHOT, { numberOfKeys: 4, lua: SNAPSHOT_SCRIPT });
  const r = redis as RedisCommands & Record<typeof SNAPSHOT, (...args: Array<string | number>) => Promise<SnapshotReply>>;
  return r[SNAPSHOT](ks.minuteWindow(id), ks.dayWindow(id), ks.ban(id), ks.keyRecord(id), ban.resetAfterSeconds * 1000, keyHash).then(
    ([key, now, m, mttl, d, dttl, banMs, level]) => ({
      key,
      now: Number(now),
      minute: { used: Number(m), resetMs: mttl < 0 ? MINUTE_MS : Number(mttl) },
      day: { used: Number(d), resetMs: dttl < 0 ? DAY_MS : Number(dttl) },
      banMs: Number(banMs),
      banLevel: Number(level),
    }),
  );
}

/** Bans in Redis, for administration: read on Redis's clock, lifted with the strikes toward the next one. */
export class RedisBanStore implements BanStore {
  constructor(
    private readonly redis: RedisCommands,
    private readonly ks: Keyspace,
  ) {}

  snapshot(id: string, ban: BanPolicy): Promise<LimitSnapshot> {
    return readSnapshot(this.redis, this.ks, id, ban);
  }

  async unban(id: string): Promise<void> {
    // One slot: both keys carry the id's hash tag.
    await this.redis.del(this.ks.ban(id), this.ks.strikes(id));
  }

  async resetWindows(id: string): Promise<void> {
    // One DEL in one slot (every key carries the id's hash tag): a check runs wholly before or wholly after it, so no
    // request is counted in one window and not the other.
    await this.redis.del(this.ks.minuteWindow(id), this.ks.dayWindow(id), this.ks.strikes(id));
  }
}
