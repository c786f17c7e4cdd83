// A valid key is never refused because of other traffic from its address: a keyless client over the anonymous limit
// (an office NAT) shares the address with customers whose keys this instance has not cached (created on another
// instance or by the CLI after start, rotated, or after a restart). Their keys are looked up and admitted, while
// made-up keys from that refused client still cost Redis no lookup (the key filter, src/keys/known-hashes.ts). Real
// gateways on a private redis-server in front of a loopback upstream; the CLI as a child process; the in-memory store.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import request from 'supertest';
import { setTimeout as sleep } from 'node:timers/promises';
import { generateKey, hashKey } from '../src/keys/format.js';
import { useStack } from './helpers/stack.js';
import { testConfig } from './helpers/gateway.js';
import { commandCalls, startLimitsGateway, type LimitsGateway } from './helpers/limits.js';
import { assertBuilt, runCli, startServe, tempDir, type CliProcess } from './helpers/cli.js';

const PER_MINUTE = 3;

const stack = useStack({ redis: true, client: true });
const opened: LimitsGateway[] = [];
let prefixSeq = 0;

afterAll(async () => {
  for (const gw of opened) await gw.close().catch(() => {});
});

const config = (prefix: string) =>
  testConfig({
    server: { trustProxy: true },
    upstream: { url: stack.up.url, timeoutMs: 2000 },
    // Generous: a loaded machine must not turn lookups into 503s; these tests are about who is admitted.
    redis: { url: stack.redis.url, prefix, commandTimeoutMs: 1000 },
    anonymous: { perMinute: PER_MINUTE },
  });

async function gateway(prefix: string): Promise<LimitsGateway> {
  const gw = await startLimitsGateway(config(prefix));
  opened.push(gw);
  return gw;
}

/** Waits (bounded) until the instance's key filter is built and certain; the assertions that follow decide. */
async function filterBuilt(gw: LimitsGateway): Promise<void> {
  for (let i = 0; i < 300 && !gw.gateway.keys.knownHashes?.isCertain; i++) await sleep(10);
}

const send = (url: string, ip: string, bearer?: string) => {
  const r = request(url).get('/v1/categories').set('x-forwarded-for', ip);
  return bearer ? r.set('authorization', `Bearer ${bearer}`) : r;
};

/** Keyless requests from `ip` until the anonymous limit refuses it (429). */
async function overAnonymousLimit(url: string, ip: string): Promise<void> {
  const statuses: number[] = [];
  for (let i = 0; i <= PER_MINUTE; i++) statuses.push((await send(url, ip)).status);
  expect(statuses).toEqual([...Array(PER_MINUTE).fill(401), 429]);
}

