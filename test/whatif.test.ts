// The what-if of a plan's limits (docs/keys-and-limits.md, "What if"): a ledger written through the UsageStore on real
// Redis with known hourly values, then POST /plans/simulate and the built CLI's `tollgate plans simulate`, whose
// answers were worked out by hand below. Keys with their own override are reported as such; keys of other plans and
// hours outside the period are left out; every bad body is a 400 naming the field; answers match the OpenAPI document.
import { beforeAll, describe, expect, it } from 'vitest';
import { hashAdminToken } from '../src/admin/tokens.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { RedisUsageStore } from '../src/usage/store.js';
import type { UsageKind } from '../src/limits/types.js';
import { DAY_MS, HOUR_MS, dayOf } from '../src/util/time.js';
import { dayAdmittedAtMost, minuteTotal, monthRefusedAtLeast, simulateSeries } from '../src/usage/whatif.js';
import { WhatIfPages } from '../src/usage/whatif-pages.js';
import { MemoryKeptReports, ReportError } from '../src/usage/kept-reports.js';
import { assertBuilt, runCli, tempDir, withoutAudit } from './helpers/cli.js';
import { testConfig } from './helpers/gateway.js';
import { startLimitsGateway } from './helpers/limits.js';
import { CheckedApi } from './helpers/openapi.js';
import { useStack } from './helpers/stack.js';

const PREFIX = 'whatif:';
const TOKEN = 'tga_whatif-test-token';
const PLANS = { free: { perMinute: 60, perDay: 1000 }, pro: { perMinute: 300, perDay: 10_000 } };
/** Midnight UTC three days ago: the period is its day and the next (48 whole hours). */
const D0 = (dayOf(Date.now()) - 3) * DAY_MS;
const FROM = new Date(D0).toISOString();
const TO = new Date(D0 + 48 * HOUR_MS).toISOString();
const ids: Record<'k1' | 'k2' | 'k3' | 'k4' | 'k5', string> = { k1: '', k2: '', k3: '', k4: '', k5: '' };

const simulate = (body: unknown, token = TOKEN) => api.call('POST', '/plans/simulate', { body, token });

beforeAll(() => assertBuilt());

const s = useStack({
  redis: true,
  client: true,
  gateway: async ({ up, redis }) =>
    startLimitsGateway(
      testConfig({
        upstream: { url: up.url },
        redis: { url: redis.url, prefix: PREFIX },
        admin: { port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] },
        plans: PLANS,
        // A route whose requests take 5 points each (the what-if's figures are points).
        routes: [{ path: '/v1/heavy', cost: 5 }],
        usage: { retentionDays: 7 },
      }),
    ),
});
const api = new CheckedApi({ target: () => s.gw.gateway.adminApp! });

beforeAll(async () => {
  const make = async (plan: string, extra: { perMinute?: number; perDay?: number } = {}) =>
    (await s.gw.gateway.admin.issuer.create({ plan, ...extra })).record.id;
  ids.k1 = await make('free');
  ids.k2 = await make('free', { perMinute: 100 });
  ids.k3 = await make('free', { perDay: 5000 });
  ids.k4 = await make('pro');
  ids.k5 = await make('free');

  // The ledger, written the way instances write it (counts added, peakMinute raised), hour h after D0.
  const store = new RedisUsageStore(s.client, new Keyspace(PREFIX));
  const counts: Array<{ id: string; kind: UsageKind; atMs: number; n: number }> = [];
  const peaks: Array<{ id: string; atMs: number; peak: number }> = [];
  const at = (id: string, h: number, c: Partial<Record<UsageKind | 'm', number>>) => {
    for (const [kind, n] of Object.entries(c)) {
      if (kind === 'm') peaks.push({ id, atMs: D0 + h * HOUR_MS, peak: n });
      else counts.push({ id, kind: kind as UsageKind, atMs: D0 + h * HOUR_MS, n });
    }
  };
  at(ids.k1, 10, { a: 200, r: 30, b: 5, m: 50 });
  at(ids.k1, 11, { a: 100, m: 40 });
  at(ids.k1, 12, { a: 20, m: 20 });
  at(ids.k1, 27, { a: 50, m: 35 }); // day 1, 03:00
  at(ids.k1, 49, { a: 500, m: 500 }); // after the period: not counted
  for (let h = 0; h < 24; h++) at(ids.k2, h, { a: 100, f: 5, s: 5, m: h === 10 ? 90 : 10 });
  at(ids.k3, 10, { a: 25, m: 25 });
  at(ids.k4, 10, { a: 100, m: 100 });
  await store.add(counts, 8 * DAY_MS);
  await store.raisePeaks(peaks, 8 * DAY_MS);
}, 120_000);

