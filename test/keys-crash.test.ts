// A key operation writes up to three Redis keys (the record, a hash link, the id set), which live on different slots
// of a cluster, so no transaction can hold them. They are ordered so that the CLI dying between any two writes leaves
// nothing half-done that the request path would act on. Each case runs the real CLI through a proxy that lets exactly
// N writes reach Redis and then cuts it off, and then asks a gateway that already had the key cached and a fresh one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../src/config/schema.js';
import { hashKey } from '../src/keys/format.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { runCli, tempDir } from './helpers/cli.js';
import { CrashProxy } from './helpers/crash-proxy.js';
import { testConfig } from './helpers/gateway.js';
import { startLimitsGateway, type LimitsGateway } from './helpers/limits.js';
import { useStack } from './helpers/stack.js';
import { waitFor } from './helpers/wait.js';

const PREFIX = 'crash:';
const s = useStack({ redis: true, client: true, gateway: async () => startLimitsGateway(config()) });
let dir: ReturnType<typeof tempDir>;
let file: string;

beforeAll(() => {
  dir = tempDir();
  file = dir.write('gateway.yaml', { upstream: { url: s.up.url }, redis: { url: s.redis.url, prefix: PREFIX } });
});

afterAll(() => dir?.remove());

function config(): Config {
  return testConfig({ upstream: { url: s.up.url }, redis: { url: s.redis.url, prefix: PREFIX }, plans: { free: { perMinute: 1000, perDay: 10_000 } } });
}

async function status(g: LimitsGateway, key: string): Promise<number> {
  const res = await fetch(`${g.url}/v1/categories`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(5000) });
  await res.arrayBuffer();
  return res.status;
}

/** Runs a key command whose connection dies right after its Nth write reached Redis; returns what it printed. */
async function crashAfter(writes: number, ...args: string[]): Promise<{ code: number | null; stdout: string; writes: string[] }> {
  const proxy = await CrashProxy.start(s.redis.port, writes);
  try {
    const r = await runCli(['keys', ...args, '--config', file, '--redis', `redis://127.0.0.1:${proxy.port}`]);
    return { code: r.code, stdout: r.stdout, writes: proxy.writes };
  } finally {
    await proxy.close();
  }
}

/** What a gateway started now answers for the key. */
async function freshStatus(key: string): Promise<number> {
  const g = await startLimitsGateway(config());
  try {
    return await status(g, key);
  } finally {
    await g.close();
  }
}

describe('the CLI dies between the writes of one key operation', () => {
  it('create: after the record, or the record and its hash link, no key was shown and none is listed', async () => {
    for (const n of [1, 2]) {
      const r = await crashAfter(n, 'create', '--plan', 'free', '--json');
      expect(r.writes).toHaveLength(n);
      expect(r.code).toBe(1);
      expect(r.stdout).not.toMatch(/tg_/);
      const listed = await runCli(['keys', 'list', '--json', '--config', file]);
      expect(JSON.parse(listed.stdout)).toEqual([]);
    }
  });

  it('revoke: after remembering its hashes only, the key still works; after the record (its hash link still there), it is refused everywhere at once', async () => {
    const early = await s.gw.createKey({ plan: 'free' });
    expect(await status(s.gw, early.key)).toBe(200);
    // The retired hash is remembered first: dying right after leaves a working key whose hash an import refuses anyway.
    const retiredOnly = await crashAfter(2, 'revoke', early.id);
    expect(retiredOnly.writes).toEqual(['set', 'sadd']);
    expect(retiredOnly.code).toBe(1);
    expect(await freshStatus(early.key)).toBe(200);
    const { id, key } = await s.gw.createKey({ plan: 'free' });
    expect(await status(s.gw, key)).toBe(200);
    const r = await crashAfter(3, 'revoke', id);
    expect(r.writes).toEqual(['set', 'sadd', 'eval']);
    expect(r.code).toBe(1);
    expect(await s.client.exists(new Keyspace(PREFIX).keyByHash(hashKey(key)))).toBe(1);
    // No change message went out, yet the instance that cached the key refuses it: the limit check reads the record.
    expect(await status(s.gw, key)).toBe(401);
    expect(await freshStatus(key)).toBe(401);
  });

  it('rotate: after the new hash link, or the link and the record, the old key keeps working through its grace period', async () => {
    // Writes 1 and 2 remember the old hash as retired (it keeps working: the record still names it); 3 is the new
    // link, 4 the record.
    for (const n of [3, 4]) {
      const { id, key } = await s.gw.createKey({ plan: 'free' });
      expect(await status(s.gw, key)).toBe(200);
      const r = await crashAfter(n, 'rotate', id, '--grace', '600');
      expect(r.writes).toHaveLength(n);
      expect(r.code).toBe(1);
      expect(r.stdout).not.toMatch(/tg_/);
      await waitFor(async () => (await status(s.gw, key)) === 200, 'the old key works on the instance that cached it', 30_000);
      expect(await freshStatus(key)).toBe(200);
    }
  });
});
