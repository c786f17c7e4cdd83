// The limiter store (docs: "The request path", "Reliability"): ONE behaviour suite run over both MemoryLimiterStore (time moved
// by a ManualClock) and RedisLimiterStore (a private redis-server; time "moved" by shifting every TTL and ban
// timestamp of the id back, which is what the passing of time does to that state), plus Redis-only checks:
// real-time ban expiry on Redis TIME, atomicity under concurrency, and the Cluster hash tag of every key touched.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { ManualClock } from '../src/util/clock.js';
import { MemoryLimiterStore } from '../src/limits/memory-store.js';
import { recordRevision } from '../src/keys/redis-store.js';
import { RedisLimiterStore } from '../src/limits/redis-store.js';
import { type BanPolicy, type Decision, type KeyLimits, type LimiterStore } from '../src/limits/types.js';
import { DAY_MS, MINUTE_MS } from '../src/util/time.js';
import { candidatesFor, limitRequest, planRequest, planWindows, routeWindows } from '../src/limits/windows.js';
import { readFileSync } from 'node:fs';
import { Keyspace } from '../src/storage/keyspace.js';
import { connectRedis, type RedisConnection } from '../src/storage/redis.js';
import { TestRedis } from './helpers/redis-server.js';
import { clientAddresses, monitorRedis } from './helpers/limits.js';
import { keySubject } from '../src/limits/subject.js';

const PREFIX = 'lt:';
const SECOND = 1000;

/** No bans in the window tests: a threshold that is never reached. */
const NO_BANS: BanPolicy = { threshold: 1_000_000, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 86_400 };
const LADDER: BanPolicy = { threshold: 3, windowSeconds: 3600, durationsSeconds: [60, 600, 3600], resetAfterSeconds: 7200 };
/** The same ladder in shadow mode, and turned off. */
const SHADOW_LADDER: BanPolicy = { ...LADDER, mode: 'shadow' };
const NO_LADDER: BanPolicy = { ...LADDER, enabled: false };

interface Harness {
  name: string;
  store: () => LimiterStore;
  /** Moves time forward by ms as far as `id`'s limiter state is concerned. */
  advance(id: string, ms: number): Promise<void>;
  /** How far a reported duration may fall short of the exact figure (Redis time runs on while the test does). */
  slackMs: number;
}

let redis: TestRedis;
let connection: RedisConnection;
let client: Redis;
let admin: Redis;
const clock = new ManualClock();
const memory = new MemoryLimiterStore(clock);
let redisStore: RedisLimiterStore;
const keyspace = new Keyspace(PREFIX);

beforeAll(async () => {
  redis = await TestRedis.start();
  connection = connectRedis({ url: redis.url, commandTimeoutMs: 2000, purpose: 'cli' });
  client = connection.client as Redis;
  admin = redis.client();
  redisStore = new RedisLimiterStore(client, keyspace);
});

afterAll(async () => {
  client?.disconnect();
  admin?.disconnect();
  await redis?.stop();
});

/** Every Redis key of one id (SCAN, not KEYS). */
function keysOf(id: string): Promise<string[]> {
  return scanKeys(`${PREFIX}*{${id}}*`);
}

async function scanKeys(pattern: string): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  for (let i = 0; i < 1000; i++) {
    const [next, batch] = await admin.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    out.push(...batch);
    cursor = next;
    if (cursor === '0') return out;
  }
  throw new Error('SCAN did not finish');
}

/**
 * Redis "time travel" for one id: every TTL shrinks by ms (keys whose TTL runs out are deleted, as expiry would),
 * and the ban hash's absolute instants (until, lastEnd) move ms into the past. The script reads nothing else
 * time-dependent, so the next check sees exactly what it would see ms later.
 */
async function shiftRedis(id: string, ms: number): Promise<void> {
  for (const key of await keysOf(id)) {
    if ((await admin.type(key)) === 'hash') {
      const [until, lastEnd] = await admin.hmget(key, 'until', 'lastEnd');
      if (until !== null) await admin.hset(key, 'until', Number(until) - ms);
      if (lastEnd !== null) await admin.hset(key, 'lastEnd', Number(lastEnd) - ms);
    }
    const ttl = await admin.pttl(key);
    if (ttl < 0) continue;
    if (ttl - ms <= 0) await admin.del(key);
    else await admin.pexpire(key, ttl - ms);
  }
}

const harnesses: Harness[] = [
  { name: 'MemoryLimiterStore (ManualClock)', store: () => memory, advance: async (_id, ms) => clock.advance(ms), slackMs: 0 },
  { name: 'RedisLimiterStore (TestRedis)', store: () => redisStore, advance: shiftRedis, slackMs: 1500 },
];

/** The plan's two windows, for snapshots (only their Redis names and lengths matter there). */
const PLAN = planWindows({ perMinute: 1, perDay: 1 });

/** A refund of what `d` charged a plan-only request of `cost`, `late` ms after the check. */
function refundOf(d: Decision, late = 0, cost = 1) {
  return { windows: PLAN.map((w, i) => ({ suffix: w.suffix, remainingMs: d.windows[i]!.resetMs - late, lengthMs: w.lengthMs })), cost };
}

let seq = 0;
const newId = (label: string) => `${label}-${process.pid}-${++seq}`;