describe('a client address over the anonymous limit, Redis store, two instances', () => {
  it('a valid key created on another instance after start is admitted (200) every time, while the keyless client stays refused', async () => {
    const prefix = `avk${++prefixSeq}:`;
    const [a, b] = [await gateway(prefix), await gateway(prefix)];
    await filterBuilt(b);
    const ip = '198.51.100.20';
    await overAnonymousLimit(b.url, ip);
    const statuses: number[] = [];
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      // Created on instance a, used at once on instance b, which has never seen it.
      const fresh = await a.createKey({ plan: 'free' });
      ids.push(fresh.id);
      statuses.push((await send(b.url, ip, fresh.key)).status);
      statuses.push((await send(b.url, ip, fresh.key)).status);
      expect((await send(b.url, ip)).status).toBe(429);
    }
    expect(statuses).toEqual(Array(24).fill(200));
    // Each key's usage ledger has its two requests, admitted: nothing refused in its name.
    await b.gateway.flushUsage();
    for (const id of ids) {
      const u = await b.gateway.usage.keyUsage(id, Date.now() - 3_600_000, Date.now() + 1, 'hour');
      expect(u.totals).toEqual({ admitted: 2, rateLimited: 0, banned: 0, upstreamFailed: 0, shadowRefused: 0, wouldBan: 0, validationFailed: 0 });
    }
  });

  it('made-up keys from that refused client cost Redis no key lookup (INFO commandstats), and stay 429', async () => {
    const prefix = `avk${++prefixSeq}:`;
    const gw = await gateway(prefix);
    await gw.createKey({ plan: 'free' });
    await filterBuilt(gw);
    const ip = '198.51.100.21';
    await overAnonymousLimit(gw.url, ip);
    const N = 300;
    const before = await commandCalls(stack.client);
    const statuses = new Map<number, number>();
    for (let i = 0; i < N; i++) {
      const s = (await send(gw.url, ip, generateKey())).status;
      statuses.set(s, (statuses.get(s) ?? 0) + 1);
    }
    const after = await commandCalls(stack.client);
    expect(Object.fromEntries(statuses)).toEqual({ 429: N });
    const delta = (cmd: string) => (after.get(cmd) ?? 0) - (before.get(cmd) ?? 0);
    // The key lookup is a GET of keyhash:<sha256> (then the record): none. Nor any other command but INFO itself.
    expect(delta('get')).toBe(0);
    expect(delta('evalsha') + delta('eval')).toBe(0);
    expect(delta('info')).toBe(1);
  });

  it('a revoked key replayed from a refused address (its hash still in the filter) costs one lookup per negative-cache period, not one per request', async () => {
    const prefix = `avk${++prefixSeq}:`;
    const gw = await gateway(prefix);
    const k = await gw.createKey({ plan: 'free' });
    await filterBuilt(gw);
    const ip = '198.51.100.26';
    expect((await send(gw.url, ip, k.key)).status).toBe(200);
    expect(await gw.gateway.admin.lifecycle.revoke(k.id)).toEqual({ replication: { expected: 0, acked: 0 } });
    await overAnonymousLimit(gw.url, ip);
    const before = await commandCalls(stack.client);
    const started = Date.now();
    const statuses = new Set<number>();
    for (let i = 0; i < 100; i++) statuses.add((await send(gw.url, ip, k.key)).status);
    const seconds = (Date.now() - started) / 1000;
    const after = await commandCalls(stack.client);
    expect([...statuses]).toEqual([429]);
    // The lookup is one GET of its (deleted) keyhash link, then "no such key" is remembered for 2 s.
    expect((after.get('get') ?? 0) - (before.get('get') ?? 0)).toBeLessThanOrEqual(Math.ceil(seconds / 2) + 1);
  });

  it("a rotated key's new value is admitted at once from a refused address (rotated on another instance, old value cached here)", async () => {
    const prefix = `avk${++prefixSeq}:`;
    const [a, b] = [await gateway(prefix), await gateway(prefix)];
    await filterBuilt(b);
    const ip = '198.51.100.22';
    const k = await a.createKey({ plan: 'free' });
    expect((await send(b.url, ip, k.key)).status).toBe(200);
    await overAnonymousLimit(b.url, ip);
    for (let i = 0; i < 5; i++) {
      const rotated = await a.gateway.admin.lifecycle.rotate(k.id, 0);
      expect((await send(b.url, ip, rotated!.key)).status).toBe(200);
    }
    // An admin change that is not a rotation (a plan edit) drops the cached copy too: still admitted.
    await a.gateway.admin.lifecycle.update(k.id, { plan: 'pro' });
    const last = await a.gateway.admin.lifecycle.rotate(k.id, 0);
    await a.gateway.admin.lifecycle.update(k.id, { plan: 'free' });
    expect((await send(b.url, ip, last!.key)).status).toBe(200);
    expect((await send(b.url, ip)).status).toBe(429);
  });

  it('keys imported on another instance are admitted at once from a refused address', async () => {
    const prefix = `avk${++prefixSeq}:`;
    const b = await gateway(prefix);
    await filterBuilt(b);
    const ip = '198.51.100.23';
    await overAnonymousLimit(b.url, ip);
    // Through `tollgate keys import` itself (the built CLI, its own connection, KeyAdmin's import).
    const keys = Array.from({ length: 5 }, () => generateKey());
    const lines = keys.map((key, i) =>
      JSON.stringify({ id: `imported_${i}`, plan: 'free', createdAt: new Date().toISOString(), status: 'active', hash: hashKey(key) }),
    );
    const dir = tempDir();
    try {
      const file = dir.write('gateway.yaml', { upstream: { url: stack.up.url }, redis: { url: stack.redis.url, prefix } });
      const records = dir.write('keys.jsonl', lines.join('\n') + '\n');
      const r = await runCli(['keys', 'import', records, '--config', file]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain('Imported 5');
    } finally {
      dir.remove();
    }
    for (const key of keys) expect((await send(b.url, ip, key)).status).toBe(200);
  });

  it('after a restart with the address still over its limit, keys created before it are admitted', async () => {
    const prefix = `avk${++prefixSeq}:`;
    const first = await gateway(prefix);
    const ip = '198.51.100.24';
    const keys = [await first.createKey({ plan: 'free' }), await first.createKey({ plan: 'pro' })];
    await overAnonymousLimit(first.url, ip);
    await first.close();
    const again = await gateway(prefix);
    // The address's count lives in Redis: the new instance refuses it at once.
    expect((await send(again.url, ip)).status).toBe(429);
    // Whether or not its key filter is built yet, the keys are admitted.
    for (const k of keys) expect((await send(again.url, ip, k.key)).status).toBe(200);
    await filterBuilt(again);
    expect(again.gateway.keys.knownHashes.isCertain).toBe(true);
    const more = await startLimitsGateway(config(prefix));
    opened.push(more);
    for (const k of keys) expect((await send(more.url, ip, k.key)).status).toBe(200);
    expect((await send(more.url, ip, generateKey())).status).toBe(429);
  });

  it('junk on the change feed is ignored: a bad hash message neither crashes the instance nor opens anything', async () => {
    const prefix = `avk${++prefixSeq}:`;
    const gw = await gateway(prefix);
    await filterBuilt(gw);
    const ip = '198.51.100.25';
    await overAnonymousLimit(gw.url, ip);
    const made = generateKey();
    for (const junk of ['+', '+nothex', `+${'A'.repeat(64)}`, `+${hashKey(made)}x`, `+${'0'.repeat(100_000)}`])
      await stack.client.publish(`${prefix}keys:events`, junk);
    // A well-formed hash of no stored key: it is only looked up, and found to be no key.
    await stack.client.publish(`${prefix}keys:events`, `+${hashKey(made)}`);
    await sleep(100);
    expect((await send(gw.url, ip, made)).status).toBe(429);
    const k = await gw.createKey({ plan: 'free' });
    expect((await send(gw.url, ip, k.key)).status).toBe(200);
  });
});