describe('the bounds', () => {
  it("month: a consumer's pool counts its months from its billing day, as its limit check does", () => {
    // 30 requests on 14 November at 23:00 UTC and 30 an hour later: one calendar month, two periods from the 15th.
    const from = Date.UTC(2026, 10, 14, 23);
    const input = { plan: 'free', current: PLANS.free, perMonth: 40, fromMs: from, toMs: from + 2 * HOUR_MS };
    const hourly = { demand: [30, 30], peaks: [0, 0] };
    expect(simulateSeries(hourly, {}, input).month).toEqual({ limit: 40, override: false, pointsRefusedAtLeast: 20 });
    expect(simulateSeries(hourly, { billingDay: 15 }, input).month).toEqual({ limit: 40, override: false, pointsRefusedAtLeast: 0 });
  });

  it('minute: neighbouring hours may share one window (the larger counts), hours further apart may not', () => {
    expect(minuteTotal([20, 10, 0, 5])).toBe(25);
    expect(minuteTotal([20, 0, 10])).toBe(30);
    expect(minuteTotal([5, 5, 5])).toBe(10); // (5, 5) paired, 5 alone: the least a pairing allows
    expect(minuteTotal([])).toBe(0);
  });

  it('day: at most one limit per window, windows 24 h apart, one may have started before the period', () => {
    const day = [...Array.from({ length: 24 }, () => 100), ...Array.from({ length: 24 }, () => 0)];
    expect(dayAdmittedAtMost(day, 500)).toBe(1000);
    // One hour may hold the end of one window and the start of the next: 300 in it could all pass a limit of 200.
    expect(dayAdmittedAtMost([300, 0, 0], 200)).toBe(400);
    expect(dayAdmittedAtMost([0, 0, 0, 300], 200)).toBe(400);
    // 49 hours of steady demand: at most three windows can touch them.
    expect(
      dayAdmittedAtMost(
        Array.from({ length: 49 }, () => 100),
        500,
      ),
    ).toBe(1500);
  });
});

describe('the monthly bound', () => {
  it('month: each period admits at most its limit of the demand the ledger has of it; periods counted apart', () => {
    const first = Date.parse('2026-11-30T22:00:00Z') / HOUR_MS;
    // 22:00 and 23:00 on 30 November, then 00:00 and 01:00 on 1 December.
    expect(monthRefusedAtLeast([40, 30, 50, 10], first, 50)).toBe(20 + 10);
    expect(monthRefusedAtLeast([40, 30, 50, 10], first, 100)).toBe(0);
    // From a billing day: 30 November 22:00 to 1 December 01:00 is one period from the 15th.
    expect(monthRefusedAtLeast([40, 30, 50, 10], first, 50, 15)).toBe(80);
    expect(monthRefusedAtLeast([], first, 1)).toBe(0);
  });
});