describe.each(harnesses)('$name', (h) => {
  const check = (id: string, limits: KeyLimits, ban: BanPolicy = NO_BANS): Promise<Decision> => h.store().check(keySubject(id), planRequest(limits), ban);
  /** actual is the exact figure, or (Redis) at most slackMs less. */
  const expectAbout = (actual: number, exact: number) => {
    expect(actual).toBeLessThanOrEqual(exact);
    // A bound: Redis's clock has moved on by the time it answers.
    expect(actual).toBeGreaterThanOrEqual(exact - h.slackMs);
  };

  it('admits exactly perMinute requests, then refuses (the minute window short: bit 0) until the window resets', async () => {
    const id = newId('minute');
    const limits = { perMinute: 5, perDay: 1000 };
    for (let i = 1; i <= 5; i++) {
      const d = await check(id, limits);
      expect(d.outcome).toBe('admitted');
      expect(d.windows[0]!.used).toBe(i);
      expect(d.windows[1]!.used).toBe(i);
      expect(d.retryMs).toBe(0);
      expect(d.banLevel).toBe(0);
      expectAbout(d.windows[0]!.resetMs, MINUTE_MS);
      expectAbout(d.windows[1]!.resetMs, DAY_MS);
    }
    for (let i = 0; i < 3; i++) {
      const d = await check(id, limits);
      expect(d.outcome).toBe('limited');
      expect(d.short).toBe(1);
      expect(d.windows[0]!.used).toBe(5);
      expect(d.retryMs).toBe(d.windows[0]!.resetMs);
      expectAbout(d.retryMs, MINUTE_MS);
    }
    await h.advance(id, MINUTE_MS - 10 * SECOND);
    const late = await check(id, limits);
    expect(late.outcome).toBe('limited');
    expectAbout(late.retryMs, 10 * SECOND);
    await h.advance(id, 10 * SECOND);
    const fresh = await check(id, limits);
    expect(fresh.outcome).toBe('admitted');
    expect(fresh.windows[0]!.used).toBe(1);
    expect(fresh.windows[1]!.used).toBe(6);
  });

  it('starts a window with its first request (fixed windows, not clock-aligned)', async () => {
    const id = newId('start');
    const limits = { perMinute: 2, perDay: 1000 };
    expect((await check(id, limits)).outcome).toBe('admitted');
    await h.advance(id, 40 * SECOND);
    const second = await check(id, limits);
    expect(second.outcome).toBe('admitted');
    expectAbout(second.windows[0]!.resetMs, 20 * SECOND);
    const refused = await check(id, limits);
    expect(refused.outcome).toBe('limited');
    expectAbout(refused.retryMs, 20 * SECOND);
    // The next window starts with the next admitted request, a full minute from then.
    await h.advance(id, 25 * SECOND);
    const next = await check(id, limits);
    expect(next.outcome).toBe('admitted');
    expectAbout(next.windows[0]!.resetMs, MINUTE_MS);
    expectAbout(next.windows[1]!.resetMs, DAY_MS - 65 * SECOND);
  });

  it('binds on the day window when perDay < perMinute (the day window short: bit 1), across minute windows, until the day resets', async () => {
    const id = newId('day');
    const limits = { perMinute: 10, perDay: 3 };
    for (let i = 1; i <= 3; i++) expect((await check(id, limits)).outcome).toBe('admitted');
    const refused = await check(id, limits);
    expect(refused.outcome).toBe('limited');
    expect(refused.short).toBe(2);
    expect(refused.windows[1]!.used).toBe(3);
    expect(refused.windows[0]!.used).toBe(3);
    expect(refused.retryMs).toBe(refused.windows[1]!.resetMs);
    expectAbout(refused.retryMs, DAY_MS);
    // A new minute window does not help: the day is spent.
    await h.advance(id, 61 * SECOND);
    const later = await check(id, limits);
    expect(later.outcome).toBe('limited');
    expect(later.windows[0]!.used).toBe(0);
    expectAbout(later.retryMs, DAY_MS - 61 * SECOND);
    // A refusal opens no window: 30 s later the minute is still a whole one away, with nothing used.
    expectAbout(later.windows[0]!.resetMs, MINUTE_MS);
    await h.advance(id, 30 * SECOND);
    const again = await check(id, limits);
    expect(again.outcome).toBe('limited');
    expect(again.windows[0]!.used).toBe(0);
    expectAbout(again.windows[0]!.resetMs, MINUTE_MS);
    await h.advance(id, DAY_MS - 91 * SECOND);
    const nextDay = await check(id, limits);
    expect(nextDay.outcome).toBe('admitted');
    expect(nextDay.windows[1]!.used).toBe(1);
  });

  it('counts only admitted requests: minute refusals never increase day.used, day refusals never increase minute.used', async () => {
    const id = newId('refused');
    const limits = { perMinute: 2, perDay: 4 };
    expect((await check(id, limits)).windows[1]!.used).toBe(1);
    expect((await check(id, limits)).windows[1]!.used).toBe(2);
    for (let i = 0; i < 10; i++) {
      const d = await check(id, limits);
      expect(d.outcome).toBe('limited');
      expect(d.windows[1]!.used).toBe(2);
      expect(d.windows[0]!.used).toBe(2);
    }
    await h.advance(id, MINUTE_MS);
    const d3 = await check(id, limits);
    expect(d3.outcome).toBe('admitted');
    expect(d3.windows[1]!.used).toBe(3);
    expect(d3.windows[0]!.used).toBe(1);
    expect((await check(id, limits)).windows[1]!.used).toBe(4);
    await h.advance(id, MINUTE_MS);
    for (let i = 0; i < 5; i++) {
      const d = await check(id, limits);
      expect(d.outcome).toBe('limited');
      expect(d.windows[0]!.used).toBe(0);
      expect(d.windows[1]!.used).toBe(4);
    }
  });

  it('both windows short reports the later reset: the day when it ends last', async () => {
    const id = newId('both-day');
    const limits = { perMinute: 3, perDay: 6 };
    for (let i = 0; i < 3; i++) expect((await check(id, limits)).outcome).toBe('admitted');
    await h.advance(id, MINUTE_MS);
    for (let i = 0; i < 3; i++) expect((await check(id, limits)).outcome).toBe('admitted');
    const d = await check(id, limits);
    expect(d).toMatchObject({ outcome: 'limited', short: 3 });
    expectAbout(d.retryMs, DAY_MS - MINUTE_MS);
    expect(d.retryMs).toBe(Math.max(d.windows[0]!.resetMs, d.windows[1]!.resetMs));
    expect(d.retryMs).toBe(d.windows[1]!.resetMs);
  });

  it('both windows short reports the later reset: the minute when the day window is about to end', async () => {
    const id = newId('both-minute');
    const limits = { perMinute: 3, perDay: 6 };
    for (let i = 0; i < 3; i++) expect((await check(id, limits)).outcome).toBe('admitted');
    await h.advance(id, DAY_MS - 30 * SECOND);
    for (let i = 0; i < 3; i++) expect((await check(id, limits)).outcome).toBe('admitted');
    const d = await check(id, limits);
    expect(d).toMatchObject({ outcome: 'limited', short: 3 });
    expectAbout(d.windows[1]!.resetMs, 30 * SECOND);
    expectAbout(d.retryMs, MINUTE_MS);
    expect(d.retryMs).toBe(d.windows[0]!.resetMs);
  });

  it('reads limits per call: a lowered limit applies at once to the current window', async () => {
    const id = newId('relimit');
    for (let i = 0; i < 3; i++) expect((await check(id, { perMinute: 10, perDay: 100 })).outcome).toBe('admitted');
    expect((await check(id, { perMinute: 3, perDay: 100 })).outcome).toBe('limited');
    expect((await check(id, { perMinute: 4, perDay: 100 })).outcome).toBe('admitted');
  });

  it('keeps ids apart', async () => {
    const a = newId('iso-a');
    const b = newId('iso-b');
    expect((await check(a, { perMinute: 1, perDay: 10 })).outcome).toBe('admitted');
    expect((await check(a, { perMinute: 1, perDay: 10 })).outcome).toBe('limited');
    const other = await check(b, { perMinute: 1, perDay: 10 });
    expect(other.outcome).toBe('admitted');
    expect(other.windows[0]!.used).toBe(1);
  });

  it('bans on the refusal that reaches the threshold (banned_now, retryMs = durations[0]); during the ban answers are "banned" and count nowhere', async () => {
    const id = newId('ban');
    const limits = { perMinute: 1, perDay: 1000 };
    expect((await check(id, limits, LADDER)).outcome).toBe('admitted');
    for (let i = 0; i < 2; i++) {
      const d = await check(id, limits, LADDER);
      expect(d.outcome).toBe('limited');
      expect(d.banLevel).toBe(0);
    }
    const banned = await check(id, limits, LADDER);
    expect(banned.outcome).toBe('banned_now');
    expect(banned.retryMs).toBe(60 * SECOND);
    expect(banned.banLevel).toBe(1);

    // While banned: not counted toward strikes, nor in either window.
    for (let i = 0; i < 8; i++) {
      const d = await check(id, limits, LADDER);
      expect(d.outcome).toBe('banned');
      expect(d.banLevel).toBe(1);
      expectAbout(d.retryMs, 60 * SECOND);
      expect(d.windows[0]!.used).toBe(1);
      expect(d.windows[1]!.used).toBe(1);
    }
    await h.advance(id, 30 * SECOND);
    const half = await check(id, limits, LADDER);
    expect(half.outcome).toBe('banned');
    expectAbout(half.retryMs, 30 * SECOND);

    // Ban over (and the minute window with it). The strike count started again at zero and the 8+1 answers given
    // during the ban did not count: it takes threshold fresh refusals to ban again.
    await h.advance(id, 30 * SECOND);
    const after = await check(id, limits, LADDER);
    expect(after.outcome).toBe('admitted');
    expect(after.windows[1]!.used).toBe(2);
    expect(after.banLevel).toBe(1);
    expect((await check(id, limits, LADDER)).outcome).toBe('limited');
    expect((await check(id, limits, LADDER)).outcome).toBe('limited');
    const second = await check(id, limits, LADDER);
    expect(second.outcome).toBe('banned_now');
    expect(second.banLevel).toBe(2);
    expect(second.retryMs).toBe(600 * SECOND);
  });

  it('bans in shadow mode: the ladder is computed (wouldBan: the length of the ban it would start, then -1 while it would be in force) and nothing is refused for it', async () => {
    const id = newId('shadow-ban');
    const limits = { perMinute: 1, perDay: 1000 };
    expect((await check(id, limits, SHADOW_LADDER)).outcome).toBe('admitted');
    for (let i = 0; i < 2; i++) {
      const d = await check(id, limits, SHADOW_LADDER);
      expect(d).toMatchObject({ outcome: 'limited', banLevel: 0 });
      expect(d.wouldBan).toBeUndefined();
    }
    // The threshold's refusal: what the limits say (limited, the minute window's retry), and the ban it would start.
    const third = await check(id, limits, SHADOW_LADDER);
    expect(third).toMatchObject({ outcome: 'limited', banLevel: 1, wouldBan: 60 * SECOND, short: 1 });
    expect(third.retryMs).toBeLessThanOrEqual(MINUTE_MS);
    // During the would-be ban: still only the windows decide; every answer says a ban would have refused it.
    const during = await check(id, limits, SHADOW_LADDER);
    expect(during).toMatchObject({ outcome: 'limited', banLevel: 1, wouldBan: -1 });
    await h.advance(id, 61 * SECOND);
    // Window and would-be ban over: admitted, nothing would refuse it.
    const after = await check(id, limits, SHADOW_LADDER);
    expect(after.outcome).toBe('admitted');
    expect(after.wouldBan).toBeUndefined();
    // The next would-be ban escalates, as an enforced one would.
    for (let i = 0; i < 2; i++) expect((await check(id, limits, SHADOW_LADDER)).wouldBan).toBeUndefined();
    expect(await check(id, limits, SHADOW_LADDER)).toMatchObject({ outcome: 'limited', banLevel: 2, wouldBan: 600 * SECOND });
  });

  it('switching modes: a ban in force is not enforced in shadow mode nor with bans off, and is again back in enforce mode; a would-be ban is never enforced', async () => {
    const id = newId('switch-ban');
    const limits = { perMinute: 1, perDay: 1000 };
    await check(id, limits, LADDER);
    for (let i = 0; i < 3; i++) await check(id, limits, LADDER);
    expect((await check(id, limits, LADDER)).outcome).toBe('banned');
    // Shadow: the enforced ban is neither enforced nor reported (the would-be ladder is its own, empty so far).
    const shadow = await check(id, limits, SHADOW_LADDER);
    expect(shadow).toMatchObject({ outcome: 'limited', banLevel: 0 });
    expect(shadow.wouldBan).toBeUndefined();
    expect((await check(id, limits, NO_LADDER)).outcome).toBe('limited');
    expect((await check(id, limits, LADDER)).outcome).toBe('banned');
    // A would-be ban started in shadow mode is not enforced after switching back.
    const other = newId('switch-would');
    await check(other, limits, SHADOW_LADDER);
    for (let i = 0; i < 3; i++) await check(other, limits, SHADOW_LADDER);
    expect((await check(other, limits, SHADOW_LADDER)).wouldBan).toBe(-1);
    const back = await check(other, limits, LADDER);
    expect(back).toMatchObject({ outcome: 'limited', banLevel: 0 });
  });

  it('bans off: refusals never strike nor ban, whatever their number', async () => {
    const id = newId('no-ban');
    const limits = { perMinute: 1, perDay: 1000 };
    expect((await check(id, limits, NO_LADDER)).outcome).toBe('admitted');
    for (let i = 0; i < 10; i++) {
      const d = await check(id, limits, NO_LADDER);
      expect(d).toMatchObject({ outcome: 'limited', banLevel: 0 });
      expect(d.wouldBan).toBeUndefined();
    }
    // Nothing struck meanwhile: enforce mode starts its ladder from zero.
    expect((await check(id, limits, LADDER)).outcome).toBe('limited');
    expect((await check(id, limits, LADDER)).outcome).toBe('limited');
    expect((await check(id, limits, LADDER)).outcome).toBe('banned_now');
  });

  it('escalates: ban N uses durations[N-1], every later ban the last entry', async () => {
    const id = newId('ladder');
    const limits = { perMinute: 1, perDay: 1_000_000 };
    const expected = [60, 600, 3600, 3600, 3600];
    for (let n = 1; n <= expected.length; n++) {
      expect((await check(id, limits, LADDER)).outcome).toBe('admitted');
      expect((await check(id, limits, LADDER)).outcome).toBe('limited');
      expect((await check(id, limits, LADDER)).outcome).toBe('limited');
      const d = await check(id, limits, LADDER);
      expect(d.outcome).toBe('banned_now');
      expect(d.banLevel).toBe(n);
      expect(d.retryMs).toBe(expected[n - 1]! * SECOND);
      expect((await check(id, limits, LADDER)).outcome).toBe('banned');
      await h.advance(id, d.retryMs);
    }
  });

  it('counts strikes within windowSeconds only', async () => {
    const id = newId('strike-window');
    const ban: BanPolicy = { threshold: 3, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 3600 };
    const limits = { perMinute: 1, perDay: 1000 };
    expect((await check(id, limits, ban)).outcome).toBe('admitted');
    expect((await check(id, limits, ban)).outcome).toBe('limited');
    expect((await check(id, limits, ban)).outcome).toBe('limited');
    await h.advance(id, 61 * SECOND);
    expect((await check(id, limits, ban)).outcome).toBe('admitted');
    // The two old strikes have lapsed: two more refusals are not yet a ban, the third one is.
    expect((await check(id, limits, ban)).outcome).toBe('limited');
    expect((await check(id, limits, ban)).outcome).toBe('limited');
    expect((await check(id, limits, ban)).outcome).toBe('banned_now');
  });

  it('forgets the escalation level resetAfterSeconds after the last ban ended, and not before', async () => {
    const id = newId('reset');
    const limits = { perMinute: 1, perDay: 1_000_000 };
    const banOnce = async () => {
      for (let i = 0; i < 50; i++) {
        const d = await check(id, limits, LADDER);
        if (d.outcome === 'banned_now') return d;
        expect(['admitted', 'limited']).toContain(d.outcome);
      }
      throw new Error('no ban within 50 requests');
    };
    const first = await banOnce();
    expect(first.banLevel).toBe(1);
    // Ban 1 ends after 60 s; one second short of resetAfter later, the level still holds.
    await h.advance(id, 60 * SECOND + LADDER.resetAfterSeconds * SECOND - SECOND);
    const second = await banOnce();
    expect(second.banLevel).toBe(2);
    expect(second.retryMs).toBe(600 * SECOND);
    // Ban 2 ends after 600 s; resetAfter after that, the ladder starts again at the first rung.
    await h.advance(id, 600 * SECOND + LADDER.resetAfterSeconds * SECOND);
    const third = await banOnce();
    expect(third.banLevel).toBe(1);
    expect(third.retryMs).toBe(60 * SECOND);
  });

  it('refund: gives an admitted request back to the windows it was counted in, never below zero, never to a window opened since, and leaves bans alone', async () => {
    const id = newId('refund');
    const limits = { perMinute: 3, perDay: 1000 };
    const snap = () => h.store().snapshot(keySubject(id), PLAN, LADDER);
    const first = await check(id, limits);
    await check(id, limits);
    await h.store().refund(keySubject(id), refundOf(first));
    expect((await snap()).windows[0]!.used).toBe(1);
    expect((await snap()).windows[1]!.used).toBe(1);
    // More refunds than requests: the windows stop at zero.
    for (let i = 0; i < 3; i++) await h.store().refund(keySubject(id), refundOf(first));
    expect((await snap()).windows[0]!.used).toBe(0);
    expect((await snap()).windows[1]!.used).toBe(0);

    // Counted in one minute window, refunded after that window reset and a new one opened: the new one keeps its
    // count; the day window (the same one still) gets the request back.
    const a = await check(id, limits);
    await h.advance(id, MINUTE_MS + SECOND);
    const b = await check(id, limits);
    expect(b.windows[0]!.used).toBe(1);
    expect(b.windows[1]!.used).toBe(2);
    const late = MINUTE_MS + SECOND;
    await h.store().refund(keySubject(id), refundOf(a, late));
    expect((await snap()).windows[0]!.used).toBe(1);
    expect((await snap()).windows[1]!.used).toBe(1);
    // A window that lapsed is not brought back by a refund (no count below zero, no window without an end).
    await h.advance(id, MINUTE_MS + SECOND);
    await h.store().refund(keySubject(id), refundOf(b, late));
    const lapsed = await snap();
    expect(lapsed.windows[0]!.used).toBe(0);
    expectAbout(lapsed.windows[0]!.resetMs, MINUTE_MS);
    expect(lapsed.windows[1]!.used).toBe(0);

    // A ban: a refund of the last admitted request lifts nothing, and the strikes toward the next ban still count.
    const banned = newId('refund-ban');
    const one = { perMinute: 1, perDay: 1000 };
    const admitted = await h.store().check(keySubject(banned), planRequest(one), LADDER);
    for (let i = 0; i < 2; i++) expect((await h.store().check(keySubject(banned), planRequest(one), LADDER)).outcome).toBe('limited');
    await h.store().refund(keySubject(banned), refundOf(admitted));
    // The window has room again (the refund), so this one is admitted, and the next one is the third strike.
    expect((await h.store().check(keySubject(banned), planRequest(one), LADDER)).outcome).toBe('admitted');
    expect((await h.store().check(keySubject(banned), planRequest(one), LADDER)).outcome).toBe('banned_now');
    const during = await h.store().snapshot(keySubject(banned), PLAN, LADDER);
    await h.store().refund(keySubject(banned), refundOf(admitted));
    const after = await h.store().snapshot(keySubject(banned), PLAN, LADDER);
    expect(after.banLevel).toBe(1);
    expect(after.banMs).toBeGreaterThan(0);
    expectAbout(after.banMs, during.banMs);
    expect((await h.store().check(keySubject(banned), planRequest(one), LADDER)).outcome).toBe('banned');
  });

  it('costs: a request takes its cost from every window, is admitted only while every window has the cost left, and a refusal takes nothing', async () => {
    const id = newId('cost');
    const request = limitRequest(planWindows({ perMinute: 12, perDay: 100 }), 5);
    for (const used of [5, 10]) {
      const d = await h.store().check(keySubject(id), request, NO_BANS);
      expect(d).toMatchObject({ outcome: 'admitted', short: 0, windows: [{ used }, { used }] });
    }
    // 10 + 5 > 12: refused by the minute window alone (bit 0); nothing taken from either window.
    const refused = await h.store().check(keySubject(id), request, NO_BANS);
    expect(refused).toMatchObject({ outcome: 'limited', short: 1, windows: [{ used: 10 }, { used: 10 }] });
    expectAbout(refused.retryMs, MINUTE_MS);
    // A request of cost 1 still fits (11 <= 12): the same windows, counted in points.
    expect(await h.store().check(keySubject(id), planRequest({ perMinute: 12, perDay: 100 }), NO_BANS)).toMatchObject({
      outcome: 'admitted',
      windows: [{ used: 11 }, { used: 11 }],
    });
    const snap = await h.store().snapshot(keySubject(id), PLAN, NO_BANS);
    expect(snap.windows.map((w) => w.used)).toEqual([11, 11]);
  });

  it("route windows: counted beside the plan's under their own names; the route's refusal takes nothing from the plan's windows", async () => {
    const id = newId('route');
    const plan = planWindows({ perMinute: 100, perDay: 1000 });
    const store = routeWindows('store', { perMinute: 3, perDay: 50 }, 'enforce');
    const request = limitRequest([...plan, ...store], 1);
    for (let i = 1; i <= 3; i++)
      expect(await h.store().check(keySubject(id), request, NO_BANS)).toMatchObject({
        outcome: 'admitted',
        windows: [{ used: i }, { used: i }, { used: i }, { used: i }],
      });
    const refused = await h.store().check(keySubject(id), request, NO_BANS);
    // Bit 2: the route's minute window.
    expect(refused).toMatchObject({ outcome: 'limited', short: 4, windows: [{ used: 3 }, { used: 3 }, { used: 3 }, { used: 3 }] });
    expectAbout(refused.retryMs, MINUTE_MS);
    // The plan alone (another route, or none) still admits: the route's windows are its own.
    expect(await h.store().check(keySubject(id), planRequest({ perMinute: 100, perDay: 1000 }), NO_BANS)).toMatchObject({
      outcome: 'admitted',
      windows: [{ used: 4 }, { used: 4 }],
    });
    const snap = await h.store().snapshot(keySubject(id), [...plan, ...store], NO_BANS);
    expect(snap.windows.map((w) => w.used)).toEqual([4, 4, 3, 3]);
    // Refused by two windows at once: Retry-After waits for the later one (the plan's day, here).
    const both = limitRequest([...planWindows({ perMinute: 100, perDay: 4 }), ...store], 1);
    const d = await h.store().check(keySubject(id), both, NO_BANS);
    expect(d).toMatchObject({ outcome: 'limited', short: 2 | 4 });
    expectAbout(d.retryMs, DAY_MS);
  });

  it('shadow mode: a shadow window without room takes nothing and refuses nothing; enforced windows beside it still count and refuse', async () => {
    const id = newId('shadow');
    const route = routeWindows('shadowed', { perMinute: 2 }, 'shadow');
    const request = limitRequest([...planWindows({ perMinute: 5, perDay: 1000 }), ...route], 1);
    for (let i = 1; i <= 2; i++) expect(await h.store().check(keySubject(id), request, NO_BANS)).toMatchObject({ outcome: 'admitted', short: 0 });
    for (let i = 3; i <= 5; i++) {
      // The real figures: the shadow window stays at its limit; the plan's windows take the request.
      expect(await h.store().check(keySubject(id), request, NO_BANS)).toMatchObject({
        outcome: 'admitted',
        short: 4,
        retryMs: 0,
        windows: [{ used: i }, { used: i }, { used: 2 }],
      });
    }
    // The enforced minute window is full: refused, and the shadow window is still short beside it.
    expect(await h.store().check(keySubject(id), request, NO_BANS)).toMatchObject({
      outcome: 'limited',
      short: 1 | 4,
      windows: [{ used: 5 }, { used: 5 }, { used: 2 }],
    });
    // A refund gives the cost back only to the windows the request took it from (not the shadow one, short then).
    const id2 = newId('shadow-refund');
    const costly = limitRequest([...planWindows({ perMinute: 50, perDay: 1000 }), ...routeWindows('shadowed', { perMinute: 4 }, 'shadow')], 3);
    await h.store().check(keySubject(id2), costly, NO_BANS);
    const d = await h.store().check(keySubject(id2), costly, NO_BANS);
    expect(d).toMatchObject({ outcome: 'admitted', short: 4, windows: [{ used: 6 }, { used: 6 }, { used: 3 }] });
    const charged = costly.windows.filter((_, i) => !(d.short & (1 << i)));
    await h
      .store()
      .refund(keySubject(id2), { windows: charged.map((w, i) => ({ suffix: w.suffix, remainingMs: d.windows[i]!.resetMs, lengthMs: w.lengthMs })), cost: 3 });
    expect((await h.store().snapshot(keySubject(id2), costly.windows, NO_BANS)).windows.map((w) => w.used)).toEqual([3, 3, 3]);
  });

  it('shadow refusals never strike toward a ban; enforced refusals do', async () => {
    const id = newId('shadow-ban');
    const shadow = limitRequest(planWindows({ perMinute: 1, perDay: 1000 }, 'shadow'));
    for (let i = 0; i < 10; i++) expect((await h.store().check(keySubject(id), shadow, LADDER)).outcome).toBe('admitted');
    expect((await h.store().snapshot(keySubject(id), PLAN, LADDER)).banLevel).toBe(0);
    const enforced = planRequest({ perMinute: 1, perDay: 1000 });
    expect((await h.store().check(keySubject(id), enforced, LADDER)).outcome).toBe('limited');
    expect((await h.store().check(keySubject(id), enforced, LADDER)).outcome).toBe('limited');
    expect((await h.store().check(keySubject(id), enforced, LADDER)).outcome).toBe('banned_now');
  });

  it("candidate limits: checked on their window's count (which takes the cost as usual), never refuse, never strike; the enforced windows keep refusing and banning", async () => {
    const id = newId('candidate');
    const windows = [...planWindows({ perMinute: 6, perDay: 1000 }), ...routeWindows('store', { perMinute: 10, perDay: 5 }, 'enforce')];
    // Bits 0-3: the windows; bit 4: minute:shadow (3); bit 5: store:day:shadow (4).
    const candidates = candidatesFor(windows, 2, 4, { perDay: 4 }, candidatesFor(windows, 0, 2, { perMinute: 3 }));
    expect(candidates.map((c) => [c.name, c.limit, c.of])).toEqual([
      ['minute:shadow', 3, 0],
      ['store:day:shadow', 4, 3],
    ]);
    const request = limitRequest(windows, 1, candidates);
    const shorts: number[] = [];
    for (let i = 1; i <= 5; i++) {
      const d = await h.store().check(keySubject(id), request, LADDER);
      expect(d).toMatchObject({ outcome: 'admitted', retryMs: 0, windows: [{ used: i }, { used: i }, { used: i }, { used: i }] });
      shorts.push(d.short);
    }
    expect(shorts).toEqual([0, 0, 0, 16, 16 | 32]);
    // store:day (5) is full: refused by it, nothing taken; the candidates still say what they would have done.
    const refused = await h.store().check(keySubject(id), request, LADDER);
    expect(refused).toMatchObject({ outcome: 'limited', short: 8 | 16 | 32, windows: [{ used: 5 }, { used: 5 }, { used: 5 }, { used: 5 }] });
    expect(refused.retryMs).toBeGreaterThan(0);
    // Three enforced refusals reach the threshold; the two shadow refusals before them struck nothing.
    expect((await h.store().check(keySubject(id), request, LADDER)).outcome).toBe('limited');
    expect((await h.store().check(keySubject(id), request, LADDER)).outcome).toBe('banned_now');
  });

  it('a candidate limit with a cost: short when the count the request brings is above it', async () => {
    const id = newId('candidate-cost');
    const windows = planWindows({ perMinute: 20, perDay: 1000 });
    const request = limitRequest(windows, 4, candidatesFor(windows, 0, 2, { perDay: 10 }));
    expect((await h.store().check(keySubject(id), request, NO_BANS)).short).toBe(0);
    expect((await h.store().check(keySubject(id), request, NO_BANS)).short).toBe(0);
    expect(await h.store().check(keySubject(id), request, NO_BANS)).toMatchObject({ outcome: 'admitted', short: 4, windows: [{ used: 12 }, { used: 12 }] });
  });
});