describe('the in-memory store and static keys (as tollgate dev runs)', () => {
  it('a key created after start and a static config key are admitted from a refused address; made-up keys are not', async () => {
    const staticKey = generateKey();
    const gw = await startLimitsGateway(
      testConfig({
        server: { trustProxy: true },
        upstream: { url: stack.up.url, timeoutMs: 2000 },
        anonymous: { perMinute: PER_MINUTE },
        keys: [{ id: 'static_one', plan: 'free', sha256: hashKey(staticKey) }],
      }),
    );
    opened.push(gw);
    await filterBuilt(gw);
    const ip = '198.51.100.30';
    await overAnonymousLimit(gw.url, ip);
    for (let i = 0; i < 5; i++) {
      const k = await gw.createKey({ plan: 'free' });
      expect((await send(gw.url, ip, k.key)).status).toBe(200);
      expect((await send(gw.url, ip, staticKey)).status).toBe(200);
      expect((await send(gw.url, ip, generateKey())).status).toBe(429);
    }
  });
});

describe('the CLI: tollgate serve, keys created by tollgate keys create after start', () => {
  let dir: ReturnType<typeof tempDir>;
  let serve: { proc: CliProcess; url: string } | undefined;
  let file: string;

  beforeAll(async () => {
    assertBuilt();
    dir = tempDir();
    file = dir.write('gateway.yaml', {
      server: { host: '127.0.0.1', port: 0, trustProxy: true },
      upstream: { url: stack.up.url },
      redis: { url: stack.redis.url, prefix: 'avkcli:', commandTimeoutMs: 1000 },
      log: { level: 'info' },
      anonymous: { perMinute: PER_MINUTE },
    });
    serve = await startServe(file);
    // Bounded; the test's own assertions decide.
    await serve.proc.waitForLog('key filter built', { timeoutMs: 10_000 }).catch(() => {});
  });
  afterAll(async () => {
    await serve?.proc.stop();
    dir?.remove();
  });

  it('each key the CLI creates is admitted at once from the address a keyless client keeps over its limit', async () => {
    const ip = '198.51.100.40';
    await overAnonymousLimit(serve!.url, ip);
    for (let i = 0; i < 3; i++) {
      const r = await runCli(['keys', 'create', '--plan', 'free', '--json', '--config', file]);
      expect(r.code).toBe(0);
      const { key } = JSON.parse(r.stdout) as { key: string };
      expect((await send(serve!.url, ip, key)).status).toBe(200);
      expect((await send(serve!.url, ip)).status).toBe(429);
    }
  });
});
