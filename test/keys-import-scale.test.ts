// `tollgate keys import` of 20,000 records through the built CLI on a private redis-server: the file is read in passes
// (progress lines on stderr for each, at --progress-every), every record written, a repeat 19,998 lines after its first
// occurrence still found, and importing the same file again changes nothing. The 1,000,000-record figures (peak RSS,
// wall time) come from `npm run bench:import` (bench/README.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { assertBuilt, auditOf, runCli, tempDir, withoutAudit } from './helpers/cli.js';
import { TestRedis } from './helpers/redis-server.js';

const N = 20_000;
let redis: TestRedis;
let dir: ReturnType<typeof tempDir>;
let config: string;

beforeAll(async () => {
  assertBuilt();
  redis = await TestRedis.start();
  dir = tempDir();
  config = dir.write('gateway.yaml', { redis: { url: redis.url, prefix: 'scale:' }, plans: { free: { perMinute: 10, perDay: 100 } } });
}, 60_000);

afterAll(async () => {
  await redis?.stop();
  dir?.remove();
});

const records = (hashes: string[], idPrefix = 'c') =>
  hashes.map((h, i) => JSON.stringify({ ...(i % 2 ? { id: `${idPrefix}_${i}` } : {}), plan: 'free', sha256: h, name: `n${i}` })).join('\n') + '\n';

describe('keys import of 20,000 records', () => {
  it('reports progress for each pass, writes every record, and a second run changes nothing', async () => {
    const hashes = Array.from({ length: N }, () => randomBytes(32).toString('hex'));
    const file = dir.write('big.jsonl', records(hashes));
    const r = await runCli(['keys', 'import', '--file', file, '--progress-every', '5000', '--config', config], { timeoutMs: 120_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe(`Imported ${N}, unchanged 0.`);
    const progress = withoutAudit(r.stderr).trim().split('\n');
    expect(progress).toEqual([
      ...[5000, 10000, 15000, 20000].map((n) => `checked: ${n} records`),
      ...[5000, 10000, 15000, 20000].map((n) => `written: ${n} records`),
    ]);
    expect(auditOf(r.stderr)).toEqual([expect.objectContaining({ imported: N, unchanged: 0, refused: 0 })]);
    const c = redis.client();
    try {
      expect(await c.scard('scale:keys')).toBe(N);
      expect(await c.get(`scale:keyhash:${hashes[1]!}`)).toBe('c_1');
      expect(await c.get(`scale:keyhash:${hashes[N - 2]!}`)).toMatch(/^key_/);
    } finally {
      c.disconnect();
    }
    const again = await runCli(['keys', 'import', '--file', file, '--config', config], { timeoutMs: 120_000 });
    expect(again.stdout.trim()).toBe(`Imported 0, unchanged ${N}.`);
  }, 180_000);

  it('a hash repeated 19,998 lines later is refused by its line; nothing of the file is written', async () => {
    const hashes = Array.from({ length: N }, () => randomBytes(32).toString('hex'));
    hashes[N - 1] = hashes[1]!;
    const file = dir.write('repeat.jsonl', records(hashes, 'r'));
    const c = redis.client();
    try {
      const before = await c.scard('scale:keys');
      const r = await runCli(['keys', 'import', '--file', file, '--config', config], { timeoutMs: 120_000 });
      expect(r.code).toBe(1);
      expect(withoutAudit(r.stderr).trim().split('\n')[0]).toBe(`line ${N}: a hash of this record is also on line 2`);
      expect(await c.scard('scale:keys')).toBe(before);
    } finally {
      c.disconnect();
    }
  }, 180_000);
});