describe('MemoryLimiterStore only', () => {
  it('raiseTo: the memory windows continue from the counts and end times the shared store last reported', async () => {
    const c = new ManualClock();
    const store = new MemoryLimiterStore(c);
    const limits = { perMinute: 10, perDay: 100 };
    const now = c.now();
    // Redis last said: 8 of the minute, ending in 20 s; 50 of the day, ending in an hour.
    store.raiseTo(keySubject('seeded'), { minuteUsed: 8, minuteEndsAt: now + 20 * SECOND, dayUsed: 50, dayEndsAt: now + 3600 * SECOND }, now);
    const first = await store.check(keySubject('seeded'), planRequest(limits), NO_BANS);
    expect(first).toMatchObject({
      outcome: 'admitted',
      windows: [
        { used: 9, resetMs: 20 * SECOND },
        { used: 51, resetMs: 3600 * SECOND },
      ],
    });
    expect((await store.check(keySubject('seeded'), planRequest(limits), NO_BANS)).outcome).toBe('admitted');
    expect(await store.check(keySubject('seeded'), planRequest(limits), NO_BANS)).toMatchObject({ outcome: 'limited', retryMs: 20 * SECOND });

    // Raised again with the same (older) report: the larger memory count stands.
    store.raiseTo(keySubject('seeded'), { minuteUsed: 8, minuteEndsAt: now + 20 * SECOND, dayUsed: 50, dayEndsAt: now + 3600 * SECOND }, now);
    expect((await store.check(keySubject('seeded'), planRequest(limits), NO_BANS)).windows[0]!.used).toBe(10);
    // A larger report wins, end time included (the fleet's window).
    store.raiseTo(keySubject('seeded'), { minuteUsed: 10, minuteEndsAt: now + 30 * SECOND, dayUsed: 70, dayEndsAt: now + 3000 * SECOND }, now);
    expect(await store.check(keySubject('seeded'), planRequest(limits), NO_BANS)).toMatchObject({
      outcome: 'limited',
      windows: [{ used: 10, resetMs: 30 * SECOND }, { used: 70 }],
    });

    // The reported minute has ended: it no longer counts, and the memory window it had set ends with it.
    c.advance(30 * SECOND);
    store.raiseTo(keySubject('seeded'), { minuteUsed: 10, minuteEndsAt: now + 30 * SECOND, dayUsed: 70, dayEndsAt: now + 3000 * SECOND }, c.now());
    expect(await store.check(keySubject('seeded'), planRequest(limits), NO_BANS)).toMatchObject({
      outcome: 'admitted',
      windows: [{ used: 1, resetMs: MINUTE_MS }, { used: 71 }],
    });
    // A report of nothing changes nothing.
    store.raiseTo(keySubject('fresh'), { minuteUsed: 0, minuteEndsAt: 0, dayUsed: 0, dayEndsAt: 0 }, c.now());
    expect(await store.check(keySubject('fresh'), planRequest(limits), NO_BANS)).toMatchObject({
      outcome: 'admitted',
      windows: [
        { used: 1, resetMs: MINUTE_MS },
        { used: 1, resetMs: DAY_MS },
      ],
    });
  });
});

