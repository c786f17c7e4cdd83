// Redis connection flaps: every client connection killed every 150 ms (CLIENT KILL TYPE normal) while one key sends
// steady traffic through one in-process gateway on a private redis-server (the key-change subscriber, a pubsub
// client, is killed with it). Each kill drops the gateway into degraded
// mode for a moment; the memory windows must continue from the counts Redis last reported (and what the memory
// admitted must reach Redis afterwards), so the instance never admits past the key's limit, and the key cache must
// survive the reconnects, so a valid key never gets 503.
import { describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import express from 'express';
import request from 'supertest';
import { systemClock } from '../src/util/clock.js';
import { KeyLimiter } from '../src/limits/key-limits.js';
import { RequestContext } from '../src/pipeline/context.js';
import { keyLimits } from '../src/pipeline/stages/limits.js';
import { matchRoute } from '../src/routing/routes.js';
import { MemoryLimiterStore } from '../src/limits/memory-store.js';
import { RedisLimiterStore } from '../src/limits/redis-store.js';
import { Metrics } from '../src/observability/metrics.js';
import { Runtime } from '../src/routing/runtime.js';
import { Breaker } from '../src/storage/breaker.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { checkOnlyStore, metricValue, startLimitsGateway, waitFor } from './helpers/limits.js';
import { useStack } from './helpers/stack.js';
import { keySubject } from '../src/limits/subject.js';

const PER_MINUTE = 60;
const KILL_EVERY_MS = 150;
const FLAP_FOR_MS = 8000;
const REQUESTS = 150;
const keyspace = new Keyspace('flaps:');

const s = useStack({
  redis: true,
  client: true,
  gateway: async ({ up, redis }) =>
    startLimitsGateway(
      testConfig({
        upstream: { url: up.url, timeoutMs: 2000 },
        redis: { url: redis.url, prefix: keyspace.prefix, failMode: 'open', commandTimeoutMs: 100 },
        plans: { free: { perMinute: 1000, perDay: 100_000 } },
        anonymous: { perMinute: 100_000 },
        // Bans stay out of the way: every refusal here is a plain 429.
        ban: { threshold: 100_000, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 60 },
      }),
      { metrics: new Metrics() },
    ),
});

async function get(key: string): Promise<number> {
  const res = await fetch(`${s.gw.url}/v1/categories`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(5000) });
  await res.arrayBuffer();
  return res.status;
}

async function degraded(): Promise<number | undefined> {
  return metricValue(await s.gw.metrics.registry.metrics(), 'tollgate_redis_degraded');
}

describe('KeyLimiter on a shared store that fails every other call (the real script on Redis)', () => {
  it('admits exactly perMinute in all: memory continues from the last Redis counts, and the next Redis check is credited with what memory admitted', async () => {
    const client = s.redis.client();
    try {
      const store = new RedisLimiterStore(client, keyspace);
      let calls = 0;
      // Fails before anything reaches Redis, so every count in Redis is exact and can be compared.
      const flapping = checkOnlyStore((...args) => (++calls % 2 === 0 ? Promise.reject(new Error('connection closed (test)')) : store.check(...args)));
      const config = testConfig({ upstream: { url: s.up.url }, ban: { threshold: 100_000, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 60 } });
      const limiter = new KeyLimiter({
        runtime: new Runtime(config),
        clock: systemClock,
        logger: silentLogger,
        metrics: new Metrics(),
        memory: new MemoryLimiterStore(systemClock),
        // No cool-down: the call after a failure goes to the store again.
        shared: { store: flapping, breaker: new Breaker(systemClock, 0), failMode: 'open', commandTimeoutMs: 1000 },
      });
      const app = express();
      app.use((req, _res, next) => {
        req.ctx = new RequestContext('test', 0, req);
        req.ctx.caller = { id: 'key_flapping', plan: 'free', perMinute: 20 };
        next();
      });
      app.use(keyLimits(limiter));
      app.use((_req, res) => void res.status(200).json({ ok: true }));

      const statuses: number[] = [];
      for (let i = 0; i < 50; i++) statuses.push((await request(app).get('/')).status);
      // With no cool-down the breaker never answers for the store: one store call per request.
      expect(calls).toBe(50);
      // Half the decisions were made in memory, yet the key got its 20 and not one more.
      expect(statuses.filter((st) => st === 200)).toHaveLength(20);
      expect(statuses.slice(0, 20)).toEqual(Array(20).fill(200));
      // Redis holds all 20: its own admissions plus the credits for memory's.
      expect(await s.client.get(keyspace.minuteWindow(keySubject('key_flapping')))).toBe('20');
      expect(await s.client.get(keyspace.dayWindow(keySubject('key_flapping')))).toBe('20');
    } finally {
      client.disconnect();
    }
  });

  it("with a route's cost: memory and Redis count points alike, the credit carries points, and the key gets exactly perMinute / cost", async () => {
    const client = s.redis.client();
    try {
      const store = new RedisLimiterStore(client, keyspace);
      let calls = 0;
      const flapping = checkOnlyStore((...args) => (++calls % 2 === 0 ? Promise.reject(new Error('connection closed (test)')) : store.check(...args)));
      const config = testConfig({
        upstream: { url: s.up.url },
        ban: { threshold: 100_000, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 60 },
        routes: [{ method: 'POST', path: '/v1/orders', cost: 4 }],
      });
      const runtime = new Runtime(config);
      const limiter = new KeyLimiter({
        runtime,
        clock: systemClock,
        logger: silentLogger,
        metrics: new Metrics(),
        memory: new MemoryLimiterStore(systemClock),
        shared: { store: flapping, breaker: new Breaker(systemClock, 0), failMode: 'open', commandTimeoutMs: 1000 },
      });
      const app = express();
      app.use((req, _res, next) => {
        req.ctx = new RequestContext('test', 0, req);
        req.ctx.caller = { id: 'key_costly', plan: 'free', perMinute: 20 };
        // What the route match stage does, before the key stages: the request's route (and so its cost).
        req.ctx.matchedRoute = matchRoute(runtime.current.routes, req.method, req.originalUrl);
        next();
      });
      app.use(keyLimits(limiter));
      app.use((_req, res) => void res.status(200).json({ ok: true }));

      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) statuses.push((await request(app).post('/v1/orders')).status);
      // One store call per request, as above.
      expect(calls).toBe(20);
      // 20 points a minute, 4 a request: 5 admitted, whichever store decided each.
      expect(statuses.filter((st) => st === 200)).toHaveLength(5);
      expect(statuses.slice(0, 5)).toEqual(Array(5).fill(200));
      expect(await s.client.get(keyspace.minuteWindow(keySubject('key_costly')))).toBe('20');
      expect(await s.client.get(keyspace.dayWindow(keySubject('key_costly')))).toBe('20');
    } finally {
      client.disconnect();
    }
  });
});

