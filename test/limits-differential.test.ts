// The memory store and the Redis store side by side: one seeded random sequence of checks (several windows, costs,
// shadow windows, candidate limits; a consumer's pool with two keys and their caps, ban scope; monthly windows across
// a period's end), refunds, clock steps, window resets and snapshots run over both must give the same decisions. Replay a failure with TOLLGATE_DIFF_SEED=<seed> (the failing seed is printed in the message).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { ManualClock } from '../src/util/clock.js';
import { MemoryLimiterStore } from '../src/limits/memory-store.js';
import { RedisBanStore, RedisLimiterStore } from '../src/limits/redis-store.js';
import type { BanPolicy, Decision, LimitRequest, LimitSnapshot, Refund, WindowSpec } from '../src/limits/types.js';
import { monthPeriod } from '../src/limits/months.js';
import { atInstant, candidatesFor, capWindows, limitRequest, planWindows, routeWindows } from '../src/limits/windows.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { TestRedis } from './helpers/redis-server.js';
import { keySubject } from '../src/limits/subject.js';

const PREFIX = 'diff:';
const SECOND = 1000;
/** Sequences per run (each on its own key id) and steps per sequence: bounded, a few seconds in all. */
const SEQUENCES = 40;
const STEPS = 60;
/**
 * Seeds the differential test once found a disagreement with, replayed on every run. 1: a refund emptied the minute
 * window, and the next admitted request counted in the old window (memory) or opened a new one (Redis).
 */
const REGRESSION_SEEDS = [116800924, 881720401];
/**
 * Redis time runs on while the test does (its TIME is real), so a Redis duration may be this much below memory's.
 * Every clock step is whole seconds, so every window end and ban end lies on a whole second of memory's clock: the
 * stores disagree on one only when a sequence takes a second of real time, far more than STEPS steps need.
 */
const SLACK_MS = 900;

let redis: TestRedis;
let client: Redis;
let admin: Redis;
const keyspace = new Keyspace(PREFIX);

beforeAll(async () => {
  redis = await TestRedis.start();
  client = redis.client();
  admin = redis.client();
});
afterAll(async () => {
  client?.disconnect();
  admin?.disconnect();
  await redis?.stop();
});

/** mulberry32: a small seeded generator, so a sequence replays from its seed alone. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Time passing for one id on Redis: every TTL of its keys shrinks by ms (a key whose TTL runs out is deleted, as
 * expiry would) and the ban hash's instants move ms into the past: what the check would see ms later.
 */
