// Key administration (KeyAdmin), the one service the CLI and `tollgate dev` change keys through: its rules and error
// codes in memory, ban state on Redis's own clock, and the Redis key store's reads that must survive a corrupt record
// (`keys list`, `keys show` through the built CLI) and a key set larger than one SSCAN page.
import { planRequest } from '../src/limits/windows.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { KeyLimitAdmin } from '../src/limits/key-admin.js';
import { KeyAdmin } from '../src/keys/admin.js';
import { KeyAdminError } from '../src/keys/admin-errors.js';
import { hashKey } from '../src/keys/format.js';
import { MemoryKeyStore } from '../src/keys/memory-store.js';
import { RedisKeyStore } from '../src/keys/redis-store.js';
import { KeyVerifier } from '../src/keys/verifier.js';
import { MemoryLimiterStore, memoryBanStore } from '../src/limits/memory-store.js';
import { RedisBanStore } from '../src/limits/redis-store.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { connectRedis, type RedisConnection } from '../src/storage/redis.js';
import { ManualClock } from '../src/util/clock.js';
import { runCli, tempDir, withoutAudit } from './helpers/cli.js';
import { testConfig } from './helpers/gateway.js';
import { TestRedis } from './helpers/redis-server.js';
import { keySubject } from '../src/limits/subject.js';

const config = testConfig({
  upstream: { url: 'http://127.0.0.1:9' },
  plans: { free: { perMinute: 2, perDay: 100 }, pro: { perMinute: 100, perDay: 10_000 } },
  ban: { threshold: 1, windowSeconds: 60, durationsSeconds: [60, 600], resetAfterSeconds: 3600 },
});
const policy = { plans: () => config.plans, ban: () => config.ban };

function memoryAdmin() {
  const clock = new ManualClock(Date.UTC(2026, 5, 1));
  const store = new MemoryKeyStore(() => clock.now());
  const limits = new MemoryLimiterStore(clock);
  const admin = new KeyAdmin(store, clock, policy);
  const keyLimits = new KeyLimitAdmin(admin, memoryBanStore(limits), policy);
  return { clock, store, limits, admin, keyLimits };
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'resolved';
  } catch (err) {
    return err instanceof KeyAdminError ? err.code : `other: ${String(err)}`;
  }
}