describe('RedisLimiterStore only', () => {
  it('counts a credit (requests admitted from memory meanwhile) in both windows before deciding; a lapsed window starts with it', async () => {
    const limits = { perMinute: 10, perDay: 100 };
    const id = newId('credit');
    expect((await redisStore.check(keySubject(id), planRequest(limits), NO_BANS)).windows[0]!.used).toBe(1);
    // 4 admitted from memory: counted, then this request on top.
    const credited = await redisStore.check(keySubject(id), planRequest(limits), NO_BANS, '', '', {
      minute: 4,
      minuteMs: 30 * SECOND,
      day: 4,
      dayMs: 3600 * SECOND,
      requests: 4,
    });
    expect(credited).toMatchObject({ outcome: 'admitted', windows: [{ used: 6 }, { used: 6 }] });
    // The window the credit went into keeps its own end (the first request's minute).
    expect(credited.windows[0]!.resetMs).toBeGreaterThan(MINUTE_MS - 1500);
    // A credit that fills the window: this request is refused, and the credit is counted all the same.
    const full = await redisStore.check(keySubject(id), planRequest(limits), NO_BANS, '', '', {
      minute: 4,
      minuteMs: 30 * SECOND,
      day: 4,
      dayMs: 3600 * SECOND,
      requests: 4,
    });
    expect(full).toMatchObject({ outcome: 'limited', windows: [{ used: 10 }, { used: 10 }] });

    // Redis lost the windows (a restart, or they lapsed): a credit starts them, for what was left of the memory ones.
    await admin.del(keyspace.minuteWindow(keySubject(id)), keyspace.dayWindow(keySubject(id)));
    const restarted = await redisStore.check(keySubject(id), planRequest(limits), NO_BANS, '', '', {
      minute: 3,
      minuteMs: 20 * SECOND,
      day: 0,
      dayMs: 0,
      requests: 0,
    });
    expect(restarted).toMatchObject({ outcome: 'admitted', windows: [{ used: 4 }, { used: 1 }] });
    expect(restarted.windows[0]!.resetMs).toBeLessThanOrEqual(20 * SECOND);
    expect(restarted.windows[0]!.resetMs).toBeGreaterThan(20 * SECOND - 1500);
    expect(restarted.windows[1]!.resetMs).toBeGreaterThan(DAY_MS - 1500);
  });

  /** A store with the usage ledger on (kept 3 days), a new id, and the ledger's day and hour on Redis's clock now. */
  async function withLedger(name: string) {
    const ledgerMs = 3 * 86_400_000;
    const store = new RedisLimiterStore(client, keyspace, () => ledgerMs);
    const id = newId(name);
    const [seconds] = await admin.time();
    const redisDay = Math.floor(Number(seconds) / 86_400);
    return {
      ledgerMs,
      store,
      id,
      seconds: Number(seconds),
      redisDay,
      day: keyspace.usageDay(keySubject(id), redisDay),
      field: `a${Math.floor((Number(seconds) % 86_400) / 3_600)}`,
    };
  }

  it("puts a credit's requests in the usage ledger too, with this request's own count, and gives a new day its expiry", async () => {
    const { ledgerMs, store, id, day, field } = await withLedger('credit-ledger');
    const limits = { perMinute: 100, perDay: 1000 };
    // A credit of 5 admitted from memory (its day count: the minute's may have rolled over meanwhile), then this one.
    const credited = await store.check(keySubject(id), planRequest(limits), NO_BANS, '', '', {
      minute: 2,
      minuteMs: 30 * SECOND,
      day: 5,
      dayMs: 3600 * SECOND,
      requests: 5,
    });
    expect(credited.outcome).toBe('admitted');
    expect(await admin.hget(day, field)).toBe('6');
    expect(await admin.pttl(day)).toBeGreaterThan(ledgerMs - 5 * SECOND);
    // An empty credit adds nothing of its own.
    await store.check(keySubject(id), planRequest(limits), NO_BANS, '', '', { minute: 0, minuteMs: 0, day: 0, dayMs: 0, requests: 0 });
    expect(await admin.hget(day, field)).toBe('7');
  });

  it("route windows carry the key's hash tag, even when the route's name (its path by default) holds braces", async () => {
    const id = newId('route-tag');
    const route = routeWindows('/v1/x{/:y}', { perMinute: 5, perDay: 50 }, 'enforce');
    const request = limitRequest([...planWindows({ perMinute: 10, perDay: 100 }), ...route]);
    expect((await redisStore.check(keySubject(id), request, NO_BANS)).outcome).toBe('admitted');
    const keys = await keysOf(id);
    expect(keys).toContain(keyspace.limitWindow(keySubject(id), 'route:/v1/x{/:y}:minute'));
    expect(keys).toContain(keyspace.limitWindow(keySubject(id), 'route:/v1/x{/:y}:day'));
    for (const k of keys) expect(hashTag(k)).toBe(id);
  });

  it('counts a shadow refusal in the ledger (s<h>) in the same call, beside admitted (a<h>): it was let through', async () => {
    const { store, id, day, field } = await withLedger('shadow-ledger');
    const request = limitRequest(planWindows({ perMinute: 2, perDay: 1000 }, 'shadow'));
    for (let i = 0; i < 5; i++) expect((await store.check(keySubject(id), request, NO_BANS)).outcome).toBe('admitted');
    const hour = field.slice(1);
    expect(await admin.hgetall(day)).toEqual({ [`a${hour}`]: '5', [`s${hour}`]: '3' });
  });

  it('bans in shadow mode: counted in the ledger (w<h>) beside how each request was answered, in their own keys; bans off: no ban or strike key and no ban command (MONITOR)', async () => {
    const { store, id, day, field } = await withLedger('shadow-ban-ledger');
    const limits = { perMinute: 1, perDay: 1000 };
    const outcomes: string[] = [];
    for (let i = 0; i < 6; i++) outcomes.push((await store.check(keySubject(id), planRequest(limits), SHADOW_LADDER)).outcome);
    expect(outcomes).toEqual(['admitted', 'limited', 'limited', 'limited', 'limited', 'limited']);
    const hour = field.slice(1);
    // The 4th started a would-be ban, the 5th and 6th fell in it.
    expect(await admin.hgetall(day)).toEqual({ [`a${hour}`]: '1', [`r${hour}`]: '5', [`w${hour}`]: '3' });
    expect((await keysOf(id)).sort()).toEqual(
      [keyspace.minuteWindow(keySubject(id)), keyspace.dayWindow(keySubject(id)), keyspace.shadowBan(keySubject(id)), day].sort(),
    );

    const off = newId('ban-off-keys');
    const mon = await monitorRedis(admin);
    for (let i = 0; i < 12; i++) await redisStore.check(keySubject(off), planRequest(limits), NO_LADDER);
    const seen = (await mon.stop()).filter((c) => c.source === 'lua').map((c) => (c.args[0] ?? '').toUpperCase());
    expect((await keysOf(off)).sort()).toEqual([keyspace.minuteWindow(keySubject(off)), keyspace.dayWindow(keySubject(off))].sort());
    expect(seen).not.toContain('HMGET');
    expect(seen).not.toContain('HSET');
    // Per check: TIME, INCR per window, and an expiry (PEXPIRE/PTTL) or a give-back per window: never a ban's command.
    expect(new Set(seen)).toEqual(new Set(['TIME', 'INCR', 'PEXPIRE', 'PTTL', 'DECR']));
  });

  it("names the ledger's day on Redis's clock when the gateway's clock says another day", async () => {
    const { ledgerMs, store, id, seconds, redisDay, day, field } = await withLedger('skewed-ledger');
    const limits = { perMinute: 100, perDay: 1000 };
    // The gateway's clock two days ahead: the day it sends is not Redis's, so the script names the day itself.
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(seconds * 1000 + 2 * DAY_MS);
      expect((await store.check(keySubject(id), planRequest(limits), NO_BANS)).outcome).toBe('admitted');
      expect((await store.check(keySubject(id), planRequest(limits), NO_BANS)).outcome).toBe('admitted');
    } finally {
      vi.useRealTimers();
    }
    expect(await admin.hgetall(day)).toEqual({ [field]: '2' });
    expect(await admin.pttl(day)).toBeGreaterThan(ledgerMs - 5 * SECOND);
    expect(await admin.exists(keyspace.usageDay(keySubject(id), redisDay + 2))).toBe(0);
    // The gateway's own day when it is Redis's: the same hash.
    await store.check(keySubject(id), planRequest(limits), NO_BANS);
    expect(await admin.hget(day, field)).toBe('3');
  });

  it("names every hour's ledger field, a0 to a23, for each kind, without formatting a number", async () => {
    // The script cuts each field from two constant strings per kind: in count() (the kinds its calls name) and where it
    // is inlined (the admitted path's), each expression run for every hour.
    const source = readFileSync(new URL('../src/limits/lua/check.lua', import.meta.url), 'utf8');
    const calls = [...source.matchAll(/count\('([a-z])0[^']*', '[a-z]10[^']*'/g)];
    expect(new Set(calls.map((c) => c[1]))).toEqual(new Set(['a', 'r', 'b', 's', 'w']));
    const cuts = [...source.matchAll(/local field = (.*)\n/g)].map((m) => m[1]!);
    expect(cuts).toHaveLength(2);
    const hours = (lua: string, ...args: string[]) => Promise.all(Array.from({ length: 24 }, (_, h) => admin.eval(lua, 0, h, ...args)));
    for (const cut of cuts) {
      if (cut.includes('early')) {
        for (const call of calls) {
          const [early, late] = [...call[0].matchAll(/'([^']*)'/g)].map((m) => m[1]!);
          expect(await hours(`local h, early, late = tonumber(ARGV[1]), ARGV[2], ARGV[3]; return ${cut}`, early!, late!)).toEqual(
            Array.from({ length: 24 }, (_, h) => `${call[1]}${h}`),
          );
        }
      } else {
        const kind = /'([a-z])0/.exec(cut)![1];
        expect(await hours(`local h = tonumber(ARGV[1]); return ${cut}`)).toEqual(Array.from({ length: 24 }, (_, h) => `${kind}${h}`));
      }
    }
  });

  it('re-validates the key against its record in the same call: revoked, rotated past grace or missing -> invalid_key', async () => {
    const limits = { perMinute: 100, perDay: 1000 };
    const ban: BanPolicy = { threshold: 100, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 60 };
    const id = newId('valid');
    const hash = 'a'.repeat(64);
    const old = 'b'.repeat(64);
    const put = (rec: Record<string, unknown>) =>
      admin.set(keyspace.keyRecord(id), JSON.stringify({ id, plan: 'free', createdAt: '2026-01-01T00:00:00.000Z', ...rec }));

    expect((await redisStore.check(keySubject(id), planRequest(limits), ban, hash)).outcome, 'no record').toBe('invalid_key');
    await put({ status: 'active', hash });
    expect((await redisStore.check(keySubject(id), planRequest(limits), ban, hash)).outcome).toBe('admitted');
    expect((await redisStore.check(keySubject(id), planRequest(limits), ban, old)).outcome, 'a hash the record does not hold').toBe('invalid_key');
    await put({ status: 'active', hash, prevHash: old, prevHashUntil: Date.now() + 60_000 });
    expect((await redisStore.check(keySubject(id), planRequest(limits), ban, old)).outcome, 'old hash within grace').toBe('admitted');
    await put({ status: 'active', hash, prevHash: old, prevHashUntil: Date.now() - 1 });
    expect((await redisStore.check(keySubject(id), planRequest(limits), ban, old)).outcome, 'old hash past grace').toBe('invalid_key');
    await put({ status: 'revoked', hash });
    const revoked = await redisStore.check(keySubject(id), planRequest(limits), ban, hash);
    expect(revoked.outcome).toBe('invalid_key');
    // A refused key uses no quota: only the two admitted checks were counted.
    expect(Number(await admin.get(keyspace.minuteWindow(keySubject(id))))).toBe(2);
  });

  it("says whether the key record is still the revision the caller cached: 'current', 'changed', or nothing when not asked", async () => {
    const limits = { perMinute: 100, perDay: 1000 };
    const id = newId('revision');
    const hash = 'c'.repeat(64);
    const recordKey = keyspace.keyRecord(id);
    await admin.set(recordKey, JSON.stringify({ id, plan: 'free', name: 'Zoë 🐾', createdAt: '2026-01-01T00:00:00.000Z', status: 'active', hash }));
    // The revision as the key store names it (src/keys/redis-store.ts), over the bytes Redis holds.
    const revision = recordRevision((await admin.getBuffer(recordKey))!);

    const first = await redisStore.check(keySubject(id), planRequest(limits), NO_BANS, hash, revision);
    expect(first.outcome).toBe('admitted');
    expect(first.keyRecord).toBe('current');
    expect((await redisStore.check(keySubject(id), planRequest(limits), NO_BANS, hash)).keyRecord, 'no revision given').toBeUndefined();
    expect(
      (await (memory as LimiterStore).check(keySubject(id), planRequest(limits), NO_BANS, hash, revision)).keyRecord,
      'the memory store compares nothing',
    ).toBeUndefined();
    // A refusal still reports it: a key over its limit stays confirmed too.
    const tight = { perMinute: 2, perDay: 1000 };
    const refused = await redisStore.check(keySubject(id), planRequest(tight), NO_BANS, hash, revision);
    expect(refused.outcome).toBe('limited');
    expect(refused.keyRecord).toBe('current');

    // Edited in place, still valid (a plan change): 'changed', and the request is still decided.
    await admin.set(recordKey, JSON.stringify({ id, plan: 'pro', name: 'Zoë 🐾', createdAt: '2026-01-01T00:00:00.000Z', status: 'active', hash }));
    const changed = await redisStore.check(keySubject(id), planRequest(limits), NO_BANS, hash, revision);
    expect(changed.outcome).toBe('admitted');
    expect(changed.keyRecord).toBe('changed');
    // No longer valid: invalid_key, which says nothing about the record.
    await admin.set(recordKey, JSON.stringify({ id, plan: 'pro', createdAt: '2026-01-01T00:00:00.000Z', status: 'revoked', hash }));
    const revoked = await redisStore.check(keySubject(id), planRequest(limits), NO_BANS, hash, revision);
    expect(revoked.outcome).toBe('invalid_key');
    expect(revoked.keyRecord).toBeUndefined();
  });

  it('writes a lone check to the socket at once; checks that overlap share one auto-pipelined write', async () => {
    await connection.waitForReady(5000);
    const id = newId('write');
    const limits = { perMinute: 1000, perDay: 1000 };
    const socket = (client as unknown as { stream: Socket }).stream;
    const write = vi.spyOn(socket, 'write');
    try {
      // Alone: the command is on the socket before check() returns (auto-pipelining would write it from setImmediate).
      const lone = redisStore.check(keySubject(id), planRequest(limits), NO_BANS);
      expect(write).toHaveBeenCalledTimes(1);
      expect(await lone).toMatchObject({ outcome: 'admitted', windows: [{ used: 1 }, { used: 1 }] });

      // 20 at once: the first is written at once, the 19 that overlap it in one write.
      write.mockClear();
      const burst = await Promise.all(Array.from({ length: 20 }, () => redisStore.check(keySubject(id), planRequest(limits), NO_BANS)));
      expect(write).toHaveBeenCalledTimes(2);
      expect(burst.map((d) => d.windows[0]!.used).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 2));

      // Redis lost its script cache (a restart): both ways of sending fall back to EVAL and answer.
      await admin.script('FLUSH');
      expect((await redisStore.check(keySubject(id), planRequest(limits), NO_BANS)).windows[0]!.used).toBe(22);
      await admin.script('FLUSH');
      const again = await Promise.all(Array.from({ length: 5 }, () => redisStore.check(keySubject(id), planRequest(limits), NO_BANS)));
      expect(again.map((d) => d.windows[0]!.used).sort((a, b) => a - b)).toEqual([23, 24, 25, 26, 27]);
    } finally {
      write.mockRestore();
    }
  });

  it('ends bans and forgets levels on Redis time (real waits, second-scale durations)', async () => {
    const id = newId('realtime');
    const ban: BanPolicy = { threshold: 2, windowSeconds: 60, durationsSeconds: [1], resetAfterSeconds: 1 };
    const limits = { perMinute: 1, perDay: 1000 };
    expect((await redisStore.check(keySubject(id), planRequest(limits), ban)).outcome).toBe('admitted');
    expect((await redisStore.check(keySubject(id), planRequest(limits), ban)).outcome).toBe('limited');
    const first = await redisStore.check(keySubject(id), planRequest(limits), ban);
    expect(first).toMatchObject({ outcome: 'banned_now', banLevel: 1, retryMs: 1000 });
    const during = await redisStore.check(keySubject(id), planRequest(limits), ban);
    expect(during.outcome).toBe('banned');
    expect(during.retryMs).toBeGreaterThan(0);
    expect(during.retryMs).toBeLessThanOrEqual(1000);
    await sleep(during.retryMs + 50);
    // The ban is over; the minute window is not.
    expect((await redisStore.check(keySubject(id), planRequest(limits), ban)).outcome).toBe('limited');
    const second = await redisStore.check(keySubject(id), planRequest(limits), ban);
    expect(second).toMatchObject({ outcome: 'banned_now', banLevel: 2, retryMs: 1000 });
    // The ban hash lives exactly until lastEnd + resetAfter.
    const pttl = await admin.pttl(keyspace.ban(keySubject(id)));
    expect(pttl).toBeGreaterThan(1000);
    expect(pttl).toBeLessThanOrEqual(2000);
    await sleep(2000 + 100);
    expect((await redisStore.check(keySubject(id), planRequest(limits), ban)).outcome).toBe('limited');
    const third = await redisStore.check(keySubject(id), planRequest(limits), ban);
    expect(third).toMatchObject({ outcome: 'banned_now', banLevel: 1 });
  });

  it('is atomic: 200 concurrent checks from two connections admit exactly perMinute', async () => {
    const other = connectRedis({ url: redis.url, commandTimeoutMs: 5000, purpose: 'cli' });
    try {
      const otherStore = new RedisLimiterStore(other.client, keyspace);
      const id = newId('atomic');
      const limits = { perMinute: 50, perDay: 120 };
      const ban: BanPolicy = { threshold: 1_000_000, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 60 };
      const all = await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 2 ? otherStore : redisStore).check(keySubject(id), planRequest(limits), ban)));
      expect(all.filter((d) => d.outcome === 'admitted')).toHaveLength(50);
      expect(all.filter((d) => d.outcome === 'limited')).toHaveLength(150);
      // Every admitted request saw a distinct count.
      expect(new Set(all.filter((d) => d.outcome === 'admitted').map((d) => d.windows[0]!.used)).size).toBe(50);
      expect(await admin.get(keyspace.dayWindow(keySubject(id)))).toBe('50');
    } finally {
      await other.close();
    }
  });

  it('refusals leave no key without an expiry: a window a refused request would have opened is gone again', async () => {
    const id = newId('expiry');
    const limits = { perMinute: 5, perDay: 2 };
    const expectAllExpiring = async () => {
      for (const k of await keysOf(id)) expect(await admin.pttl(k), k).toBeGreaterThan(0);
    };
    for (let i = 0; i < 2; i++) expect((await redisStore.check(keySubject(id), planRequest(limits), NO_BANS)).outcome).toBe('admitted');
    // The minute window lapses; the day is spent: each refusal counts in both windows and takes itself out again.
    await admin.del(keyspace.minuteWindow(keySubject(id)));
    for (let i = 0; i < 3; i++) expect((await redisStore.check(keySubject(id), planRequest(limits), NO_BANS)).outcome).toBe('limited');
    expect(await admin.exists(keyspace.minuteWindow(keySubject(id)))).toBe(0);
    expect(await admin.get(keyspace.dayWindow(keySubject(id)))).toBe('2');
    await expectAllExpiring();
    // A minute refusal: the day window keeps its count and its expiry.
    const minuteFirst = { perMinute: 1, perDay: 10 };
    const other = newId('expiry-minute');
    expect((await redisStore.check(keySubject(other), planRequest(minuteFirst), NO_BANS)).outcome).toBe('admitted');
    expect((await redisStore.check(keySubject(other), planRequest(minuteFirst), NO_BANS)).outcome).toBe('limited');
    expect(await admin.get(keyspace.minuteWindow(keySubject(other)))).toBe('1');
    expect(await admin.get(keyspace.dayWindow(keySubject(other)))).toBe('1');
    for (const k of await keysOf(other)) expect(await admin.pttl(k), k).toBeGreaterThan(0);
    // A full window that lost its expiry (PERSIST by hand) would refuse forever: the next refusal gives it a whole one.
    await admin.persist(keyspace.minuteWindow(keySubject(other)));
    const refused = await redisStore.check(keySubject(other), planRequest(minuteFirst), NO_BANS);
    expect(refused.outcome).toBe('limited');
    expect(refused.retryMs).toBeGreaterThan(MINUTE_MS - 5 * SECOND);
    expect(refused.retryMs).toBeLessThanOrEqual(MINUTE_MS);
    expect(await admin.pttl(keyspace.minuteWindow(keySubject(other)))).toBeGreaterThan(0);
  });

  it('a candidate limit costs Redis no command: admitted, and admitted past the candidate, run the same commands as without it (MONITOR)', async () => {
    const windows = planWindows({ perMinute: 10, perDay: 1000 });
    const plain = limitRequest(windows);
    const tried = limitRequest(windows, 1, candidatesFor(windows, 0, 2, { perMinute: 2 }));
    const run = async (request: typeof plain): Promise<{ commands: string[]; shorts: number[] }> => {
      const id = newId('candidate-cmds');
      const mon = await monitorRedis(admin);
      const shorts: number[] = [];
      for (let i = 0; i < 5; i++) shorts.push((await redisStore.check(keySubject(id), request, NO_BANS)).short);
      const seen = await mon.stop();
      // The commands the script ran for this id, the id's keys written as {id}.
      const commands = seen.filter((c) => c.source === 'lua').map((c) => c.args.map((a) => a.split(id).join('id')).join(' '));
      return { commands, shorts };
    };
    const without = await run(plain);
    const withCandidate = await run(tried);
    expect(without.shorts).toEqual([0, 0, 0, 0, 0]);
    expect(withCandidate.shorts).toEqual([0, 0, 4, 4, 4]);
    expect(withCandidate.commands.map((c) => c.replace(/^TIME.*/, 'TIME'))).toEqual(without.commands.map((c) => c.replace(/^TIME.*/, 'TIME')));
    // TIME, HMGET of the ban, then INCR and PEXPIRE (the first) or PTTL per window.
    expect(without.commands.length).toBe(5 * 6);
  });

  it('every key the script touches for one id shares the hash tag {id} and is declared, the ledger day too (SCAN and MONITOR)', async () => {
    const id = newId('tag');
    // The usage ledger on: its day hash is one of the script's keys.
    const ledgerStore = new RedisLimiterStore(client, keyspace, () => 3 * DAY_MS);
    const [seconds] = await admin.time();
    const ledgerDay = keyspace.usageDay(keySubject(id), Math.floor(Number(seconds) / 86_400));
    const limits = { perMinute: 1, perDay: 1000 };
    const ban: BanPolicy = { threshold: 2, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 60 };
    const storeAddrs = await clientAddresses(admin, 'tollgate-cli');
    expect(storeAddrs.size).toBeGreaterThan(0);
    const mon = await monitorRedis(admin);
    const seen = new Set<string>();
    const scanNow = async () => {
      for (const k of await keysOf(id)) seen.add(k);
    };
    expect((await ledgerStore.check(keySubject(id), planRequest(limits), ban)).outcome).toBe('admitted');
    await scanNow();
    expect((await ledgerStore.check(keySubject(id), planRequest(limits), ban)).outcome).toBe('limited');
    await scanNow();
    expect((await ledgerStore.check(keySubject(id), planRequest(limits), ban)).outcome).toBe('banned_now');
    await scanNow();
    expect((await ledgerStore.check(keySubject(id), planRequest(limits), ban)).outcome).toBe('banned');
    const commands = await mon.stop();

    // SCAN: windows, strikes and the ban hash all appeared, and nothing for this id lacks the tag.
    expect([...seen].sort()).toEqual(
      [
        keyspace.minuteWindow(keySubject(id)),
        keyspace.dayWindow(keySubject(id)),
        keyspace.strikes(keySubject(id)),
        keyspace.ban(keySubject(id)),
        ledgerDay,
      ].sort(),
    );
    const everything = await scanKeys(`${PREFIX}*`);
    for (const k of everything.filter((k) => k.includes(id))) expect(hashTag(k)).toBe(id);

    // MONITOR: each EVALSHA/EVAL names 6 keys (the record, read only when a key hash is passed; the ban; the strikes;
    // the usage ledger's day; then the two windows), all tagged {id}; every key a script command touched is one of them.
    const scriptCalls = commands.filter((c) => storeAddrs.has(c.source) && /^eval/i.test(c.args[0] ?? ''));
    // One per check, and nothing else.
    expect(scriptCalls.length).toBe(4);
    for (const c of scriptCalls) {
      expect(c.args[2]).toBe('6');
      const keys = c.args.slice(3, 9);
      expect(keys[0]).toBe(keyspace.keyRecord(id));
      expect(keys[3]).toBe(ledgerDay);
      expect(keys.slice(4)).toEqual([keyspace.minuteWindow(keySubject(id)), keyspace.dayWindow(keySubject(id))]);
      for (const k of keys) expect(hashTag(k)).toBe(id);
    }
    const inScript = commands.filter((c) => c.source === 'lua');
    expect(inScript.length).toBeGreaterThan(0);
    const named = new Set([
      keyspace.minuteWindow(keySubject(id)),
      keyspace.dayWindow(keySubject(id)),
      keyspace.strikes(keySubject(id)),
      keyspace.ban(keySubject(id)),
      keyspace.keyRecord(id),
      ledgerDay,
    ]);
    for (const c of inScript) {
      const cmd = (c.args[0] ?? '').toUpperCase();
      if (cmd === 'TIME') continue;
      const key = c.args[1] ?? '';
      expect(named.has(key), `${c.args.join(' ')}`).toBe(true);
      expect(hashTag(key)).toBe(id);
    }
  });
});

/** The Redis Cluster hash tag of a key: the text between the first "{" and the next "}", if non-empty. */
function hashTag(key: string): string | undefined {
  const open = key.indexOf('{');
  if (open < 0) return undefined;
  const close = key.indexOf('}', open + 1);
  if (close <= open + 1) return undefined;
  return key.slice(open + 1, close);
}
