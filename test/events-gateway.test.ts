// Events from real gateways on one Redis: two `tollgate serve` processes take 300 concurrent requests of one key whose
// day window holds 100, and the outbox holds exactly one quota.threshold per threshold (80, 100) with its id and
// subject: the limit script's atomic count decides which one request crosses, the outbox's script keeps one copy. And
// a request that crosses nothing sends Redis the same commands with events on as with events off (INFO commandstats).
import { afterAll, describe, expect, it } from 'vitest';
import { Keyspace } from '../src/storage/keyspace.js';
import { minuteStamp } from '../src/events/types.js';
import { assertBuilt, runCli, startServe, tempDir, type CliProcess } from './helpers/cli.js';
import { testConfig } from './helpers/gateway.js';
import { commandCalls, startLimitsGateway } from './helpers/limits.js';
import { useStack } from './helpers/stack.js';
import { TestRedis } from './helpers/redis-server.js';
import { Redis } from 'ioredis';

const stack = useStack({ redis: true, client: true });
const dir = tempDir();
const procs: CliProcess[] = [];
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  dir.remove();
});

describe('two gateway processes, 300 concurrent requests over a day window of 100', () => {
  it('the outbox holds exactly one event per threshold, with its id and subject', async () => {
    assertBuilt();
    const prefix = 'evgw:';
    const file = dir.write('gateway.yaml', {
      server: { port: 0 },
      admin: { port: 0 },
      upstream: { url: stack.up.url },
      redis: { url: stack.redis.url, prefix, commandTimeoutMs: 2000 },
      plans: { hundred: { perMinute: 100_000, perDay: 100 } },
      // The refusals past 100 would strike toward a ban: not what this test counts.
      ban: { enabled: false },
      events: { source: 'urn:tollgate:test', thresholds: [80, 100] },
    });
    const created = await runCli(['keys', 'create', '--plan', 'hundred', '--json', '--yes', '--config', file]);
    expect(created.code, created.stderr).toBe(0);
    const { key, id } = JSON.parse(created.stdout) as { key: string; id: string };
    const [a, b] = await Promise.all([startServe(file), startServe(file)]);
    procs.push(a.proc, b.proc);
    const urls = [a.url, b.url];
    const statuses = await Promise.all(
      Array.from({ length: 300 }, (_, i) => fetch(`${urls[i % 2]}/v1/categories`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status)),
    );
    const counts = new Map<number, number>();
    for (const s of statuses) counts.set(s, (counts.get(s) ?? 0) + 1);
    expect(Object.fromEntries(counts)).toEqual({ 200: 100, 429: 200 });

    const ks = new Keyspace(prefix);
    // The publishes are fire-and-forget: give them a moment to land.
    let rows: Array<[string, string[]]> = [];
    for (let i = 0; i < 100; i++) {
      rows = await stack.client.xrange(ks.eventsOutbox(), '-', '+');
      if (rows.length >= 2) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 300));
    rows = await stack.client.xrange(ks.eventsOutbox(), '-', '+');
    // Two instances publish without waiting: the 100% event may land before the 80% one.
    const entries = rows
      .map(([, f]) => Object.fromEntries(Array.from({ length: f.length / 2 }, (_, j) => [f[2 * j]!, f[2 * j + 1]!])))
      .sort((x, y) => Number(x.percent) - Number(y.percent));
    expect(entries.map((e) => [e.type, e.percent, e.key, e.consumer, e.plan])).toEqual([
      ['quota.threshold', '80', id, '', 'hundred'],
      ['quota.threshold', '100', id, '', 'hundred'],
    ]);
    // The day window's end, on this machine's clock (the gateways'), rounded to the minute: its period in the ids.
    const pttl = await stack.client.pttl(ks.dayWindow({ kind: 'key', id, tag: id }));
    const near = [-60_000, 0, 60_000].map((d) => minuteStamp(Date.now() + pttl + d));
    for (const e of entries) {
      // Each instance works the end out from its own answer: the same minute but within milliseconds of a half minute.
      const period = new RegExp(`^quota-threshold:key:${id}:day:(\\d{8}T\\d{4}Z):${e.percent}$`).exec(e.id!)?.[1];
      expect(near, e.id).toContain(period);
    }
    for (const e of entries) {
      const ce = JSON.parse(e.ce!) as Record<string, unknown>;
      expect(ce).toMatchObject({
        specversion: '1.0',
        id: e.id,
        source: 'urn:tollgate:test',
        type: 'quota.threshold',
        subject: `key:${id}`,
        datacontenttype: 'application/json',
      });
      expect(ce.data).toMatchObject({ key: id, plan: 'hundred', window: 'day', limit: 100, percent: Number(e.percent), threshold: Number(e.percent) });
    }
    // Each event's seen marker, so a late retry of either appends nothing.
    for (const e of entries) expect(await stack.client.exists(ks.eventSeen(e.id!))).toBe(1);
    // Stopped now: their timers (the ledger's peakMinute flush, the events thread's polls) would be counted in the
    // INFO commandstats comparison below.
    await Promise.all(procs.splice(0).map((p) => p.stop()));
  }, 120_000);
});

