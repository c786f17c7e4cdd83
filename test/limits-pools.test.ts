// Consumers' pools on a real Redis (a redis-server of its own): the keys of a consumer count their plan windows in one
// pool, exact across two instances; a key's own limits are its caps inside the pool, checked in the same script call;
// monthly windows (calendar and billing day) across a period's end with the gateway's clock injected; own limits that
// end; ban scope; the key's validity read in the consumer's slot; and what a pooled check costs Redis in commands.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { bindingWindow } from '../src/http/headers.js';
import type { KeyLimiter, KeyLimitOutcome } from '../src/limits/key-limits.js';
import { RedisBanStore } from '../src/limits/redis-store.js';
import { banHolder, keySubject } from '../src/limits/subject.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { connectRedis, type RedisConnection } from '../src/storage/redis.js';
import { ManualClock } from '../src/util/clock.js';
import { testConfig } from './helpers/gateway.js';
import { commandCalls } from './helpers/limits.js';
import { callerOf, keyLimiterOn, limitedRequest, storeKey } from './helpers/pools.js';
import { TestRedis } from './helpers/redis-server.js';

let redis: TestRedis;
let admin: Redis;
const connections: RedisConnection[] = [];

beforeAll(async () => {
  redis = await TestRedis.start();
  admin = redis.client();
});
afterAll(async () => {
  for (const c of connections) await c.close();
  admin?.disconnect();
  await redis?.stop();
});

const BAN = { threshold: 3, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 600 };

function config(extra: Record<string, unknown> = {}) {
  return testConfig({
    upstream: { url: 'http://127.0.0.1:9' },
    plans: {
      free: { perMinute: 1000, perDay: 100_000 },
      team: { perMinute: 50, perDay: 100_000 },
      small: { perMinute: 10, perDay: 100_000 },
      monthly: { perMinute: 1000, perDay: 100_000, perMonth: 5 },
    },
    ban: BAN,
    ...extra,
  });
}

/** A connection as an instance's (the gateway's purpose: fail fast), ready. */
async function connection(): Promise<RedisConnection> {
  const c = connectRedis({ url: redis.url, commandTimeoutMs: 5000, purpose: 'gateway' });
  connections.push(c);
  await c.waitForReady(10_000);
  return c;
}

async function limiter(prefix: string, clock = new ManualClock(Date.now()), extra: Record<string, unknown> = {}, ledgerTtlMs = 0): Promise<KeyLimiter> {
  return keyLimiterOn(await connection(), new Keyspace(prefix), config(extra), clock, ledgerTtlMs);
}

const outcome = (o: KeyLimitOutcome): string => (o.kind === 'decided' ? o.decision.outcome : o.kind);