describe('Redis connections killed every 150 ms', () => {
  it("one instance admits at most the key's perMinute (60) across the flaps, and a valid key never gets 503", async () => {
    const { id, key } = await s.gw.createKey({ perMinute: PER_MINUTE, perDay: 100_000 });
    // The first request reads the key into the cache while Redis is steady.
    const statuses = [await get(key)];
    expect(statuses[0]).toBe(200);

    // CLIENT KILL TYPE normal spares the connection that sends it (SKIPME defaults to yes), so one admin connection
    // can kill every other one, the gateway's request-path client included, again and again.
    // A bound: how many connections are open besides the gateway's (the stack's own clients, the subscriber) varies.
    expect(Number(await s.client.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes'))).toBeGreaterThanOrEqual(1);
    let kills = 0;
    let subscriberKills = 0;
    let stop = false;
    const flapping = (async () => {
      const until = Date.now() + FLAP_FOR_MS;
      while (!stop && Date.now() < until && kills < 100) {
        kills += Number(await s.client.call('CLIENT', 'KILL', 'TYPE', 'normal'));
        // The key-change subscriber counts as a pubsub client, not a normal one: kill it too, so it reconnects.
        subscriberKills += Number(await s.client.call('CLIENT', 'KILL', 'TYPE', 'pubsub'));
        await sleep(KILL_EVERY_MS);
      }
    })();
    try {
      const started = Date.now();
      for (let i = 1; i < REQUESTS && Date.now() - started < FLAP_FOR_MS + 2000; i++) {
        statuses.push(await get(key));
        // A steady pace over the flapping period.
        const due = started + (i * FLAP_FOR_MS) / REQUESTS;
        if (due > Date.now()) await sleep(due - Date.now());
      }
    } finally {
      stop = true;
      await flapping;
    }

    const count = (s: number) => statuses.filter((x) => x === s).length;
    const summary = {
      admitted: count(200),
      refused: count(429),
      unavailable: count(503),
      other: statuses.filter((s) => s !== 200 && s !== 429 && s !== 503),
      kills,
      subscriberKills,
    };
    // The flaps really happened: the gateway's connection was killed many times and it went degraded.
    // Bounds: how many kills fit in FLAP_FOR_MS, and how many found a connection to kill, depend on timing.
    expect(kills, JSON.stringify(summary)).toBeGreaterThanOrEqual(20);
    // A bound: the subscriber is killed only when it had reconnected since the last kill.
    expect(subscriberKills, JSON.stringify(summary)).toBeGreaterThanOrEqual(5);
    // A bound: a kill that finds the connection already reconnecting adds no transition.
    expect(metricValue(await s.gw.metrics.registry.metrics(), 'tollgate_redis_degraded_transitions_total', { to: 'degraded' })).toBeGreaterThanOrEqual(5);
    expect(summary.other, JSON.stringify(summary)).toEqual([]);
    expect(summary.unavailable, JSON.stringify(summary)).toBe(0);
    expect(summary.admitted, JSON.stringify(summary)).toBeLessThanOrEqual(PER_MINUTE);
    // ... and it did not err the other way: the minute's quota was used. A bound: a request whose answer a kill lost
    // was counted in Redis and again in memory, so a few points can be spent twice.
    expect(summary.admitted, JSON.stringify(summary)).toBeGreaterThanOrEqual(PER_MINUTE - 5);

    // Once Redis stays up, what memory admitted meanwhile has reached the Redis window: it holds every 200.
    await waitFor(async () => (await degraded()) === 0 && (await get(key)) === 429, 'a Redis answer after the flaps', 30_000, 50);
    // A bound: the window also counts the requests whose answer a kill lost after Redis had counted them.
    expect(Number(await s.client.get(keyspace.minuteWindow(keySubject(id))))).toBeGreaterThanOrEqual(summary.admitted);
  });
});
