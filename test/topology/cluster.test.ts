// Tollgate on a Redis Cluster (3 primaries, 3 replicas; real redis-server processes in cluster mode, on loopback):
// the topology in the config, refused when it does not match the server; the gateway's core checks on the cluster
// (authentication, both windows, bans, revocation across two instances, the anonymous limit), limits exact across
// two instances under concurrency, and the key commands of the CLI.
import { planRequest } from '../../src/limits/windows.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { composeGateway } from '../../src/compose.js';
import { startPetstore } from '../../src/petstore/server.js';
import type { Cluster, Redis } from 'ioredis';
import { RedisLimiterStore } from '../../src/limits/redis-store.js';
import { Keyspace } from '../../src/storage/keyspace.js';
import { connectRedis } from '../../src/storage/redis.js';
import { runCli, tempDir, withoutAudit } from '../helpers/cli.js';
import { silentLogger, testConfig } from '../helpers/gateway.js';
import { metricValue, startLimitsGateway, type LimitsGateway } from '../helpers/limits.js';
import { TestRedisCluster } from '../helpers/redis-cluster.js';
import { TestRedis } from '../helpers/redis-server.js';
import { TestUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';
import { keySubject } from '../../src/limits/subject.js';

let cluster: TestRedisCluster;
let up: TestUpstream;
const gateways: LimitsGateway[] = [];

beforeAll(async () => {
  [cluster, up] = await Promise.all([TestRedisCluster.start({ primaries: 3, replicas: 1 }), TestUpstream.start()]);
}, 60_000);

afterAll(async () => {
  for (const g of gateways) await g.close();
  await up?.close();
  await cluster?.stop();
});

function clusterConfig(prefix: string, extra: Record<string, unknown> = {}) {
  return testConfig({
    upstream: { url: up.url },
    // The guarantees hold "while Redis answers within commandTimeoutMs": room for a loaded 2-core CI box (a run beside
    // other heavy work timed out a key write at 500 ms), as the fleet test gives it.
    redis: { cluster: { nodes: cluster.urls.slice(0, 2) }, prefix, commandTimeoutMs: 1000 },
    plans: { free: { perMinute: 3, perDay: 1000 }, busy: { perMinute: 50, perDay: 100_000 } },
    ban: { threshold: 3, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 600 },
    anonymous: { perMinute: 2 },
    ...extra,
  });
}

async function gateway(prefix: string, extra: Record<string, unknown> = {}): Promise<LimitsGateway> {
  const g = await startLimitsGateway(clusterConfig(prefix, extra));
  gateways.push(g);
  return g;
}

async function get(g: LimitsGateway, key?: string): Promise<{ status: number; code?: string; headers: Headers }> {
  const res = await fetch(`${g.url}/v1/categories`, { headers: key ? { authorization: `Bearer ${key}` } : {}, signal: AbortSignal.timeout(5000) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, ...(res.status === 200 ? {} : { code: (JSON.parse(text) as { code: string }).code }) };
}

describe('the redis section names one topology', () => {
  it('refuses two topologies at once, none, mixed TLS and half a client certificate, naming the field', () => {
    const check = (redis: unknown) => {
      try {
        testConfig({ upstream: { url: 'http://127.0.0.1:9' }, redis });
        return 'valid';
      } catch (err) {
        return (err as Error).message;
      }
    };
    expect(check({ url: 'redis://a:1', cluster: { nodes: ['redis://b:1'] } })).toContain('redis.cluster: only one of url, cluster and sentinel may be set');
    expect(check({ prefix: 'x:' })).toContain('redis: expected one of url');
    expect(check({ cluster: { nodes: ['redis://a:1', 'rediss://b:1'] } })).toContain('redis.cluster: mixes redis:// and rediss://');
    expect(check({ url: 'redis://a:1', tls: { caFile: '/x' } })).toContain('redis.tls: TLS options are set but no URL is rediss://');
    expect(check({ url: 'rediss://a:1', tls: { certFile: '/x' } })).toContain('redis.tls.keyFile: certFile and keyFile go together');
    expect(check({ sentinel: { masterName: 'm', sentinels: ['redis://a:26379'] }, username: 'tollgate', password: 'pw' })).toBe('valid');
  });

  it('a standalone URL that reaches a cluster node, or cluster nodes that are a standalone server: the start fails naming the field', async () => {
    const config = testConfig({ upstream: { url: up.url }, redis: { url: cluster.urls[0] } });
    await expect(composeGateway({ config, logger: silentLogger })).rejects.toThrow(
      /redis\.url \(redis:\/\/127\.0\.0\.1:\d+\) is a Redis Cluster node: set redis\.cluster\.nodes/,
    );
    const standalone = await TestRedis.start();
    try {
      const wrong = testConfig({ upstream: { url: up.url }, redis: { cluster: { nodes: [standalone.url] } } });
      await expect(composeGateway({ config: wrong, logger: silentLogger })).rejects.toThrow(/redis\.cluster\.nodes\[0\] .* is not a cluster node/);
    } finally {
      await standalone.stop();
    }
  });
});

describe('the gateway on the cluster', () => {
  it('authenticates, meters both windows and bans (the limit script runs on one slot: a cluster refuses any other)', async () => {
    const g = await gateway('core:');
    const { key } = await g.createKey({ plan: 'free' });
    for (let i = 0; i < 3; i++) expect((await get(g, key)).status).toBe(200);
    const limited = await get(g, key);
    expect(limited).toMatchObject({ status: 429, code: 'rate_limit_exceeded' });
    expect(limited.headers.get('ratelimit-policy')).toBe('"minute";q=3;w=60, "day";q=1000;w=86400');
    await get(g, key);
    expect(await get(g, key)).toMatchObject({ status: 429, code: 'api_key_banned' });
    expect(await get(g, 'tg_bogus')).toMatchObject({ status: 401 });
  });

  it('revocation on one instance reaches another within a second (pub/sub on the cluster)', async () => {
    const [a, b] = [await gateway('revoke:'), await gateway('revoke:')];
    const { id, key } = await a.createKey({ plan: 'busy' });
    expect((await get(a, key)).status).toBe(200);
    expect((await get(b, key)).status).toBe(200);
    const t0 = Date.now();
    await a.gateway.admin.lifecycle.revoke(id);
    await waitFor(async () => (await get(b, key)).status === 401, 'the other instance refuses the revoked key', 30_000, 20);
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it('the anonymous limit is shared through the cluster', async () => {
    const [a, b] = [await gateway('anon:'), await gateway('anon:')];
    expect((await get(a)).status).toBe(401);
    expect((await get(b)).status).toBe(401);
    expect(await get(a)).toMatchObject({ status: 429, code: 'rate_limit_exceeded' });
  });

  it('is exact across two instances: 300 concurrent requests for one key with perMinute 50 admit exactly 50', async () => {
    const [a, b] = [await gateway('exact:'), await gateway('exact:')];
    const { key } = await a.createKey({ plan: 'busy' });
    // Both instances know the key before the burst, so the burst measures the limit, not the key lookup.
    await waitFor(async () => (await get(b, key)).status === 200, 'the second instance knows the key', 30_000, 20);
    const statuses = await Promise.all(Array.from({ length: 300 }, (_, i) => get(i % 2 ? a : b, key).then((r) => r.status)));
    // One admitted request went before the burst.
    expect(statuses.filter((s) => s === 200)).toHaveLength(49);
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
  });
});

describe('limit checks on the cluster', () => {
  it("go straight to the connection of their slot's primary; a stale slot table (MOVED) sends the check again through the cluster client, counted once", async () => {
    const connection = connectRedis({ redis: { cluster: { nodes: cluster.urls } }, commandTimeoutMs: 1000, purpose: 'gateway' });
    try {
      await connection.waitForReady(10_000);
      const ks = new Keyspace('route:');
      const store = new RedisLimiterStore(connection.client, ks, () => 0, connection.clientForSlotOf);
      const limits = { perMinute: 100, perDay: 1000 };
      const ban = { threshold: 3, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 600 };
      const record = ks.keyRecord('route-key');
      const c = connection.client as unknown as Cluster;
      // Every primary's connection up (a node's connection opens with the first command the cluster client routes there).
      await Promise.all(c.nodes('master').map((n) => n.ping()));
      const owner = await cluster.primaryOf(record);
      const direct = connection.clientForSlotOf(record) as unknown as Redis;
      expect(direct).not.toBe(c);
      expect(direct.options.port).toBe(owner.port);
      expect((await store.check(keySubject('route-key'), planRequest(limits), ban)).windows[0]!.used).toBe(1);

      // The client's table says another primary owns the slot (as after a resharding it has not yet seen).
      const slot = Number(await c.cluster('KEYSLOT', record));
      const other = c.nodes('master').find((n) => n.options.port !== owner.port)!;
      c.slots[slot] = [`${other.options.host}:${other.options.port}`];
      expect(connection.clientForSlotOf(record)).toBe(other);
      const d = await store.check(keySubject('route-key'), planRequest(limits), ban);
      expect(d.outcome).toBe('admitted');
      expect(d.windows[0]!.used).toBe(2);
      // The cluster client followed the redirection and mended its table: the next check goes straight to the owner.
      expect(c.slots[slot]?.[0]).toBe(`127.0.0.1:${owner.port}`);
      expect((connection.clientForSlotOf(record) as unknown as Redis).options.port).toBe(owner.port);
      expect((await store.check(keySubject('route-key'), planRequest(limits), ban)).windows[0]!.used).toBe(3);
    } finally {
      await connection.close();
    }
  });
});

describe('the key commands on the cluster', () => {
  it('create, list, show, rotate, unban and revoke through the config cluster section', async () => {
    const dir = tempDir();
    try {
      const file = dir.write('gateway.yaml', { upstream: { url: up.url }, redis: { cluster: { nodes: [cluster.urls[0]] }, prefix: 'cli:' } });
      const cli = (...args: string[]) => runCli(['keys', ...args, '--config', file]);
      const ids: string[] = [];
      // Keys until their records sit on at least two primaries (three random ids all on one is one chance in nine).
      for (
        let i = 0;
        i < 12 &&
        (ids.length < 3 || new Set(await Promise.all(ids.map(async (id) => (await cluster.primaryOf(new Keyspace('cli:').keyRecord(id))).port))).size < 2);
        i++
      ) {
        const created = await cli('create', '--plan', 'free', '--json');
        expect(withoutAudit(created.stderr)).toBe('');
        const parsed = JSON.parse(created.stdout) as { id: string; replication?: { expected: number; acked: number } };
        // Each primary holding the record, its hash link or the id set has a replica, and it confirmed the write.
        expect(parsed.replication).toEqual({ expected: 1, acked: 1 });
        ids.push(parsed.id);
      }
      // Records of different ids live in different slots: list reads them one by one.
      const slots = await Promise.all(ids.map(async (id) => cluster.primaryOf(new Keyspace('cli:').keyRecord(id))));
      expect(new Set(slots.map((n) => n.port)).size).toBeGreaterThan(1);
      const listed = await cli('list', '--json');
      expect(listed.code).toBe(0);
      expect((JSON.parse(listed.stdout) as Array<{ id: string }>).map((k) => k.id).sort()).toEqual([...ids].sort());
      expect((await cli('show', ids[0]!)).code).toBe(0);
      expect((await cli('rotate', ids[0]!, '--grace', '10')).code).toBe(0);
      expect((await cli('unban', ids[1]!)).code).toBe(0);
      expect((await cli('revoke', ids[2]!)).code).toBe(0);
      const after = JSON.parse((await cli('list', '--json')).stdout) as Array<{ id: string; status: string }>;
      expect(after.find((k) => k.id === ids[2])?.status).toBe('revoked');
    } finally {
      dir.remove();
    }
  });
});

describe('a primary failover on the cluster', () => {
  it("killing the primary of a busy key's slot under load: answers by failMode, never a 5xx, recovery by itself, exact limits after", async () => {
    // A plan the load never exhausts, so every request asks Redis (a refused or banned key is answered from memory).
    const g = await gateway('failover:', {
      redis: { cluster: { nodes: cluster.urls }, prefix: 'failover:', commandTimeoutMs: 200, failMode: 'open' },
      plans: { big: { perMinute: 1_000_000, perDay: 10_000_000 } },
    });
    const { id, key } = await g.createKey({ plan: 'big' });
    expect((await get(g, key)).status).toBe(200);
    const victim = await cluster.primaryOf(new Keyspace('failover:').keyRecord(id));

    const statuses: number[] = [];
    let slowest = 0;
    let running = true;
    const load = (async () => {
      for (let i = 0; running && i < 3000; i++) {
        const t = Date.now();
        statuses.push(
          await get(g, key).then(
            (r) => r.status,
            () => 0,
          ),
        );
        slowest = Math.max(slowest, Date.now() - t);
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    // A key created just before the kill, in the victim's slots: create waits until a replica has its writes.
    let justBefore: { id: string; key: string } | undefined;
    for (let i = 0; i < 50 && !justBefore; i++) {
      const k = await g.createKey({ plan: 'big' });
      if ((await cluster.primaryOf(new Keyspace('failover:').keyRecord(k.id))) === victim) justBefore = k;
    }
    expect(justBefore, 'a key whose record lives on the victim').toBeDefined();
    const killedAt = Date.now();
    await victim.kill();
    // /readyz names the silent primary by the slots it served (no address in the body), until a replica takes over.
    const readyz = async () => {
      const res = await fetch(`${g.url}/readyz`, { signal: AbortSignal.timeout(3000) });
      return { status: res.status, body: (await res.json()) as { reasons?: { redis?: string } } };
    };
    // (Until the failover: a 503 may also come first from the write probe alone, when the probe key's slot is the
    // killed primary's; the one that names the primary is awaited.)
    let named: string | undefined;
    await waitFor(
      async () => {
        const r = await readyz();
        if (r.status === 503 && r.body.reasons?.redis?.startsWith('no answer from')) named = r.body.reasons.redis;
        return named !== undefined;
      },
      '/readyz names the killed primary',
      30_000,
      20,
    );
    expect(named).toMatch(/^no answer from the primary of slots \d+(-\d+)?(,\d+(-\d+)?)*$/);
    // Recovered by itself: a replica took the slot over and the gateway's limit checks reach it again.
    await waitFor(
      async () =>
        metricValue(await g.metrics.registry.metrics(), 'tollgate_redis_degraded') === 0 &&
        (await cluster.primaryOf(new Keyspace('failover:').keyRecord(id))) !== victim,
      'a replica promoted and degraded mode over',
      30_000,
      100,
    );
    const recoveredAt = Date.now();
    running = false;
    await load;
    await waitFor(async () => (await readyz()).status === 200, '/readyz ready again once the slots have a primary', 30_000, 100);
    expect((await get(g, justBefore!.key)).status).toBe(200);
    // failMode open: while the slot had no primary, the instance metered in memory; never a 5xx, within the bound.
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(slowest).toBeLessThan(1500);
    console.log(
      `cluster failover: recovered after ${recoveredAt - killedAt} ms; ${statuses.length} requests, ${statuses.filter((s) => s === 200).length} answered 200, slowest ${slowest} ms`,
    );

    // Exact again: a fresh key on a fresh gateway pair gets exactly its perMinute.
    const [a, b] = [await gateway('failover2:'), await gateway('failover2:')];
    const fresh = await a.createKey({ plan: 'busy' });
    await waitFor(async () => (await get(b, fresh.key)).status === 200, 'the second instance knows the key', 30_000, 20);
    const burst = await Promise.all(Array.from({ length: 120 }, (_, i) => get(i % 2 ? a : b, fresh.key).then((r) => r.status)));
    expect(burst.filter((s) => s === 200)).toHaveLength(49);
  }, 90_000);
});

describe('moving keys from a standalone Redis to the cluster', () => {
  it('keys export, then keys import: active, rotated-in-grace and revoked keys keep their meaning; a second import changes nothing', async () => {
    const standalone = await TestRedis.start();
    const dir = tempDir();
    try {
      const oldFile = dir.write('old.yaml', { upstream: { url: up.url }, redis: { url: standalone.url, prefix: 'move:' } });
      // Every node as a seed: the failover test above killed one of them.
      const newFile = dir.write('new.yaml', { upstream: { url: up.url }, redis: { cluster: { nodes: cluster.urls }, prefix: 'move:' } });
      const cli = (file: string, ...args: string[]) => runCli(['keys', ...args, '--config', file]);
      const create = async () => JSON.parse((await cli(oldFile, 'create', '--plan', 'free', '--json')).stdout) as { id: string; key: string };
      const active = await create();
      const rotated = await create();
      const revoked = await create();
      const newKey = (JSON.parse((await cli(oldFile, 'rotate', rotated.id, '--grace', '600', '--json')).stdout) as { key: string }).key;
      expect((await cli(oldFile, 'revoke', revoked.id)).code).toBe(0);

      const exported = await cli(oldFile, 'export', '--out', `${dir.dir}/keys.jsonl`);
      expect(exported.code).toBe(0);
      expect(exported.stderr).toContain('Exported 3 key records');
      const text = (await import('node:fs')).readFileSync(`${dir.dir}/keys.jsonl`, 'utf8');
      for (const k of [active, rotated, revoked]) expect(text).not.toContain(k.key);
      expect(text).not.toContain(newKey);

      const first = await cli(newFile, 'import', `${dir.dir}/keys.jsonl`);
      expect(withoutAudit(first.stderr)).toBe('');
      expect(first.stdout).toContain('Imported 3, unchanged 0.');
      const again = await cli(newFile, 'import', `${dir.dir}/keys.jsonl`);
      expect(again.code).toBe(0);
      expect(again.stdout).toContain('Imported 0, unchanged 3.');

      const g = await gateway('move:', { redis: { cluster: { nodes: cluster.urls }, prefix: 'move:' }, plans: { free: { perMinute: 100, perDay: 1000 } } });
      expect((await get(g, active.key)).status).toBe(200);
      expect((await get(g, newKey)).status).toBe(200);
      expect((await get(g, rotated.key)).status).toBe(200); // the old key, in its grace period
      expect((await get(g, revoked.key)).status).toBe(401);

      const bad = dir.write('bad.jsonl', `${text.split('\n')[0]}\n{"id":"x"}\nnot json\n`);
      const refused = await cli(newFile, 'import', bad);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('line 2: ');
      expect(refused.stderr).toContain('line 3: not JSON');
      expect(refused.stdout).toContain('Imported 0, unchanged 1, refused 2.');
    } finally {
      dir.remove();
      await standalone.stop();
    }
  });
});

describe('resharding on the cluster', () => {
  it("moving a busy key's slot to another primary under load: every request answered 200, the key's windows move with it", async () => {
    const g = await gateway('reshard:', {
      redis: { cluster: { nodes: cluster.urls }, prefix: 'reshard:', commandTimeoutMs: 500, failMode: 'open' },
      plans: { big: { perMinute: 1_000_000, perDay: 10_000_000 } },
    });
    const { id, key } = await g.createKey({ plan: 'big' });
    expect((await get(g, key)).status).toBe(200);
    const recordKey = new Keyspace('reshard:').keyRecord(id);
    const from = await cluster.primaryOf(recordKey);
    const to = (await cluster.primaries()).find((n) => n !== from)!;
    const probe = cluster.client();
    const slot = Number(await probe.cluster('KEYSLOT', recordKey));

    const statuses: number[] = [];
    let running = true;
    const load = (async () => {
      for (let i = 0; running && i < 3000; i++) {
        statuses.push(
          await get(g, key).then(
            (r) => r.status,
            () => 0,
          ),
        );
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    await new Promise((r) => setTimeout(r, 200)); // traffic before the move starts
    const moved = await cluster.migrateSlot(slot, from, to);
    await new Promise((r) => setTimeout(r, 300)); // and after it
    running = false;
    await load;
    probe.disconnect();

    expect(moved).toBeGreaterThanOrEqual(3); // the record and both windows at least
    expect(await cluster.primaryOf(recordKey)).toBe(to);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    // The minute window moved with the slot: what the last answer says is used counts every admitted request.
    const last = await get(g, key);
    const remaining = Number(last.headers.get('x-ratelimit-remaining'));
    expect(1_000_000 - remaining).toBeGreaterThanOrEqual(statuses.length - 5);
  }, 60_000);
});

describe('the pet store on the cluster', () => {
  it('serves categories with ids from its counter, from the redis section of the config', async () => {
    const ps = await startPetstore({ host: '127.0.0.1', port: 0, redis: { cluster: { nodes: cluster.urls } }, prefix: 'pets:', logger: silentLogger });
    try {
      const post = async (name: string) =>
        (await (
          await fetch(`${ps.url}/v1/categories`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name }) })
        ).json()) as {
          id: number;
        };
      const a = await post('Dog');
      const b = await post('Cat');
      expect(b.id).toBe(a.id + 1);
      const list = (await (await fetch(`${ps.url}/v1/categories`)).json()) as Array<{ name: string }>;
      expect(list.map((c) => c.name)).toEqual(['Dog', 'Cat']);
      expect((await fetch(`${ps.url}/readyz`)).status).toBe(200);
    } finally {
      await ps.close();
    }
  });
});

describe("the cluster's memory policy and persistence", () => {
  it('are read on every primary: one evicting primary makes /readyz 503; primaries without persistence are reported', async () => {
    const g = await startLimitsGateway(clusterConfig('policy:'), { memoryPolicyCheckMs: 100 });
    gateways.push(g);
    const readyz = async () => {
      const res = await fetch(`${g.url}/readyz`, { signal: AbortSignal.timeout(3000) });
      return { status: res.status, body: (await res.json()) as { reasons?: { redis?: string } } };
    };
    expect((await readyz()).status).toBe(200);
    await waitFor(async () => metricValue(await g.metrics.registry.metrics(), 'tollgate_redis_persistence_disabled') === 1, 'no persistence reported');
    // Every primary but the last keeps noeviction: a check that asked one node it picked would miss it two times in three.
    const primaries = await cluster.primaries();
    const evicting = primaries.at(-1)!;
    const c = evicting.client();
    try {
      await c.config('SET', 'maxmemory-policy', 'allkeys-lru');
      await waitFor(async () => (await readyz()).status === 503, 'not ready while one primary may evict', 30_000, 50);
      // And every time: each /readyz reads all primaries (asking one random node would pass two times in three).
      for (let i = 0; i < 6; i++) {
        const r = await readyz();
        expect(r.status).toBe(503);
        expect(r.body.reasons?.redis).toContain('maxmemory-policy allkeys-lru');
      }
    } finally {
      await c.config('SET', 'maxmemory-policy', 'noeviction');
      c.disconnect();
    }
    await waitFor(async () => (await readyz()).status === 200, 'ready again with noeviction everywhere', 30_000, 50);
  });
});

describe('a failover does not undo a key change', () => {
  it("a revoked key stays revoked, and a rotated key's old value stays refused, after their primary is killed", async () => {
    const prefix = 'undo:';
    const ks = new Keyspace(prefix);
    const dir = tempDir();
    try {
      const file = dir.write('gateway.yaml', {
        upstream: { url: up.url },
        redis: { cluster: { nodes: cluster.urls }, prefix },
        plans: { free: { perMinute: 100, perDay: 1000 } },
      });
      const cli = async (...args: string[]) => {
        const r = await runCli(['keys', ...args, '--json', '--config', file]);
        if (r.code !== 0) throw new Error(`keys ${args.join(' ')}: ${r.stderr}`);
        return JSON.parse(r.stdout) as { id: string; key: string; replication: unknown };
      };
      // Two keys whose records live on one primary that has a replica (an earlier test left one without).
      const withReplica = async (node: Awaited<ReturnType<typeof cluster.primaryOf>>) => {
        const c = node.client();
        try {
          return /^connected_slaves:[1-9]/m.test(await c.info('replication'));
        } finally {
          c.disconnect();
        }
      };
      const created: Array<{ id: string; key: string }> = [];
      let victim: Awaited<ReturnType<typeof cluster.primaryOf>> | undefined;
      for (let i = 0; i < 60 && created.length < 2; i++) {
        const k = await cli('create', '--plan', 'free');
        const node = await cluster.primaryOf(ks.keyRecord(k.id));
        if (victim === undefined && (await withReplica(node))) victim = node;
        if (node === victim) created.push(k);
      }
      expect(created, 'two keys on a primary with a replica').toHaveLength(2);
      const [revokedKey, rotatedKey] = created as [{ id: string; key: string }, { id: string; key: string }];
      expect((await cli('revoke', revokedKey.id)).replication).toEqual({ expected: 1, acked: 1 });
      const rotated = await cli('rotate', rotatedKey.id);
      expect(rotated.replication).toEqual({ expected: 1, acked: 1 });
      // At once: whatever the replica has now is all the new primary will have.
      await victim!.kill();
      await waitFor(async () => (await cluster.primaryOf(ks.keyRecord(revokedKey.id))) !== victim, 'a replica took over the slot', 20_000, 100);
      // A gateway that never cached either key: what it answers is what the promoted replica holds.
      const g = await gateway(prefix, {
        redis: { cluster: { nodes: cluster.urls }, prefix, commandTimeoutMs: 1000 },
        plans: { free: { perMinute: 100, perDay: 1000 } },
      });
      await waitFor(async () => (await get(g, rotated.key)).status === 200, 'the rotated key answered by the promoted replica', 30_000, 100);
      expect(await get(g, revokedKey.key)).toMatchObject({ status: 401 });
      expect(await get(g, rotatedKey.key)).toMatchObject({ status: 401 });
    } finally {
      dir.remove();
    }
  }, 90_000);
});