describe('a pool: the keys of a consumer share its plan windows', () => {
  it('is exact across two instances: two keys, 300 concurrent checks, a pool of 50 a minute admits exactly 50', async () => {
    const ks = new Keyspace('pool-exact:');
    const [a, b] = [await limiter('pool-exact:'), await limiter('pool-exact:')];
    const consumer = { id: 'acme', plan: 'team' };
    const k1 = await storeKey(admin, ks, { id: 'k_exact_1', consumer: 'acme' });
    const k2 = await storeKey(admin, ks, { id: 'k_exact_2', consumer: 'acme' });
    const callers = [callerOf(k1, { plan: 'free', consumer }), callerOf(k2, { plan: 'free', consumer })];
    const outcomes = await Promise.all(
      Array.from({ length: 300 }, (_, i) => (i % 2 ? a : b).check(callers[Math.floor(i / 2) % 2]!, limitedRequest(`r${i}`)).then(outcome)),
    );
    const admitted = outcomes.filter((o) => o === 'admitted').length;
    console.log(`pooled exactness, standalone: 300 checks of 2 keys on 2 instances, pool 50 a minute: admitted ${admitted}, refused ${300 - admitted}`);
    expect(admitted).toBe(50);
    expect(outcomes.filter((o) => o !== 'admitted' && o !== 'limited' && o !== 'banned' && o !== 'banned_now')).toEqual([]);
    // Counted once, in the pool; the keys' own windows (a key without a consumer's names) untouched.
    expect(await admin.get('pool-exact:rl:{c:acme}:minute')).toBe('50');
    expect(await admin.exists(ks.minuteWindow(keySubject('k_exact_1')), ks.minuteWindow(keySubject('k_exact_2')))).toBe(0);
  });

  it("a key's own limit is its cap inside the pool: the capped key stops at its cap, the other takes what is left; a refusal takes nothing from any window", async () => {
    const ks = new Keyspace('pool-cap:');
    const l = await limiter('pool-cap:', new ManualClock(Date.now()), { ban: { ...BAN, enabled: false } });
    const consumer = { id: 'capco', plan: 'small' };
    const capped = callerOf(await storeKey(admin, ks, { id: 'k_capped', consumer: 'capco' }), { plan: 'free', perMinute: 3, consumer });
    const free = callerOf(await storeKey(admin, ks, { id: 'k_free', consumer: 'capco' }), { plan: 'free', consumer });
    const seen: string[] = [];
    for (let i = 0; i < 5; i++) seen.push(outcome(await l.check(capped, limitedRequest())));
    expect(seen).toEqual(['admitted', 'admitted', 'admitted', 'limited', 'limited']);
    const refused = await l.check(capped, limitedRequest());
    // The cap (key:minute, window 3 after the plan's minute and day) refused it, not the pool.
    expect(refused).toMatchObject({ kind: 'decided', decision: { outcome: 'limited', short: 0b100 } });
    expect(refused.kind === 'decided' && refused.request.windows.map((w) => w.name)).toEqual(['minute', 'day', 'key:minute']);
    expect(await admin.mget('pool-cap:rl:{c:capco}:minute', 'pool-cap:rl:{c:capco}:key:k_capped:minute')).toEqual(['3', '3']);
    // The uncapped key takes the 7 the pool has left, then the pool refuses both.
    const rest: string[] = [];
    for (let i = 0; i < 8; i++) rest.push(outcome(await l.check(free, limitedRequest())));
    expect(rest).toEqual([...Array(7).fill('admitted'), 'limited']);
    const full = await l.check(free, limitedRequest());
    expect(full).toMatchObject({ kind: 'decided', decision: { outcome: 'limited', short: 0b1 } });
    expect(await admin.get('pool-cap:rl:{c:capco}:minute')).toBe('10');
    expect(await admin.get('pool-cap:rl:{c:capco}:key:k_capped:minute')).toBe('3');
  });

  it('the headers show the window closest to refusing: the cap when it has less left than the pool; GET /ratelimit lists both', async () => {
    const ks = new Keyspace('pool-head:');
    const l = await limiter('pool-head:');
    const consumer = { id: 'headco', plan: 'small' };
    const k = callerOf(await storeKey(admin, ks, { id: 'k_head', consumer: 'headco' }), { plan: 'free', perMinute: 4, perDay: 7, consumer });
    await l.check(k, limitedRequest());
    const o = await l.check(k, limitedRequest());
    if (o.kind !== 'decided') throw new Error(o.kind);
    const shown = o.request.shown.map((i) => ({
      name: o.request.windows[i]!.name,
      remaining: o.request.windows[i]!.limit - o.decision.windows[i]!.used,
      windowSeconds: o.request.windows[i]!.lengthMs / 1000,
    }));
    expect(shown.map((w) => [w.name, w.remaining])).toEqual([
      ['minute', 8],
      ['day', 99_998],
      ['key:minute', 2],
      ['key:day', 5],
    ]);
    expect(bindingWindow(shown).name).toBe('key:minute');
    expect(o.request.policy).toBe('"minute";q=10;w=60, "day";q=100000;w=86400, "key:minute";q=4;w=60, "key:day";q=7;w=86400');
    const q = await l.quota(k, limitedRequest());
    expect(q.kind === 'read' && [q.plan, q.request.windows.map((w) => `${w.name} ${q.snapshot.windows[q.request.windows.indexOf(w)]!.used}`)]).toEqual([
      'small',
      ['minute 2', 'day 2', 'key:minute 2', 'key:day 2'],
    ]);
  });

  it("the key's validity is read in the consumer's slot: a key missing there, or revoked there, is refused; its revision compared there", async () => {
    const ks = new Keyspace('pool-valid:');
    const l = await limiter('pool-valid:');
    const consumer = { id: 'validco', plan: 'team' };
    const k = await storeKey(admin, ks, { id: 'k_valid', consumer: 'validco' });
    expect(outcome(await l.check(callerOf(k, { plan: 'free', consumer }), limitedRequest()))).toBe('admitted');
    // Claimed by another consumer it is not listed under: refused (its record there is what decides).
    expect(outcome(await l.check(callerOf(k, { plan: 'free', consumer: { id: 'otherco', plan: 'team' } }), limitedRequest()))).toBe('invalid_key');
    // Revoked since the caller's copy was read: the consumer's hash holds the new bytes (the key store writes both
    // copies together), so the revision differs and the record is read.
    const revoked = await storeKey(admin, ks, { id: 'k_revoked', consumer: 'validco' });
    await admin.hset(ks.consumerKeys('validco'), 'k_revoked', revoked.bytes.replace('"status":"active"', '"status":"revoked"'));
    expect(outcome(await l.check(callerOf(revoked, { plan: 'free', consumer }), limitedRequest()))).toBe('invalid_key');
    // Not a record at all.
    await admin.hset(ks.consumerKeys('validco'), 'k_broken', 'not json');
    expect(outcome(await l.check({ id: 'k_broken', plan: 'free', keyHash: 'x', keyRevision: 'y', consumer }, limitedRequest()))).toBe('invalid_key');
  });
});