describe('what is kept for the pages', () => {
  it('a what-if listing more keys than are kept for its pages is refused (422 report_too_large), one that fits a page keeps nothing', async () => {
    const key = (id: string) => ({ id, consumer: null, minute: null, day: null, pointsRefusedAtLeast: 1, hoursAffected: 0, hours: [] });
    const totals = { keysInPlan: 3, keysAffected: 3, hours: 0, pointsRefusedAtLeast: 3 };
    const kept = new MemoryKeptReports();
    const input = { plan: 'free', current: PLANS.free, perMinute: 1, fromMs: 0, toMs: HOUR_MS };
    const pages = new WhatIfPages(async () => ({ keys: ['a', 'b', 'c'].map(key), totals }), kept, 60_000, 2);
    expect((await pages.page(input, 3)).next).toBeNull();
    const err = await pages.page(input, 2).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ReportError);
    expect((err as ReportError).code).toBe('report_too_large');
    expect((err as ReportError).message).toBe(
      "the what-if lists 3 keys, more than the 2 kept for its pages: ask for a shorter period, or a new limit closer to the plan's",
    );
  });
});

describe('POST /plans/simulate', () => {
  it('a monthly limit: each key bounded by the calendar months its demand fell in; asked and answered as perMonth', async () => {
    // The first day alone: one day, one month, whatever the date.
    const res = await simulate({ plan: 'free', perMonth: 400, from: FROM, to: new Date(D0 + 24 * HOUR_MS).toISOString() });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ current: PLANS.free, simulated: { perMonth: 400 } });
    const byId = new Map((res.body.keys as Array<{ id: string }>).map((k) => [k.id, k]));
    // 24 hours of 100 admitted: 2400 offered against 400.
    expect(byId.get(ids.k2)).toEqual({
      id: ids.k2,
      consumer: null,
      minute: null,
      day: null,
      month: { limit: 400, override: false, pointsRefusedAtLeast: 2000 },
      pointsRefusedAtLeast: 2000,
      hoursAffected: 0,
      hours: [],
    });
    // 320 offered (hours 10-12): within the month's 400.
    expect(byId.has(ids.k1)).toBe(false);
  });

  it('answers the hand-worked ledger: keys, hours, lower bounds, overrides and totals', async () => {
    const res = await simulate({ plan: 'free', perMinute: 30, perDay: 500, from: FROM, to: TO });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ plan: 'free', from: FROM, to: TO, current: PLANS.free, simulated: { perMinute: 30, perDay: 500 } });
    const hour = (h: number) => new Date(D0 + h * HOUR_MS).toISOString();
    expect(res.body.keys).toEqual([
      // 24 hours of 100 offered (100 admitted, 5 of them let through by a shadow window, 5 of them failed by a target): two day windows at most touch
      // them, so at most 2 x 500 admitted, at least 1400 refused. Its own perMinute keeps the minute window.
      {
        id: ids.k2,
        consumer: null,
        minute: { limit: 100, override: true, pointsRefusedAtLeast: 0 },
        day: { limit: 500, override: false, pointsRefusedAtLeast: 1400 },
        pointsRefusedAtLeast: 1400,
        hoursAffected: 0,
        hours: [],
      },
      // Busiest minutes 50, 40 (next hour: maybe the same window, so 20 not 30), 20, and 35 the next day: 20 + 5.
      // 370 offered in the period fit one day window of 500: no day refusal. Refused (30) and banned (5) left out.
      {
        id: ids.k1,
        consumer: null,
        minute: { limit: 30, override: false, pointsRefusedAtLeast: 25 },
        day: { limit: 500, override: false, pointsRefusedAtLeast: 0 },
        pointsRefusedAtLeast: 25,
        hoursAffected: 3,
        hours: [
          { start: hour(10), requests: 200, peakMinute: 50, pointsRefusedAtLeast: 20 },
          { start: hour(11), requests: 100, peakMinute: 40, pointsRefusedAtLeast: 10 },
          { start: hour(27), requests: 50, peakMinute: 35, pointsRefusedAtLeast: 5 },
        ],
      },
      // Its own perDay keeps the day window; its busiest minute (25) is under 30.
      {
        id: ids.k3,
        consumer: null,
        minute: { limit: 30, override: false, pointsRefusedAtLeast: 0 },
        day: { limit: 5000, override: true, pointsRefusedAtLeast: 0 },
        pointsRefusedAtLeast: 0,
        hoursAffected: 0,
        hours: [],
      },
    ]);
    expect(res.body.totals).toEqual({ keysInPlan: 4, keysAffected: 2, hours: 3, pointsRefusedAtLeast: 1425 });
    expect(res.body.unit).toBe('points');
    expect(res.body.nextCursor).toBeNull();
  });

  it('a window not given is not simulated (null); a higher limit refuses nothing', async () => {
    const minute = await simulate({ plan: 'free', perMinute: 30, from: FROM, to: TO });
    expect(minute.status).toBe(200);
    expect(minute.body.simulated).toEqual({ perMinute: 30 });
    expect(minute.body.keys.map((k: { id: string }) => k.id)).toEqual([ids.k1, ids.k2]);
    expect(minute.body.keys[0].day).toBeNull();
    expect(minute.body.totals).toEqual({ keysInPlan: 4, keysAffected: 1, hours: 3, pointsRefusedAtLeast: 25 });
    const generous = await simulate({ plan: 'free', perMinute: 600, perDay: 100_000, from: FROM, to: TO });
    expect(generous.body.totals).toEqual({ keysInPlan: 4, keysAffected: 0, hours: 0, pointsRefusedAtLeast: 0 });
    // The other plan's key, alone in it.
    const pro = await simulate({ plan: 'pro', perMinute: 60, from: FROM, to: TO });
    expect(pro.body.keys.map((k: { id: string; pointsRefusedAtLeast: number }) => [k.id, k.pointsRefusedAtLeast])).toEqual([[ids.k4, 40]]);
  });

  it('refuses what it cannot answer with a 400 naming the field, and answers nobody without a token', async () => {
    const bad: Array<[unknown, string]> = [
      [{ plan: 'free' }, 'body'],
      [{ perMinute: 5 }, 'body.plan'],
      [{ plan: 'free', perMinute: 5, limit: 0 }, 'body.limit'],
      [{ plan: 'free', perMinute: 5, limit: 1001 }, 'body.limit'],
      [{ cursor: 'garbage' }, 'body.cursor'],
      [{ cursor: 'eyJ3IjoiYWFhYWFhYWFhYWFhYWFhYWFhYWFhYSIsIm4iOjF9', plan: 'free' }, 'body.plan'],
      [{ plan: 'free', perMinute: 0 }, 'body.perMinute'],
      [{ plan: 'free', perMinute: -5 }, 'body.perMinute'],
      [{ plan: 'free', perMinute: 1.5 }, 'body.perMinute'],
      [{ plan: 'free', perMinute: '30' }, 'body.perMinute'],
      [{ plan: 'free', perDay: 1e300 }, 'body.perDay'],
      [{ plan: { $ne: 1 }, perDay: 10 }, 'body.plan'],
      [{ plan: 'free', perDay: 10, extra: 1 }, 'body.extra'],
      [{ plan: 'free', perDay: 10, from: 'yesterday' }, 'body.from'],
      [{ plan: 'free', perDay: 10, from: TO, to: FROM }, 'body.from'],
      [{ plan: 'free', perDay: 10, from: new Date(Date.now() - 30 * DAY_MS).toISOString() }, 'body.from'],
      [[1, 2], 'body'],
      [{ plan: 'p'.repeat(201), perDay: 10 }, 'body.plan'],
      [{ plan: 'free', perDay: 10, groupBy: 'team' }, 'body.groupBy'],
      [{ plan: 'free', perDay: 10, groupBy: ['consumer'] }, 'body.groupBy'],
      [{ plan: 'free', perDay: 10, groupBy: { $ne: 'key' } }, 'body.groupBy'],
      [{ cursor: 'eyJ3IjoiYWFhYWFhYWFhYWFhYWFhYWFhYWFhYSIsIm4iOjF9', groupBy: 'consumer' }, 'body.groupBy'],
    ];
    for (const [body, path] of bad) {
      const res = await simulate(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('invalid_request');
      expect(
        res.body.problems.map((p: { path: string }) => p.path),
        JSON.stringify(body),
      ).toContain(path);
    }
    const unknown = await simulate({ plan: 'gold', perMinute: 5 });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({ code: 'unknown_plan', status: 400 });
    expect(unknown.body.message).toContain('free, pro');
    const proto = await simulate({ plan: '__proto__', perMinute: 5 });
    expect(proto.body.code).toBe('unknown_plan');
    expect((await simulate({ plan: 'free', perMinute: 5 }, 'tga_wrong')).status).toBe(401);
    expect(api.problems).toEqual([]);
  });

  it('grouped by consumer answers pools, not keys (none here: no key was ever counted under a consumer)', async () => {
    const res = await simulate({ plan: 'free', perMinute: 30, from: FROM, to: TO, groupBy: 'consumer' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({
      groupBy: 'consumer',
      consumers: [],
      totals: { consumersInPlan: 0, consumersAffected: 0, hours: 0, pointsRefusedAtLeast: 0 },
    });
    expect(res.body.keys).toBeUndefined();
    expect(api.problems).toEqual([]);
  });
});

describe('tollgate plans simulate', () => {
  it('prints the same answer as JSON, CSV and a table, from the shared Redis; bad options exit 2, an unknown plan 1', async () => {
    const dir = tempDir();
    try {
      const file = dir.write('gateway.yaml', {
        upstream: { url: s.up.url },
        redis: { url: s.redis.url, prefix: PREFIX },
        plans: PLANS,
        usage: { retentionDays: 7 },
      });
      const args = ['plans', 'simulate', '--plan', 'free', '--per-minute', '30', '--per-day', '500', '--from', FROM, '--to', TO, '--config', file];
      const json = await runCli([...args, '--json']);
      expect(json.code, json.stderr).toBe(0);
      const api = await simulate({ plan: 'free', perMinute: 30, perDay: 500, from: FROM, to: TO });
      expect(JSON.parse(json.stdout)).toEqual(api.body);

      const csv = await runCli([...args, '--csv']);
      expect(csv.code, csv.stderr).toBe(0);
      const lines = csv.stdout.trimEnd().split('\r\n');
      expect(lines).toEqual([
        // The consumer each key belongs to now, last (none here).
        'id,name,hour,peak_minute_points,requests,minute_points_refused_at_least,day_points_refused_at_least,points_refused_at_least,hours_affected,consumer',
        `${ids.k2},,,,,override 100,1400,1400,0,`,
        `${ids.k1},,,,,25,0,25,3,`,
        `${ids.k1},,${new Date(D0 + 10 * HOUR_MS).toISOString()},50,200,20,,,,`,
        `${ids.k1},,${new Date(D0 + 11 * HOUR_MS).toISOString()},40,100,10,,,,`,
        `${ids.k1},,${new Date(D0 + 27 * HOUR_MS).toISOString()},35,50,5,,,,`,
        `${ids.k3},,,,,0,override 5000,0,0,`,
      ]);

      // A monthly limit adds its column after the day's; the JSON is the API's.
      const monthly = [
        'plans',
        'simulate',
        '--plan',
        'free',
        '--per-month',
        '400',
        '--from',
        FROM,
        '--to',
        new Date(D0 + 24 * HOUR_MS).toISOString(),
        '--config',
        file,
      ];
      const monthCsv = await runCli([...monthly, '--csv']);
      expect(monthCsv.code, monthCsv.stderr).toBe(0);
      expect(monthCsv.stdout.split('\r\n').slice(0, 2)).toEqual([
        'id,name,hour,peak_minute_points,requests,minute_points_refused_at_least,day_points_refused_at_least,month_points_refused_at_least,points_refused_at_least,hours_affected,consumer',
        `${ids.k2},,,,,,,2000,2000,0,`,
      ]);
      const monthJson = await runCli([...monthly, '--json']);
      expect(JSON.parse(monthJson.stdout)).toEqual(
        (await simulate({ plan: 'free', perMonth: 400, from: FROM, to: new Date(D0 + 24 * HOUR_MS).toISOString() })).body,
      );

      const table = await runCli(args);
      expect(table.code, table.stderr).toBe(0);
      expect(table.stdout).toContain('plan free: perMinute 60 -> 30, perDay 1000 -> 500');
      expect(table.stdout.trimEnd().split('\n').at(-1)).toBe('2 of 4 keys affected, 3 hours, at least 1425 points refused');

      for (const extra of [[], ['--per-minute', '0'], ['--per-minute', 'abc'], ['--per-day', '-3'], ['--per-day', '5', '--from', 'yesterday']]) {
        const r = await runCli(['plans', 'simulate', '--plan', 'free', ...extra, '--config', file]);
        expect(r.code, extra.join(' ')).toBe(2);
        // One error line (a --from refused once the session is open follows the line naming config and Redis).
        expect(withoutAudit(r.stderr).split('\n')).toHaveLength(1);
      }
      const unknown = await runCli(['plans', 'simulate', '--plan', 'gold', '--per-minute', '5', '--quiet', '--config', file]);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toBe('error: no plan named "gold" (configured: free, pro)\n');
      // A plan name is shown, never obeyed, by the terminal.
      const hostile = await runCli(['plans', 'simulate', '--plan', 'g\u001b[2Jx', '--per-minute', '5', '--quiet', '--config', file]);
      expect(hostile.code).toBe(1);
      expect(hostile.stderr).toBe('error: no plan named "g\\x1b[2Jx" (configured: free, pro)\n');
    } finally {
      dir.remove();
    }
  }, 60_000);
});

describe('the answer is bounded and says points', () => {
  it('labels points as points: 52 requests of cost 5 in a minute are 260 points, and a limit of 60 refuses at least 200 points', async () => {
    const { id, key } = await s.gw.createKey({ plan: 'pro' });
    for (let i = 0; i < 52; i++) {
      const res = await fetch(`${s.gw.url}/v1/heavy`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    const now = Date.now();
    const body = { plan: 'pro', perMinute: 60, from: new Date(now - 2 * HOUR_MS).toISOString(), to: new Date(now + HOUR_MS).toISOString() };
    // The busiest minute reaches the ledger with the usage flush, off the request path.
    await s.gw.gateway.flushUsage();
    const res = await simulate(body);
    expect(res.status, res.text).toBe(200);
    const mine = res.body.keys.find((k: { id: string }) => k.id === id) as
      { hours: Array<{ requests: number; peakMinute: number; pointsRefusedAtLeast: number }>; pointsRefusedAtLeast: number } | undefined;
    expect(mine).toBeDefined();
    // The hour's whole demand was 52 requests; the minute window held 260 points; 200 points over the new 60.
    expect(mine!.hours.map((h) => [h.requests, h.peakMinute, h.pointsRefusedAtLeast])).toEqual([[52, 260, 200]]);
    expect(mine!.pointsRefusedAtLeast).toBe(200);
    const dir = tempDir();
    try {
      const file = dir.write('gateway.yaml', {
        upstream: { url: s.up.url },
        redis: { url: s.redis.url, prefix: PREFIX },
        plans: PLANS,
        usage: { retentionDays: 7 },
      });
      const table = await runCli(['plans', 'simulate', '--plan', 'pro', '--per-minute', '60', '--from', body.from, '--to', body.to, '--config', file]);
      expect(table.code, table.stderr).toBe(0);
      expect(table.stdout.trimEnd().split('\n').at(-1)).toBe('1 of 2 keys affected, 1 hours, at least 200 points refused');
      expect(table.stdout).toContain('peak_minute_points');
      expect(table.stdout).not.toMatch(/requests refused/);
    } finally {
      dir.remove();
    }
  }, 60_000);

  it('lists each key with its 10 most refused hours and the count of all, a page of keys at a time by cursor', async () => {
    // Two days before the period above: 30 busy hours for one key, 12 for another, 1 for a third.
    const P0 = D0 - 2 * DAY_MS;
    const k6 = (await s.gw.gateway.admin.issuer.create({ plan: 'free' })).record.id;
    const k7 = (await s.gw.gateway.admin.issuer.create({ plan: 'free' })).record.id;
    const k8 = (await s.gw.gateway.admin.issuer.create({ plan: 'free' })).record.id;
    const store = new RedisUsageStore(s.client, new Keyspace(PREFIX));
    const peaks = [
      ...Array.from({ length: 30 }, (_, h) => ({ id: k6, atMs: P0 + h * HOUR_MS, peak: 100 + h })),
      ...Array.from({ length: 12 }, (_, h) => ({ id: k7, atMs: P0 + h * HOUR_MS, peak: 80 })),
      { id: k8, atMs: P0, peak: 40 },
    ];
    await store.raisePeaks(peaks, 8 * DAY_MS);
    const period = { from: new Date(P0).toISOString(), to: new Date(P0 + 48 * HOUR_MS).toISOString() };
    const first = await simulate({ plan: 'free', perMinute: 30, ...period, limit: 2 });
    expect(first.status, first.text).toBe(200);
    expect(first.body.keys.map((k: { id: string }) => k.id)).toEqual([k6, k7]);
    const [a, b] = first.body.keys;
    expect(a.hoursAffected).toBe(30);
    expect(a.hours).toHaveLength(10);
    // The most refused first: hours 29 down to 20 (peaks 129 to 120, 99 to 90 points over 30).
    expect(a.hours.map((h: { start: string; pointsRefusedAtLeast: number }) => [h.start, h.pointsRefusedAtLeast])).toEqual(
      Array.from({ length: 10 }, (_, i) => [new Date(P0 + (29 - i) * HOUR_MS).toISOString(), 99 - i]),
    );
    expect([b.hoursAffected, b.hours.length]).toEqual([12, 10]);
    expect(first.body.totals).toMatchObject({ keysAffected: 3, hours: 43 });
    expect(first.body.nextCursor).toEqual(expect.any(String));
    // The rest by cursor: the same totals, the next keys (the one left, then the key its own perMinute keeps out).
    const next = await simulate({ cursor: first.body.nextCursor, limit: 2 });
    expect(next.status, next.text).toBe(200);
    expect(next.body.keys.map((k: { id: string }) => k.id)).toEqual([k8, ids.k2]);
    expect(next.body.totals).toEqual(first.body.totals);
    expect(next.body).toMatchObject({ plan: 'free', ...period, simulated: { perMinute: 30 }, nextCursor: null });
    // A what-if no longer kept: 410, ask again.
    for (const k of await s.client.keys(`${PREFIX}report:*`)) await s.client.del(k);
    const gone = await simulate({ cursor: first.body.nextCursor });
    expect(gone.status).toBe(410);
    expect(gone.body.code).toBe('report_expired');
    expect(api.problems).toEqual([]);
  }, 60_000);
});

describe('grouped by consumer: each pool under its consumer as the consumer store has it', () => {
  it("simulates the pools of the consumers whose plan is the plan, each consumer's own limits its override (ended ones not), alike in the report thread, in process and in the CLI", async () => {
    const consumers = s.gw.gateway.consumerAdmin;
    await consumers.create({ id: 'pool_a', name: 'A', plan: 'free' });
    await consumers.create({ id: 'pool_b', name: 'B', plan: 'free', perMinute: 100, perMonth: 50 });
    await consumers.create({ id: 'pool_c', name: 'C', plan: 'pro' });
    // Own limits that ended an hour ago: the plan's apply again.
    await consumers.create({ id: 'pool_d', name: 'D', plan: 'free', perMinute: 500, limitsExpiresAt: new Date(Date.now() - HOUR_MS).toISOString() });
    const key = async () => (await s.gw.gateway.admin.issuer.create({ plan: 'free' })).record.id;
    const [a1, a2, b, c, d] = [await key(), await key(), await key(), await key(), await key()];
    // The ledger as the limit script writes it under a consumer (the attach put each key in its consumer's sets),
    // hour 30 after D0: two keys of pool_a, whose checks reported the pool's window (50 at most), one key each else.
    const store = new RedisUsageStore(s.client, new Keyspace(PREFIX));
    const at = D0 + 30 * HOUR_MS;
    const under: Array<[string, string, number, number]> = [
      [a1, 'pool_a', 80, 50],
      [a2, 'pool_a', 20, 50],
      [b, 'pool_b', 90, 90],
      [c, 'pool_c', 70, 70],
      [d, 'pool_d', 40, 40],
    ];
    for (const [id, consumer] of under) await store.recordKeyConsumer(id, consumer);
    await store.add(
      under.map(([id, consumer, n]) => ({ id, consumer, kind: 'a' as const, atMs: at, n })),
      8 * DAY_MS,
    );
    await store.raisePeaks(
      under.map(([id, consumer, , peak]) => ({ id, consumer, atMs: at, peak })),
      8 * DAY_MS,
    );
    const period = { from: new Date(D0 + 24 * HOUR_MS).toISOString(), to: TO };
    const res = await simulate({ plan: 'free', perMinute: 30, ...period, groupBy: 'consumer' });
    expect(res.status, res.text).toBe(200);
    const hour = new Date(at).toISOString();
    expect(res.body.consumers).toEqual([
      {
        consumer: 'pool_a',
        keys: 2,
        minute: { limit: 30, override: false, pointsRefusedAtLeast: 20 },
        day: null,
        pointsRefusedAtLeast: 20,
        hoursAffected: 1,
        hours: [{ start: hour, requests: 100, peakMinute: 50, pointsRefusedAtLeast: 20 }],
      },
      {
        consumer: 'pool_d',
        keys: 1,
        minute: { limit: 30, override: false, pointsRefusedAtLeast: 10 },
        day: null,
        pointsRefusedAtLeast: 10,
        hoursAffected: 1,
        hours: [{ start: hour, requests: 40, peakMinute: 40, pointsRefusedAtLeast: 10 }],
      },
      // Its own perMinute (100) keeps the minute window; pool_c is on pro.
      {
        consumer: 'pool_b',
        keys: 1,
        minute: { limit: 100, override: true, pointsRefusedAtLeast: 0 },
        day: null,
        pointsRefusedAtLeast: 0,
        hoursAffected: 0,
        hours: [],
      },
    ]);
    expect(res.body.totals).toEqual({ consumersInPlan: 3, consumersAffected: 2, hours: 2, pointsRefusedAtLeast: 30 });
    // A month of 60: pool_a's 100 requests are 40 over it, pool_b keeps its own perMonth, pool_d's 40 fit.
    const month = await simulate({ plan: 'free', perMonth: 60, ...period, groupBy: 'consumer' });
    expect(month.status, month.text).toBe(200);
    expect(month.body.consumers.map((c: { consumer: string; month: unknown }) => [c.consumer, c.month])).toEqual([
      ['pool_a', { limit: 60, override: false, pointsRefusedAtLeast: 40 }],
      ['pool_b', { limit: 50, override: true, pointsRefusedAtLeast: 0 }],
    ]);
    expect(api.problems).toEqual([]);
    // The same from the gateway's own reports (in process) and from the CLI's.
    const local = await s.gw.gateway.usage.simulate({
      plan: 'free',
      current: PLANS.free,
      perMinute: 30,
      fromMs: Date.parse(period.from),
      toMs: Date.parse(period.to),
      groupBy: 'consumer',
    });
    expect(local.consumers).toEqual(res.body.consumers);
    const dir = tempDir();
    try {
      const file = dir.write('gateway.yaml', {
        upstream: { url: s.up.url },
        redis: { url: s.redis.url, prefix: PREFIX },
        plans: PLANS,
        usage: { retentionDays: 7 },
      });
      const cli = await runCli([
        'plans',
        'simulate',
        '--plan',
        'free',
        '--per-minute',
        '30',
        '--from',
        period.from,
        '--to',
        period.to,
        '--group-by',
        'consumer',
        '--json',
        '--config',
        file,
      ]);
      expect(cli.code, cli.stderr).toBe(0);
      expect(JSON.parse(cli.stdout)).toEqual(res.body);
    } finally {
      dir.remove();
    }
  }, 60_000);
});