async function shiftRedis(id: string, ms: number): Promise<void> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await admin.scan(cursor, 'MATCH', `${PREFIX}*{${id}}*`, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  for (const key of keys) {
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

/** A step of a sequence, as printed on a failure. */
type Step =
  | { op: 'check'; request: number; key: number }
  | { op: 'refund'; of: number; late: number }
  | { op: 'advance'; ms: number }
  | { op: 'reset'; key: number }
  | { op: 'banMode'; to: 'enforce' | 'shadow' | 'off' }
  | { op: 'snapshot'; request: number; key: number };

interface Sequence {
  ban: BanPolicy;
  /** How many requests build() knows. */
  requests: number;
  /** The key ids of the sequence (one; two of one consumer in a pool) and their consumer, if any. */
  keys: string[];
  consumer: string | undefined;
  /** Where memory's clock starts (a monthly sequence: a few hours before its period ends). */
  startMs: number | undefined;
  /** Request `i` of key `key` at `now` (monthly windows in the period then, taken at that instant). */
  build(i: number, key: number, now: number): LimitRequest;
  /** The suffixes of the monthly windows in force at `now` (what a reset names in Redis). */
  months(now: number): string[];
  steps: Step[];
}

const pick = <T>(rnd: () => number, xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
const int = (rnd: () => number, lo: number, hi: number): number => lo + Math.floor(rnd() * (hi - lo + 1));

/**
 * A sequence from its seed: two or three requests (the plan's windows, a route's, modes, candidates, costs) with small
 * limits so windows fill, a ban ladder that bans after a few refusals, and STEPS steps. Extended (every random
 * sequence; the regression seeds replay as they were found): a second stream of the seed may make it a pool (two keys
 * of one consumer, caps on the keys, a ban scope), give the plan a monthly window (calendar or from a billing day, the
 * clock starting hours before the period ends), or both.
 */
function sequence(seed: number, extended: boolean): Sequence {
  const rnd = random(seed);
  const planLimits = { perMinute: int(rnd, 2, 6), perDay: int(rnd, 4, 20) };
  const planMode = rnd() < 0.25 ? 'shadow' : 'enforce';
  const plan = planWindows(planLimits, planMode);
  const routes = ['a', 'b'].map((r) =>
    routeWindows(r, rnd() < 0.5 ? { perMinute: int(rnd, 1, 5) } : { perMinute: int(rnd, 1, 5), perDay: int(rnd, 3, 12) }, rnd() < 0.3 ? 'shadow' : 'enforce'),
  );
  const requests: LimitRequest[] = [];
  const shapes: Array<{ route: WindowSpec[]; shadow: { perMinute: number; perDay: number | undefined } | undefined; cost: number }> = [];
  for (let i = 0; requests.length < 3 && i < 20; i++) {
    const windows: WindowSpec[] = [...plan];
    const route = i > 0 ? pick(rnd, routes) : [];
    windows.push(...route);
    const shadow = rnd() < 0.4 ? { perMinute: int(rnd, 1, 4), perDay: rnd() < 0.5 ? int(rnd, 2, 10) : undefined } : undefined;
    const candidates = candidatesFor(windows, 0, windows.length, shadow);
    const cost = i === 0 ? 1 : int(rnd, 1, 3);
    const r = limitRequest(windows, cost, candidates);
    // A request no store is asked about (KeyLimiter refuses it first: 403 cost_exceeds_limit).
    if (!r.unpayable) {
      requests.push(r);
      shapes.push({ route, shadow, cost });
    }
  }
  // The ladder's mode at the start (a banMode step switches it, as a reload does).
  const startMode = pick(rnd, ['enforce', 'enforce', 'shadow', 'off'] as const);
  const ban: BanPolicy = {
    enabled: startMode !== 'off',
    mode: startMode === 'off' ? 'enforce' : startMode,
    threshold: int(rnd, 2, 6),
    windowSeconds: int(rnd, 30, 300),
    durationsSeconds: [int(rnd, 5, 90), int(rnd, 60, 600)],
    resetAfterSeconds: int(rnd, 60, 900),
  };
  const steps: Step[] = [];
  const more = random(seed ^ 0x5bd1e995);
  const pooled = extended && more() < 0.6;
  const keyCount = pooled ? 2 : 1;
  for (let i = 0; i < STEPS; i++) {
    const p = rnd();
    const key = keyCount > 1 ? int(more, 0, 1) : 0;
    if (p < 0.5) steps.push({ op: 'check', request: int(rnd, 0, requests.length - 1), key });
    else if (p < 0.65) steps.push({ op: 'refund', of: int(rnd, 1, 3), late: int(rnd, 0, 1) * SECOND });
    else if (p < 0.88) steps.push({ op: 'advance', ms: pick(rnd, [1, 5, 20, 30, 59, 60, 61, 300, 3600, 86_400]) * SECOND });
    else if (p < 0.93) steps.push({ op: 'reset', key });
    else if (p < 0.96) steps.push({ op: 'banMode', to: pick(rnd, ['enforce', 'shadow', 'off'] as const) });
    else steps.push({ op: 'snapshot', request: int(rnd, 0, requests.length - 1), key });
  }
  const id = `key_d${seed}_${process.pid}`;
  if (!extended) {
    return { ban, requests: requests.length, keys: [id], consumer: undefined, startMs: undefined, build: (i) => requests[i]!, months: () => [], steps };
  }
  const monthly = more() < 0.5;
  const billingDay = pooled ? pick(more, [undefined, 1, 15, 31]) : undefined;
  const limits = monthly ? { ...planLimits, perMonth: int(more, 2, 15) } : planLimits;
  const capsOf = (chance: number) => {
    if (!pooled || more() >= chance) return undefined;
    const caps = {
      ...(more() < 0.6 ? { perMinute: int(more, 1, 4) } : {}),
      ...(more() < 0.5 ? { perDay: int(more, 2, 10) } : {}),
      ...(monthly && more() < 0.5 ? { perMonth: int(more, 1, 6) } : {}),
    };
    return Object.keys(caps).length > 0 ? caps : undefined;
  };
  const caps = [capsOf(0.8), capsOf(0.3)];
  if (pooled) ban.scope = pick(more, ['key', 'consumer'] as const);
  // Hours before a period ends (30 November, or the billing day's): the sequence's day steps cross it.
  const end = monthPeriod(Date.UTC(2026, 10, 20), billingDay).endMs;
  const startMs = monthly ? end - int(more, 1, 30) * 3_600_000 : undefined;
  const build = (i: number, key: number, now: number): LimitRequest => {
    const shape = shapes[i]!;
    const month = monthly || caps[key]?.perMonth !== undefined ? monthPeriod(now, billingDay) : undefined;
    const windows: WindowSpec[] = [...planWindows(limits, planMode, month), ...shape.route];
    const candidates = candidatesFor(windows, 0, windows.length, shape.shadow);
    const own = caps[key];
    if (own) windows.push(...capWindows(own, planMode, month));
    return atInstant(limitRequest(windows, shape.cost, candidates), now);
  };
  return {
    ban,
    requests: requests.length,
    keys: pooled ? [`${id}a`, `${id}b`] : [id],
    consumer: pooled ? `c_d${seed}_${process.pid}` : undefined,
    startMs,
    build,
    months: (now) => (monthly ? [`month:${monthPeriod(now, billingDay).name}`] : []),
    steps,
  };
}

/** What the two stores must agree on: everything but durations, which Redis may report up to SLACK_MS lower. */
function agree(mem: Decision | LimitSnapshot, red: Decision | LimitSnapshot, where: string): string | undefined {
  const exact = (d: Decision | LimitSnapshot) =>
    'outcome' in d
      ? {
          outcome: d.outcome,
          short: d.short,
          banLevel: d.banLevel,
          used: d.windows.map((w) => w.used),
          retryMs: d.retryMs > 0,
          // A would-be ban (bans in shadow mode): in force (-1) or started now (its length, within SLACK_MS).
          wouldBan: d.wouldBan === undefined ? 0 : d.wouldBan < 0 ? -1 : Math.ceil(d.wouldBan / 1000),
        }
      : { key: d.key, banLevel: d.banLevel, used: d.windows.map((w) => w.used), banned: d.banMs > 0 };
  const durations = (d: Decision | LimitSnapshot) => ['outcome' in d ? d.retryMs : d.banMs, ...d.windows.map((w) => w.resetMs)];
  const [m, r] = [JSON.stringify(exact(mem)), JSON.stringify(exact(red))];
  if (m !== r) return `${where}: memory ${m}, redis ${r}`;
  const [dm, dr] = [durations(mem), durations(red)];
  if (dm.some((v, i) => dr[i]! > v || dr[i]! < v - SLACK_MS)) return `${where}: durations memory ${JSON.stringify(dm)}, redis ${JSON.stringify(dr)}`;
  return undefined;
}

/** Runs one seed's sequence over both stores; returns the first disagreement (with the steps so far), or undefined. */
async function run(seed: number, extended = true): Promise<string | undefined> {
  const seq = sequence(seed, extended);
  const { steps } = seq;
  let ban = seq.ban;
  const subjects = seq.keys.map((k) => keySubject(k, seq.consumer));
  // Every name of the sequence carries one hash tag: the key's, or the consumer's for a pool.
  const tag = subjects[0]!.tag;
  const clock = seq.startMs !== undefined ? new ManualClock(seq.startMs) : new ManualClock();
  const memory = new MemoryLimiterStore(clock);
  const shared = new RedisLimiterStore(client, keyspace);
  const routeSuffixes = ['route:a:minute', 'route:a:day', 'route:b:minute', 'route:b:day'];
  const sharedBans = new RedisBanStore(client, keyspace, () => routeSuffixes);
  /** Admitted checks, newest last: what each store charged, to which key, and memory's clock then. */
  const admitted: Array<{ request: LimitRequest; key: number; mem: Decision; red: Decision; at: number }> = [];
  // The remaining time is reckoned half a second short (the gateway's reckoning is off by its latency): on whole-second
  // steps a window opened after a reset can end exactly half a window past the reckoning, a tie the stores would
  // break apart by Redis's real milliseconds.
  const refundOf = (request: LimitRequest, d: Decision, elapsed: number): Refund => ({
    windows: request.windows.flatMap((w, i) =>
      d.short & (1 << i)
        ? []
        : [{ suffix: w.suffix, remainingMs: d.windows[i]!.resetMs - elapsed - 500, lengthMs: w.lengthMs, ...(w.cap ? { cap: w.cap } : {}) }],
    ),
    cost: request.cost,
  });
  for (let i = 0; i < steps.length; i++) {
    const step = steps[i]!;
    const where = `seed ${seed} (replay: TOLLGATE_DIFF_SEED=${seed}), step ${i} ${JSON.stringify(step)} after ${JSON.stringify(steps.slice(Math.max(0, i - 8), i))}`;
    if (step.op === 'check') {
      const request = seq.build(step.request, step.key, clock.now());
      // A request no store is asked about (KeyLimiter refuses it first: 403 cost_exceeds_limit).
      if (request.unpayable) continue;
      const subject = subjects[step.key]!;
      const mem = await memory.check(subject, request, ban);
      const red = await shared.check(subject, request, ban);
      const wrong = agree(mem, red, where);
      if (wrong) return wrong;
      if (mem.outcome === 'admitted') admitted.push({ request, key: step.key, mem, red, at: clock.now() });
    } else if (step.op === 'refund') {
      // A request given back at most once (KeyLimiter drops its charge): the step.of-th newest one still charged.
      const c = admitted.splice(Math.max(0, admitted.length - step.of), 1)[0];
      if (!c) continue;
      // It is refunded `late` after memory's clock now, as far as both stores' windows are concerned.
      if (step.late > 0) {
        clock.advance(step.late);
        await shiftRedis(tag, step.late);
      }
      const elapsed = clock.now() - c.at;
      await memory.refund(subjects[c.key]!, refundOf(c.request, c.mem, elapsed));
      await shared.refund(subjects[c.key]!, refundOf(c.request, c.red, elapsed));
    } else if (step.op === 'advance') {
      clock.advance(step.ms);
      await shiftRedis(tag, step.ms);
    } else if (step.op === 'banMode') {
      ban = { ...ban, enabled: step.to !== 'off', mode: step.to === 'off' ? 'enforce' : step.to };
    } else if (step.op === 'reset') {
      // A key's reset: its own windows, or for a key of a consumer its caps (and strikes) inside the pool.
      memory.resetWindows(subjects[step.key]!);
      await sharedBans.resetWindows(subjects[step.key]!, seq.months(clock.now()));
    } else {
      const windows = seq.build(step.request, step.key, clock.now()).windows;
      const wrong = agree(await memory.snapshot(subjects[step.key]!, windows, ban), await shared.snapshot(subjects[step.key]!, windows, ban), where);
      if (wrong) return wrong;
    }
  }
  return undefined;
}

describe('the memory store and the Redis store give the same decisions over one random sequence', () => {
  it.each(REGRESSION_SEEDS)('regression seed %i (as found: one key, no monthly window)', async (seed) => {
    expect(await run(seed, false)).toBeUndefined();
  });

  it(`${SEQUENCES} random sequences of ${STEPS} steps (a seed per run, printed on a failure; TOLLGATE_DIFF_SEED replays one)`, async () => {
    const fixed = process.env.TOLLGATE_DIFF_SEED;
    const base = fixed !== undefined ? Number(fixed) : Math.floor(Math.random() * 2 ** 31);
    const seeds = fixed !== undefined ? [base] : Array.from({ length: SEQUENCES }, (_, i) => base + i);
    for (const seed of seeds) expect(await run(seed)).toBeUndefined();
  }, 60_000);
});