describe('own limits that end', () => {
  it("a consumer's own limits apply to its pool until limitsExpiresAt, then the plan's; a key's caps likewise", async () => {
    const clock = new ManualClock(Date.parse('2026-11-10T12:00:00Z'));
    const ks = new Keyspace('pool-ends:');
    const l = await limiter('pool-ends:', clock, { ban: { ...BAN, enabled: false } });
    const consumer = { id: 'launchco', plan: 'small', perMinute: 20, limitsExpiresAt: '2026-11-10T12:05:00Z', limitsReason: 'launch week' };
    const k = callerOf(await storeKey(admin, ks, { id: 'k_launch', consumer: 'launchco' }), {
      plan: 'free',
      perDay: 15,
      limitsExpiresAt: '2026-11-10T12:03:00Z',
      consumer,
    });
    const policy = async () => {
      const o = await l.check(k, limitedRequest());
      return o.kind === 'decided' ? o.request.policy : o.kind;
    };
    expect(await policy()).toBe('"minute";q=20;w=60, "day";q=100000;w=86400, "key:day";q=15;w=86400');
    clock.set(Date.parse('2026-11-10T12:03:00Z'));
    expect(await policy()).toBe('"minute";q=20;w=60, "day";q=100000;w=86400');
    clock.set(Date.parse('2026-11-10T12:05:00Z'));
    expect(await policy()).toBe('"minute";q=10;w=60, "day";q=100000;w=86400');
  });

  it("a key without a consumer: its own limits override its plan's until limitsExpiresAt", async () => {
    const clock = new ManualClock(Date.parse('2026-11-10T12:00:00Z'));
    const ks = new Keyspace('pool-ends-key:');
    const l = await limiter('pool-ends-key:', clock);
    const k = callerOf(await storeKey(admin, ks, { id: 'k_alone' }), { plan: 'small', perMinute: 2, limitsExpiresAt: '2026-11-10T13:00:00Z' });
    expect((await l.check(k, limitedRequest())).kind === 'decided').toBe(true);
    const o = await l.check(k, limitedRequest());
    expect(o.kind === 'decided' && o.request.policy).toBe('"minute";q=2;w=60, "day";q=100000;w=86400');
    clock.set(Date.parse('2026-11-10T13:00:00Z'));
    const after = await l.check(k, limitedRequest());
    expect(after.kind === 'decided' && after.request.policy).toBe('"minute";q=10;w=60, "day";q=100000;w=86400');
  });
});