describe('KeyAdmin (memory stores)', () => {
  it('create refuses a plan that is not configured, naming the plans', async () => {
    const { admin } = memoryAdmin();
    await expect(admin.issuer.create({ plan: 'gold' })).rejects.toThrow('unknown plan "gold"; plans: free, pro');
    expect(await codeOf(admin.issuer.create({ plan: 'gold' }))).toBe('unknown_plan');
  });

  it('update changes plan, name, overrides and expiry in place; null removes; the key keeps working and every instance hears of it', async () => {
    const { admin, store, clock } = memoryAdmin();
    const verifier = new KeyVerifier(store, clock);
    const heard: string[] = [];
    verifier.onChange((id) => void (id && heard.push(id)));
    await verifier.start();
    const { key, record } = await admin.issuer.create({ plan: 'free', name: 'acme', perMinute: 5 });
    const { record: updated, replication } = await admin.lifecycle.update(record.id, {
      plan: 'pro',
      name: null,
      perMinute: null,
      perDay: 77,
      expiresAt: '2030-01-01T00:00:00.000Z',
    });
    expect(replication).toEqual({ expected: 0, acked: 0 });
    expect(updated).toEqual({ ...record, plan: 'pro', perDay: 77, expiresAt: '2030-01-01T00:00:00.000Z', name: undefined, perMinute: undefined });
    expect(updated).not.toHaveProperty('name');
    expect(updated).not.toHaveProperty('perMinute');
    expect(await admin.listing.get(record.id)).toEqual(updated);
    expect(heard).toEqual([record.id]);
    const verified = await verifier.verify(key);
    expect(verified.ok && verified.key).toMatchObject({ plan: 'pro', perDay: 77 });
    expect(await codeOf(admin.lifecycle.update(record.id, { plan: 'gold' }))).toBe('unknown_plan');
    expect(await codeOf(admin.lifecycle.update('key_nope', { plan: 'pro' }))).toBe('not_found');
    await admin.lifecycle.revoke(record.id);
    expect(await codeOf(admin.lifecycle.update(record.id, { plan: 'free' }))).toBe('revoked');
    expect(await codeOf(admin.lifecycle.rotate(record.id, 0))).toBe('revoked');
  });

  it('a change that another change overtook between its read and its write is made again on the new record, never over it', async () => {
    const { admin, store } = memoryAdmin();
    const { key, record } = await admin.issuer.create({ plan: 'free', name: 'raced' });
    // The store lets one revoke in right after the update read the record: the update must not write "active" back.
    let injected = false;
    const read = store.getVersioned.bind(store);
    store.getVersioned = async (id) => {
      const r = await read(id);
      if (!injected) {
        injected = true;
        store.getVersioned = read;
        await admin.lifecycle.revoke(id);
      }
      return r;
    };
    expect(await codeOf(admin.lifecycle.update(record.id, { name: 'renamed' }))).toBe('revoked');
    expect(await admin.listing.get(record.id)).toMatchObject({ status: 'revoked', name: 'raced' });
    expect((await store.findByHash(hashKey(key)))?.key).toBeUndefined();

    // Two changes of different fields, the second overtaking the first: both stand.
    const other = await admin.issuer.create({ plan: 'free' });
    injected = false;
    store.getVersioned = async (id) => {
      const r = await read(id);
      if (!injected) {
        injected = true;
        store.getVersioned = read;
        await admin.lifecycle.update(id, { perDay: 9 });
      }
      return r;
    };
    await admin.lifecycle.update(other.record.id, { name: 'both' });
    expect(await admin.listing.get(other.record.id)).toMatchObject({ name: 'both', perDay: 9 });
  });

  it('statusOf: revoked wins over expired; expired once expiresAt has passed', async () => {
    const { admin, clock } = memoryAdmin();
    const { record } = await admin.issuer.create({ plan: 'free', expiresAt: new Date(clock.now() + 1000).toISOString() });
    expect(admin.listing.statusOf(record)).toBe('active');
    clock.advance(1000);
    expect(admin.listing.statusOf(record)).toBe('expired');
    await admin.lifecycle.revoke(record.id);
    expect(admin.listing.statusOf((await admin.listing.get(record.id))!)).toBe('revoked');
  });

  it('banState follows the limit check: banned until its end, the level kept until resetAfter past it; unban clears both', async () => {
    const { admin, keyLimits, limits, clock } = memoryAdmin();
    const { record } = await admin.issuer.create({ plan: 'free' });
    const lim = { perMinute: 1, perDay: 100 };
    await limits.check(keySubject(record.id), planRequest(lim), config.ban);
    expect((await limits.check(keySubject(record.id), planRequest(lim), config.ban)).outcome).toBe('banned_now');
    expect(await keyLimits.banState(record.id)).toEqual({ bannedUntil: new Date(clock.now() + 60_000).toISOString(), banLevel: 1 });
    clock.advance(61_000);
    expect(await keyLimits.banState(record.id)).toEqual({ bannedUntil: null, banLevel: 1 });
    clock.advance(3600_000);
    expect(await keyLimits.banState(record.id)).toEqual({ bannedUntil: null, banLevel: 0 });
    clock.set(Date.UTC(2026, 5, 2));
    await limits.check(keySubject(record.id), planRequest(lim), config.ban);
    await limits.check(keySubject(record.id), planRequest(lim), config.ban);
    expect((await keyLimits.banState(record.id)).bannedUntil).not.toBeNull();
    await keyLimits.unban(record.id);
    expect(await keyLimits.banState(record.id)).toEqual({ bannedUntil: null, banLevel: 0 });
    expect(await codeOf(keyLimits.unban('key_nope'))).toBe('not_found');
  });

  it('rotate refuses a negative or fractional grace period', async () => {
    const { admin } = memoryAdmin();
    const { record } = await admin.issuer.create({ plan: 'free' });
    expect(await codeOf(admin.lifecycle.rotate(record.id, -1))).toBe('invalid');
    expect(await codeOf(admin.lifecycle.rotate(record.id, 1.5))).toBe('invalid');
  });
});

