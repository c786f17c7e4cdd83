// Limits on the shared Redis: the whole decision (key still valid, ban, every window, strikes, starting a ban) is one Lua script,
// so it is atomic across every gateway instance and costs one round trip. Every key it touches carries the subject's
// hash tag ({<key id>} for a key, {c:<consumer>} for a key of a consumer: subject.ts), so on Redis Cluster it runs in a
// single slot. A key of a consumer is checked against its consumer's pool and its own caps in that one call.
//
// Why not rate-limiter-flexible here (it meters the anonymous limit instead): its RateLimiterUnion consumes every
// window with no rollback, so a request refused by the minute window would still spend day quota, and separate
// consume() calls plus a ban check would be three round trips.
import { readFileSync } from 'node:fs';
import { isRedirection, type RedisCommands } from '../storage/redis.js';
import { encodeArgs, LuaScript, type CommandConnection, type EncodedArgs } from '../storage/script-command.js';
import type { Keyspace } from '../storage/keyspace.js';
import { banHolder, poolOf, type QuotaSubject } from './subject.js';
import { dayOf, HOUR_MS } from '../util/time.js';
import type {
  BanStore,
  BanPolicy,
  Decision,
  LimiterStore,
  LimitRequest,
  LimitSnapshot,
  Outcome,
  Refund,
  WindowCredit,
  WindowSpec,
  WindowState,
} from './types.js';
import { banModeOf, LEDGER_KIND } from './types.js';
import {
  CHECK_FIXED_KEYS,
  CHECK_REPLY,
  CHECK_REPLY_WINDOWS,
  REFUND_FIXED_KEYS,
  SNAPSHOT_FIXED_KEYS,
  SNAPSHOT_REPLY,
  SNAPSHOT_REPLY_WINDOWS,
} from './script-contract.js';

// The Lua source Redis runs is in src/limits/lua/ (each file documents its KEYS, ARGV and reply), copied next to the
// build by `npm run build` and read once when this module loads.
const lua = (name: string): string => readFileSync(new URL(`./lua/${name}`, import.meta.url), 'utf8');
const CHECK_SCRIPT = lua('check.lua');
const SNAPSHOT_SCRIPT = lua('snapshot.lua');
const REFUND_SCRIPT = lua('refund.lua');

/** The check's reply: its fields and per window used and ttl, at the positions of CHECK_CONTRACT.reply. */
type ScriptReply = ReadonlyArray<Outcome | number>;

/**
 * The check is sent as a prebuilt command (storage/script-command.ts) on an ioredis connection. The name below defines
 * it the usual way (defineCommand) only for a client that takes no Command (a test's stand-in): same arguments, in the
 * same order.
 */
const CHECK = new LuaScript(CHECK_SCRIPT);
const CHECK_DEFINED = 'tollgateCheck';
type WithCheck = RedisCommands & Record<typeof CHECK_DEFINED, (...args: Array<string | number>) => Promise<ScriptReply>>;

/**
 * Every script command of the limit store on a client, all defined the first time the client is used (once per
 * connection), never one later: ioredis's auto-pipeline copies a client's scripts when it starts a batch, so a command
 * defined while a batch is pending joins a batch that does not know its script, and that batch's reply then fails
 * inside ioredis ("results[i] is not iterable", an uncaught exception) the first time the script is not cached.
 */
function withCheck(redis: RedisCommands): WithCheck {
  if (!(REFUND in redis)) {
    // defineCommand sends EVALSHA and falls back to EVAL once when the script is not cached (e.g. after a restart).
    // The number of keys varies with the request's windows: each call gives it first.
    if (!takesCommands(redis)) redis.defineCommand(CHECK_DEFINED, { lua: CHECK_SCRIPT });
    redis.defineCommand(REFUND, { lua: REFUND_SCRIPT });
    redis.defineCommand(SNAPSHOT, { lua: SNAPSHOT_SCRIPT });
  }
  return redis as WithCheck;
}