describe('monthly windows', () => {
  it("the calendar month in UTC: full at the month's end, a new counter (named by its period) on the 1st; its expiry the time to the period end by the gateway's clock", async () => {
    const clock = new ManualClock(Date.parse('2026-11-30T23:59:00Z'));
    const ks = new Keyspace('month-cal:');
    const l = await limiter('month-cal:', clock, { ban: { ...BAN, enabled: false } });
    const k = callerOf(await storeKey(admin, ks, { id: 'k_month' }), { plan: 'monthly' });
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) seen.push(outcome(await l.check(k, limitedRequest())));
    expect(seen).toEqual(['admitted', 'admitted', 'admitted', 'admitted', 'admitted', 'limited']);
    const refused = await l.check(k, limitedRequest());
    expect(refused).toMatchObject({ kind: 'decided', decision: { outcome: 'limited', short: 0b100 } });
    // Retry-After is the time to the period's end, as the gateway's clock has it (60 s), not a month.
    expect(refused.kind === 'decided' && refused.decision.retryMs).toBeLessThanOrEqual(60_000);
    expect(refused.kind === 'decided' && refused.decision.retryMs).toBeGreaterThan(50_000);
    const november = ks.limitWindow(keySubject('k_month'), 'month:2026-11-01');
    expect(await admin.get(november)).toBe('5');
    expect(await admin.pttl(november)).toBeGreaterThan(50_000);
    expect(await admin.pttl(november)).toBeLessThanOrEqual(60_000);
    clock.set(Date.parse('2026-12-01T00:00:01Z'));
    const december = await l.check(k, limitedRequest());
    expect(december).toMatchObject({ kind: 'decided', decision: { outcome: 'admitted' } });
    expect(december.kind === 'decided' && december.request.windows[2]).toMatchObject({ name: 'month', suffix: 'month:2026-12-01' });
    expect(await admin.get(ks.limitWindow(keySubject('k_month'), 'month:2026-12-01'))).toBe('1');
    // 31 days less a second, to the millisecond the gateway's clock says.
    const ttl = await admin.pttl(ks.limitWindow(keySubject('k_month'), 'month:2026-12-01'));
    expect(ttl).toBeLessThanOrEqual(31 * 86_400_000 - 1000);
    expect(ttl).toBeGreaterThan(31 * 86_400_000 - 1000 - 10_000);
  });

  it("from the consumer's billingDay 31 in a 30-day month: the period that began 31 October ends 30 November; the pool's and a key's monthly cap share it", async () => {
    const clock = new ManualClock(Date.parse('2026-11-29T23:59:30Z'));
    const ks = new Keyspace('month-bill:');
    const l = await limiter('month-bill:', clock, { ban: { ...BAN, enabled: false } });
    const consumer = { id: 'billco', plan: 'monthly', billingDay: 31 };
    const a = callerOf(await storeKey(admin, ks, { id: 'k_bill_a', consumer: 'billco' }), { plan: 'free', perMonth: 2, consumer });
    const b = callerOf(await storeKey(admin, ks, { id: 'k_bill_b', consumer: 'billco' }), { plan: 'free', consumer });
    expect([await l.check(a, limitedRequest()), await l.check(a, limitedRequest()), await l.check(a, limitedRequest())].map(outcome)).toEqual([
      'admitted',
      'admitted',
      'limited',
    ]);
    expect(
      [await l.check(b, limitedRequest()), await l.check(b, limitedRequest()), await l.check(b, limitedRequest()), await l.check(b, limitedRequest())].map(
        outcome,
      ),
    ).toEqual(['admitted', 'admitted', 'admitted', 'limited']);
    expect(await admin.mget('month-bill:rl:{c:billco}:month:2026-10-31', 'month-bill:rl:{c:billco}:key:k_bill_a:month:2026-10-31')).toEqual(['5', '2']);
    // 30 November, 00:00 UTC: the next period (to 31 December), new counters for the pool and the cap.
    clock.set(Date.parse('2026-11-30T00:00:00Z'));
    const next = await l.check(a, limitedRequest());
    expect(next).toMatchObject({ kind: 'decided', decision: { outcome: 'admitted' } });
    expect(next.kind === 'decided' && next.request.windows.filter((w) => w.endsAt !== undefined).map((w) => `${w.name} ${w.suffix}`)).toEqual([
      'month month:2026-11-30',
      'key:month month:2026-11-30',
    ]);
    expect(await admin.pttl('month-bill:rl:{c:billco}:month:2026-11-30')).toBeGreaterThan(31 * 86_400_000 - 10_000);
    const quota = await l.quota(b, limitedRequest());
    expect(quota.kind === 'read' && quota.request.windows.map((w, i) => `${w.name} ${quota.snapshot.windows[i]!.used}/${w.limit}`)).toEqual([
      'minute 6/1000',
      'day 6/100000',
      'month 1/5',
    ]);
  });
});