describe('a consumer suspended from the CLI', () => {
  it('is a consumer.suspended event in the outbox, published before the command exits; suspending it again is none', async () => {
    assertBuilt();
    const prefix = 'evcli:';
    const file = dir.write('cli.yaml', {
      redis: { url: stack.redis.url, prefix },
      events: { source: 'urn:tollgate:cli' },
    });
    const run = async (...args: string[]) => {
      const r = await runCli([...args, '--yes', '--config', file]);
      expect(r.code, r.stderr).toBe(0);
      return r;
    };
    await run('consumers', 'create', '--id', 'acme', '--name', 'Acme', '--plan', 'free');
    await run('consumers', 'suspend', 'acme');
    await run('consumers', 'suspend', 'acme');
    const ks = new Keyspace(prefix);
    const rows = await stack.client.xrange(ks.eventsOutbox(), '-', '+');
    expect(rows).toHaveLength(1);
    const f = rows[0]![1];
    const ce = JSON.parse(f[f.indexOf('ce') + 1]!) as Record<string, unknown>;
    expect(ce).toMatchObject({ type: 'consumer.suspended', subject: 'consumer:acme', source: 'urn:tollgate:cli', data: { consumer: 'acme' } });
    expect(ce.id).toMatch(/^consumer-suspended:acme:\d+$/);
  }, 60_000);
});

describe('a request that crosses nothing', () => {
  it('sends Redis the same commands with events on as with events off', async () => {
    // A Redis of its own: the serve processes above still flush in the background on the stack's.
    const redis = await TestRedis.start();
    const client = new Redis(redis.port, '127.0.0.1');
    const measure = async (prefix: string, events: boolean): Promise<Record<string, number>> => {
      const gw = await startLimitsGateway(
        testConfig({
          upstream: { url: stack.up.url },
          redis: { url: redis.url, prefix, commandTimeoutMs: 2000 },
          plans: { big: { perMinute: 100_000, perDay: 1_000_000 } },
          ...(events ? { events: { thresholds: [1, 80, 100] } } : {}),
        }),
        // Delivery polls the outbox on a thread of its own: Redis commands of its own, not the request path's.
        { delivery: false },
      );
      try {
        expect(gw.gateway.events !== undefined).toBe(events);
        const { key } = await gw.createKey({ plan: 'big' });
        const get = () => fetch(`${gw.url}/v1/categories`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status);
        // The first request looks the key up; from the second on the key is cached. None crosses 1% of a million.
        expect(await get()).toBe(200);
        const before = await commandCalls(client);
        for (let i = 0; i < 50; i++) expect(await get()).toBe(200);
        const after = await commandCalls(client);
        const delta: Record<string, number> = {};
        for (const [cmd, n] of after) if (cmd !== 'info' && n !== (before.get(cmd) ?? 0)) delta[cmd] = n - (before.get(cmd) ?? 0);
        return delta;
      } finally {
        await gw.close();
      }
    };
    try {
      // Off first: no producer subscribed in this process yet.
      const off = await measure('evoff:', false);
      const on = await measure('evon:', true);
      expect(on).toEqual(off);
      expect(on.xadd ?? 0).toBe(0);
      expect(on.eval ?? 0).toBe(0);
      expect(Object.keys(off).length).toBeGreaterThan(0);
    } finally {
      client.disconnect();
      await redis.stop();
    }
  });
});