describe('KeyAdmin on Redis', () => {
  const PREFIX = 'admin:';
  const ks = new Keyspace(PREFIX);
  let redis: TestRedis;
  let raw: Redis;
  let connection: RedisConnection;
  let dir: ReturnType<typeof tempDir>;

  beforeAll(async () => {
    redis = await TestRedis.start();
    raw = redis.client();
    connection = connectRedis({ url: redis.url, commandTimeoutMs: 2000, purpose: 'cli' });
    dir = tempDir();
  });
  afterAll(async () => {
    await connection?.close();
    raw?.disconnect();
    await redis?.stop();
    dir?.remove();
  });

  async function redisNowMs(): Promise<number> {
    const [s, us] = await raw.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  it("ban state is read on Redis's clock, not this process's", async () => {
    // A process clock a year ahead of Redis: by it the ban would be long over and its level forgotten.
    const clock = new ManualClock(Date.now() + 365 * 86_400_000);
    const admin = new KeyAdmin(new RedisKeyStore(connection, ks), clock, policy);
    const keyLimits = new KeyLimitAdmin(admin, new RedisBanStore(connection.client, ks), policy);
    const { record } = await admin.issuer.create({ plan: 'free' });
    const now = await redisNowMs();
    await raw.hset(ks.ban(keySubject(record.id)), 'until', now + 60_000, 'level', 2, 'lastEnd', now + 60_000);
    const state = await keyLimits.banState(record.id);
    expect(state.banLevel).toBe(2);
    expect(Date.parse(state.bannedUntil!)).toBe(now + 60_000);
    // Ended an hour and more ago by Redis's clock: not banned, level forgotten (resetAfterSeconds 3600).
    await raw.hset(ks.ban(keySubject(record.id)), 'until', now - 3_700_000, 'level', 2, 'lastEnd', now - 3_700_000);
    expect(await keyLimits.banState(record.id)).toEqual({ bannedUntil: null, banLevel: 0 });
    await raw.hset(ks.ban(keySubject(record.id)), 'until', now - 1000, 'level', 2, 'lastEnd', now - 1000);
    expect(await keyLimits.banState(record.id)).toEqual({ bannedUntil: null, banLevel: 2 });
    await raw.set(ks.strikes(keySubject(record.id)), '3');
    await keyLimits.unban(record.id);
    expect(await raw.exists(ks.ban(keySubject(record.id)), ks.strikes(keySubject(record.id)))).toBe(0);
  });

  it('lists every key past one SSCAN page', async () => {
    const prefix = 'many:';
    const many = new Keyspace(prefix);
    const pipe = raw.pipeline();
    for (let i = 0; i < 2500; i++) {
      const id = `key_${String(i).padStart(5, '0')}`;
      pipe.set(many.keyRecord(id), JSON.stringify({ id, plan: 'free', createdAt: '2026-01-01T00:00:00.000Z', status: 'active', hash: `h${i}` }));
      pipe.sadd(many.keyIds(), id);
    }
    await pipe.exec();
    const listed = await new RedisKeyStore(connection, many).list();
    expect(listed).toHaveLength(2500);
    expect(listed[0]!.id).toBe('key_00000');
    expect(listed.at(-1)!.id).toBe('key_02499');
  });

  it('a corrupt record: `keys list` lists the others, `keys show` and `keys unban` say so in one line', async () => {
    const prefix = 'corruptcli:';
    const file = dir.write('gateway.yaml', { upstream: { url: 'http://127.0.0.1:9' }, redis: { url: redis.url, prefix } });
    const cli = (...args: string[]) => runCli(['keys', ...args, '--config', file]);
    const good = await cli('create', '--plan', 'free', '--json');
    expect(good.code).toBe(0);
    const goodId = (JSON.parse(good.stdout) as { id: string }).id;
    const bad = await cli('create', '--plan', 'free', '--json');
    const badId = (JSON.parse(bad.stdout) as { id: string }).id;
    await raw.set(new Keyspace(prefix).keyRecord(badId), 'not json {');

    const list = await cli('list', '--json');
    expect(withoutAudit(list.stderr)).toBe('');
    expect(list.code).toBe(0);
    expect((JSON.parse(list.stdout) as Array<{ id: string }>).map((k) => k.id)).toEqual([goodId]);
    const table = await cli('list');
    expect(table.code).toBe(0);
    expect(table.stdout).toContain(goodId);

    const show = await cli('show', badId);
    expect(show.code).toBe(1);
    // One line of error after the line naming the config and Redis (withoutAudit drops that one).
    expect(withoutAudit(show.stderr).split('\n')).toHaveLength(1);
    expect(show.stderr).toContain(`key ${badId} has an unreadable record`);
    expect(show.stderr).not.toMatch(/\n\s+at /);
    expect((await cli('show', goodId)).code).toBe(0);
    const unban = await cli('unban', badId);
    expect(unban.code).toBe(1);
    expect(withoutAudit(unban.stderr).split('\n')).toEqual([expect.stringContaining(`key ${badId} has an unreadable record`)]);
  });
});