describe('ban.scope', () => {
  async function hammer(l: KeyLimiter, k: Parameters<KeyLimiter['check']>[0], n: number): Promise<string[]> {
    const out: string[] = [];
    for (let i = 0; i < n; i++) out.push(outcome(await l.check(k, limitedRequest())));
    return out;
  }

  it("key (the default): a key of a consumer has its own ladder, in the consumer's slot; the consumer's other keys go on", async () => {
    const ks = new Keyspace('ban-key:');
    const l = await limiter('ban-key:');
    const consumer = { id: 'bankco', plan: 'small' };
    const a = callerOf(await storeKey(admin, ks, { id: 'k_ban_a', consumer: 'bankco' }), { plan: 'free', perMinute: 1, consumer });
    const b = callerOf(await storeKey(admin, ks, { id: 'k_ban_b', consumer: 'bankco' }), { plan: 'free', consumer });
    expect(await hammer(l, a, 5)).toEqual(['admitted', 'limited', 'limited', 'banned_now', 'banned']);
    expect(await admin.hget('ban-key:ban:{c:bankco}:key:k_ban_a', 'level')).toBe('1');
    expect(await admin.exists('ban-key:ban:{c:bankco}', 'ban-key:ban:{k_ban_a}')).toBe(0);
    expect(outcome(await l.check(b, limitedRequest()))).toBe('admitted');
  });

  it('consumer: every key of the consumer meets one ladder; a new key of it is banned too (no fresh ladder by rotating)', async () => {
    const ks = new Keyspace('ban-cons:');
    const l = await limiter('ban-cons:', new ManualClock(Date.now()), { ban: { ...BAN, scope: 'consumer' } });
    const consumer = { id: 'bancco', plan: 'small' };
    const a = callerOf(await storeKey(admin, ks, { id: 'k_banc_a', consumer: 'bancco' }), { plan: 'free', perMinute: 1, consumer });
    const b = callerOf(await storeKey(admin, ks, { id: 'k_banc_b', consumer: 'bancco' }), { plan: 'free', consumer });
    expect(await hammer(l, a, 4)).toEqual(['admitted', 'limited', 'limited', 'banned_now']);
    expect(await admin.hget('ban-cons:ban:{c:bancco}', 'level')).toBe('1');
    expect(outcome(await l.check(b, limitedRequest()))).toBe('banned');
    const fresh = callerOf(await storeKey(admin, ks, { id: 'k_banc_new', consumer: 'bancco' }), { plan: 'free', consumer });
    expect(outcome(await l.check(fresh, limitedRequest()))).toBe('banned');
    // `keys unban` of any key of it lifts the consumer's ban (KeyLimitAdmin names the consumer's ban), and every instance
    // forgets the shared ban it remembered for the consumer's keys, whichever key's change it hears of.
    await new RedisBanStore(admin, ks).unban(banHolder(keySubject('k_banc_a', 'bancco'), 'consumer'));
    expect(outcome(await l.check(b, limitedRequest()))).toBe('banned');
    l.forget('k_banc_a');
    expect(outcome(await l.check(b, limitedRequest()))).toBe('admitted');
  });
});