/** Whether the client takes a prebuilt Command (every ioredis client does). */
const takesCommands = (client: RedisCommands): client is RedisCommands & CommandConnection =>
  typeof (client as Partial<CommandConnection>).sendCommand === 'function';

/**
 * A request's windows' limits and lengths (and candidates) as the script's last arguments, encoded once per
 * LimitRequest.scriptArgs: those are built once per plan, route and config (windows.ts), so a reload brings new ones
 * and the old ones' encodings go with them. (A request with a monthly window gets its own, per request.)
 */
const encodedScriptArgs = new WeakMap<readonly number[], EncodedArgs>();
function scriptArgsOf(request: LimitRequest): EncodedArgs {
  let encoded = encodedScriptArgs.get(request.scriptArgs);
  if (encoded === undefined) {
    encoded = encodeArgs(request.scriptArgs);
    if (request.calendar.length === 0) encodedScriptArgs.set(request.scriptArgs, encoded);
  }
  return encoded;
}

export class RedisLimiterStore implements LimiterStore {
  private readonly redis: WithCheck;
  private readonly ladders = new WeakMap<BanPolicy, string>();

  /**
   * `ledgerTtlMs`: how long a day of the usage ledger is kept (read per call: a reload applies); 0 = no ledger.
   * `clientForSlotOf`: the connection serving a key's slot (RedisConnection.clientForSlotOf; on a cluster, its
   * primary's own connection): every key of a check shares the subject's slot, so the check goes straight there.
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

  async check(subject: QuotaSubject, request: LimitRequest, ban: BanPolicy, keyHash = '', keyRevision = '', credit?: WindowCredit): Promise<Decision> {
    const record = this.ks.limitRecord(subject);
    const ladder = this.ladderArg(ban);
    const ledgerMs = this.ledgerTtlMs();
    const ledgerDay = ledgerMs > 0 ? this.dayArg(Date.now() + this.redisAheadMs) : '';
    // Declared even with no ledger (the script then leaves it alone): the script's first keys are always four.
    const usageDay = this.ks.usageDay(subject, ledgerDay === '' ? this.day.arg : ledgerDay);
    const plan = request.plan;
    const creditArg = credit ? `${plan.minute + 1} ${credit.minute} ${credit.minuteMs} ${plan.day + 1} ${credit.day} ${credit.dayMs} ${credit.requests}` : '';
    // A check with none other awaiting Redis is written to the socket now. Batched, it would wait until setImmediate,
    // to leave with whatever else this turn of the event loop sends; at one request at a time there is nothing else,
    // and that wait raised the p99 at one connection by about 0.9 ms (bench/history/2026-11.md, "p99 at one
    // connection: the limit check's write"). Checks that overlap (concurrent requests) still share one write per turn
    // (per node, on a cluster).
    const batched = this.awaiting !== 0;
    const windows = request.windows;
    // In the order of CHECK_CONTRACT's keys and argv (test/limits-contract.test.ts checks the positions by name);
    // request.scriptArgs follow them.
    // Bans in shadow mode keep their own hash and strikes: the enforced ones are neither read nor written then.
    const banMode = banModeOf(ban);
    const shadowBans = banMode === 'shadow';
    const holder = banHolder(subject, ban.scope);
    const args: Array<string | number> = [
      CHECK_FIXED_KEYS + windows.length,
      record,
      shadowBans ? this.ks.shadowBan(holder) : this.ks.ban(holder),
      shadowBans ? this.ks.shadowStrikes(holder) : this.ks.strikes(holder),
      usageDay,
    ];
    // A key of a consumer: the plan's and the route's windows are the consumer's pool, the caps its own.
    const pool = poolOf(subject);
    for (const w of windows) args.push(this.ks.limitWindow(w.cap ? subject : pool, w.suffix));
    args.push(ledgerDay, ladder, keyHash, keyRevision, creditArg, ledgerMs > 0 ? ledgerMs : '', request.cost, request.shadow, banMode, recordField(subject));
    const direct = this.clientForSlotOf(record);
    this.awaiting++;
    let reply: ScriptReply;
    try {
      // At most twice: straight to the slot's primary, then (after a redirection) through the cluster client.
      for (let client = direct; ; client = this.redis) {
        try {
          reply = takesCommands(client)
            ? ((await CHECK.run(client, args, scriptArgsOf(request), batched)) as ScriptReply)
            : await withCheck(client)[CHECK_DEFINED](...args, ...request.scriptArgs);
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
    const outcome = reply[CHECK_REPLY.outcome] as Outcome;
    const same = reply[CHECK_REPLY.recordSame];
    const hour = reply[CHECK_REPLY.ledgerHour];
    const states: WindowState[] = [];
    if (outcome === 'invalid_key' || outcome === 'invalid_record') for (const w of windows) states.push({ used: 0, resetMs: w.lengthMs });
    else for (let i = 0, at = CHECK_REPLY_WINDOWS; i < windows.length; i++, at += 2) states.push({ used: Number(reply[at]), resetMs: Number(reply[at + 1]) });
    const decision: Decision = {
      outcome,
      windows: states,
      short: Number(reply[CHECK_REPLY.short]),
      retryMs: Number(reply[CHECK_REPLY.retryMs]),
      banLevel: Number(reply[CHECK_REPLY.banLevel]),
    };
    if (same !== -1) decision.keyRecord = same === 1 ? 'current' : 'changed';
    const wouldBan = Number(reply[CHECK_REPLY.wouldBan] ?? 0);
    if (wouldBan !== 0) decision.wouldBan = wouldBan;
    if (hour !== -1 && outcome !== 'invalid_key' && outcome !== 'invalid_record') {
      decision.ledgerHour = Number(hour);
      if (Math.floor(decision.ledgerHour / 24) !== Number(ledgerDay)) await this.countInRedisDay(subject, decision, credit, ledgerMs);
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
  private async countInRedisDay(subject: QuotaSubject, d: Decision, credit: WindowCredit | undefined, ledgerMs: number): Promise<void> {
    const client = this.redis;
    const hour = d.ledgerHour!;
    const hourStart = hour * HOUR_MS;
    const now = Date.now();
    this.redisAheadMs = now < hourStart ? hourStart - now : now >= hourStart + HOUR_MS ? hourStart + HOUR_MS - 1 - now : 0;
    const key = this.ks.usageDay(subject, Math.floor(hour / 24));
    const h = hour % 24;
    try {
      await client.hincrby(key, `${LEDGER_KIND[d.outcome]}${h}`, 1);
      if (d.outcome === 'admitted' && d.short !== 0) await client.hincrby(key, `s${h}`, 1);
      if (d.wouldBan !== undefined) await client.hincrby(key, `w${h}`, 1);
      if (credit && credit.requests > 0) await client.hincrby(key, `a${h}`, credit.requests);
      await client.pexpire(key, ledgerMs);
    } catch {
      // Redis failed right after deciding: the decision stands; these counts are lost.
    }
  }

  snapshot(subject: QuotaSubject, windows: readonly WindowSpec[], ban: BanPolicy, keyHash?: string): Promise<LimitSnapshot> {
    return readSnapshot(this.redis, this.ks, subject, windows, ban, keyHash);
  }

  async refund(subject: QuotaSubject, r: Refund): Promise<void> {
    const hour = r.ledgerHour;
    const day = hour === undefined ? 0 : Math.floor(hour / 24);
    const h = hour === undefined ? 0 : hour % 24;
    const client = this.redis as unknown as Record<typeof REFUND, (...args: Array<string | number>) => Promise<number>>;
    const args: Array<string | number> = [REFUND_FIXED_KEYS + r.windows.length, this.ks.usageDay(subject, day)];
    const pool = poolOf(subject);
    for (const w of r.windows) args.push(this.ks.limitWindow(w.cap ? subject : pool, w.suffix));
    args.push(r.cost, hour === undefined ? '' : `a${h}`);
    for (const w of r.windows) args.push(Math.round(w.remainingMs), w.lengthMs);
    await client[REFUND](...args);
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
 * The script's recordField argument: a key of a consumer is validated against its record's copy in the consumer's hash
 * of its keys (Keyspace.limitRecord), a field named by the key id; any other subject's record is a string ('').
 */
function recordField(subject: QuotaSubject): string {
  return subject.pool ? subject.id : '';
}

const SNAPSHOT = 'tollgateSnapshot';
const REFUND = 'tollgateRefund';
/** The snapshot's reply, at the positions of SNAPSHOT_CONTRACT.reply. */
type SnapshotReply = ReadonlyArray<LimitSnapshot['key'] | number>;

/** The snapshot script on a client (defined once per client: EVALSHA, EVAL once after a Redis restart). */
async function readSnapshot(
  redis: RedisCommands,
  ks: Keyspace,
  subject: QuotaSubject,
  windows: readonly WindowSpec[],
  ban: BanPolicy,
  keyHash = '',
): Promise<LimitSnapshot> {
  withCheck(redis);
  const r = redis as RedisCommands & Record<typeof SNAPSHOT, (...args: Array<string | number>) => Promise<SnapshotReply>>;
  const pool = poolOf(subject);
  const keys = windows.map((w) => ks.limitWindow(w.cap ? subject : pool, w.suffix));
  const reply = await r[SNAPSHOT](
    SNAPSHOT_FIXED_KEYS + keys.length,
    ks.limitRecord(subject),
    ks.ban(banHolder(subject, ban.scope)),
    ...keys,
    ban.resetAfterSeconds * 1000,
    keyHash,
    recordField(subject),
  );
  const key = reply[SNAPSHOT_REPLY.keyState] as LimitSnapshot['key'];
  return {
    key,
    now: Number(reply[SNAPSHOT_REPLY.now]),
    windows: windows.map((w, i) => {
      const at = SNAPSHOT_REPLY_WINDOWS + 2 * i;
      const ttl = key === 'ok' ? Number(reply[at + 1]) : -1;
      return { used: key === 'ok' ? Number(reply[at]) : 0, resetMs: ttl < 0 ? w.lengthMs : ttl };
    }),
    banMs: Number(reply[SNAPSHOT_REPLY.banMs]),
    banLevel: Number(reply[SNAPSHOT_REPLY.banLevel]),
  };
}

/** Bans in Redis, for administration: read on Redis's clock, lifted with the strikes toward the next one. */
export class RedisBanStore implements BanStore {
  /** `routeSuffixes`: every route window the config has (read per call: a reload applies), emptied by resetWindows. */
  constructor(
    private readonly redis: RedisCommands,
    private readonly ks: Keyspace,
    private readonly routeSuffixes: () => readonly string[] = () => [],
  ) {
    // The scripts are defined now, before any command of this client can be batched (see withCheck).
    withCheck(redis);
  }

  snapshot(subject: QuotaSubject, windows: readonly WindowSpec[], ban: BanPolicy): Promise<LimitSnapshot> {
    return readSnapshot(this.redis, this.ks, subject, windows, ban);
  }

  async unban(subject: QuotaSubject): Promise<void> {
    // One slot: every key carries the subject's hash tag. The would-be ban (bans in shadow mode) goes with the ban.
    await this.redis.del(this.ks.ban(subject), this.ks.strikes(subject), this.ks.shadowBan(subject), this.ks.shadowStrikes(subject));
  }

  async resetWindows(subject: QuotaSubject, months: readonly string[] = []): Promise<void> {
    // One DEL in one slot (every key carries the subject's hash tag): a check runs wholly before or wholly after it, so
    // no request is counted in one window and not the other.
    const more = [...this.routeSuffixes(), ...months].map((s) => this.ks.limitWindow(subject, s));
    await this.redis.del(this.ks.minuteWindow(subject), this.ks.dayWindow(subject), this.ks.strikes(subject), this.ks.shadowStrikes(subject), ...more);
  }
}