describe('what a pooled check costs Redis (INFO commandstats)', () => {
  /** Commands Redis ran (inside the script too) for `n` admitted checks of `caller`, after one that opened its windows. */
  async function commandsPerCheck(l: KeyLimiter, caller: Parameters<KeyLimiter['check']>[0], n: number): Promise<Map<string, number>> {
    expect(outcome(await l.check(caller, limitedRequest()))).toBe('admitted');
    const before = await commandCalls(admin);
    for (let i = 0; i < n; i++) expect(outcome(await l.check(caller, limitedRequest()))).toBe('admitted');
    const after = await commandCalls(admin);
    const out = new Map<string, number>();
    for (const [cmd, calls] of after) {
      const d = calls - (before.get(cmd) ?? 0);
      // The INFO of the reading itself is not the check's.
      if (d > 0 && cmd !== 'info') out.set(cmd, d / n);
    }
    return out;
  }
  const total = (m: Map<string, number>): number => [...m.values()].reduce((s, v) => s + v, 0);

  it('a key of a consumer without caps: one script call (EVALSHA) and the same commands inside it as a key without a consumer (HGET for GET); the ledger on', async () => {
    const ks = new Keyspace('cost:');
    const l = await limiter('cost:', new ManualClock(Date.now()), {}, 86_400_000);
    const plain = callerOf(await storeKey(admin, ks, { id: 'k_cost_plain' }), { plan: 'team' });
    const pooled = callerOf(await storeKey(admin, ks, { id: 'k_cost_pooled', consumer: 'costco' }), { plan: 'free', consumer: { id: 'costco', plan: 'team' } });
    const capped = callerOf(await storeKey(admin, ks, { id: 'k_cost_capped', consumer: 'costco2' }), {
      plan: 'free',
      perMinute: 40,
      consumer: { id: 'costco2', plan: 'team' },
    });
    const a = await commandsPerCheck(l, plain, 20);
    const b = await commandsPerCheck(l, pooled, 20);
    const c = await commandsPerCheck(l, capped, 20);
    console.log(
      `commands per admitted check (ledger on): key without a consumer ${total(a)} ${JSON.stringify(Object.fromEntries(a))}; key of a consumer ${total(b)} ${JSON.stringify(Object.fromEntries(b))}; with a per-minute cap ${total(c)} ${JSON.stringify(Object.fromEntries(c))}`,
    );
    expect(a.get('evalsha')).toBe(1);
    expect(b.get('evalsha')).toBe(1);
    expect(Object.fromEntries(a)).toEqual({ evalsha: 1, time: 1, get: 1, hmget: 1, incr: 2, pttl: 2, hincrby: 1 });
    expect(Object.fromEntries(b)).toEqual({ evalsha: 1, time: 1, hget: 1, hmget: 1, incr: 2, pttl: 2, hincrby: 1 });
    expect(total(b) - total(a)).toBeLessThanOrEqual(2);
    // A cap is a window: an INCR and a PTTL more.
    expect(Object.fromEntries(c)).toEqual({ evalsha: 1, time: 1, hget: 1, hmget: 1, incr: 3, pttl: 3, hincrby: 1 });
  });
});
