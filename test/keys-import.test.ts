// `tollgate keys import` against crafted files, through the built CLI on a private redis-server: a record that would
// take over another key's hash (prevHash), bring a revoked key back under a new id, name an unknown plan, repeat an id
// or a hash within the file, or collide with a stored hash is refused with its line number, and then nothing of the
// file is written (Redis compared byte for byte before and after). A good import is audited once with its counts;
// importing an export again changes nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { auditOf, assertBuilt, runCli, tempDir, withoutAudit, type CliResult } from './helpers/cli.js';
import { TestRedis } from './helpers/redis-server.js';
import { waitFor } from './helpers/wait.js';
import type { StoredKey } from '../src/keys/types.js';
import { judgeRecord } from '../src/keys/import-check.js';

const PREFIX = 'imp:';
let redis: TestRedis;
let dir: ReturnType<typeof tempDir>;
let config: string;
let exportFile: string;
/** The records as exported: an active key, a key rotated with grace, a revoked key. */
let active: StoredKey;
let rotated: StoredKey;
let revoked: StoredKey;

function keys(...args: string[]): Promise<CliResult> {
  return runCli(['keys', ...args, '--config', config]);
}

async function keysOk(...args: string[]): Promise<CliResult> {
  const r = await keys(...args);
  if (r.code !== 0) throw new Error(`keys ${args.join(' ')} exited ${r.code}: ${r.stderr}${r.stdout}`);
  return r;
}

/** Every Redis key with its type, value and whether it expires: what "nothing written" is checked against. */
async function snapshot(): Promise<string[]> {
  const c = redis.client();
  try {
    const out: string[] = [];
    for (const k of (await c.keys('*')).sort()) {
      const type = await c.type(k);
      const value = type === 'string' ? await c.get(k) : type === 'set' ? (await c.smembers(k)).sort().join(',') : JSON.stringify(await c.hgetall(k));
      out.push(`${k} ${type} ${value} ${(await c.pttl(k)) > 0 ? 'expires' : 'stays'}`);
    }
    return out;
  } finally {
    c.disconnect();
  }
}

const newHash = () => randomBytes(32).toString('hex');
let counter = 0;
/** A valid record of a key that does not exist yet. */
const fresh = (over: Partial<StoredKey> = {}): StoredKey => ({
  id: `key_new${++counter}`,
  plan: 'free',
  createdAt: '2026-11-01T00:00:00.000Z',
  status: 'active',
  hash: newHash(),
  ...over,
});
const file = (...records: unknown[]): string =>
  dir.write(`import-${++counter}.jsonl`, records.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join('\n') + '\n');

/** Imports `path`, expecting a refusal: the exit code, the refusal lines, and Redis as it was. */
async function refused(path: string): Promise<{ lines: string[]; stdout: string; audit: Array<Record<string, unknown>> }> {
  const before = await snapshot();
  const r = await keys('import', path);
  expect(r.code, r.stderr).toBe(1);
  expect(await snapshot()).toEqual(before);
  const lines = withoutAudit(r.stderr).split('\n');
  expect(lines.at(-1)).toBe('error: nothing was imported: every record must pass before any is written (see above)');
  return { lines: lines.slice(0, -1), stdout: r.stdout.trim(), audit: auditOf(r.stderr) };
}

beforeAll(async () => {
  assertBuilt();
  redis = await TestRedis.start();
  dir = tempDir();
  config = dir.write('gateway.yaml', {
    redis: { url: redis.url, prefix: PREFIX },
    plans: { free: { perMinute: 10, perDay: 100 }, pro: { perMinute: 20, perDay: 200 } },
  });
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push((JSON.parse((await keysOk('create', '--plan', 'free', '--json')).stdout) as { id: string }).id);
  await keysOk('rotate', ids[1]!, '--grace', '3600');
  await keysOk('revoke', ids[2]!);
  exportFile = `${dir.dir}/keys.jsonl`;
  await keysOk('export', '--out', exportFile);
  const records = readFileSync(exportFile, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as StoredKey);
  const byId = (id: string) => records.find((r) => r.id === id)!;
  [active, rotated, revoked] = [byId(ids[0]!), byId(ids[1]!), byId(ids[2]!)];
  expect(rotated.prevHash).toMatch(/^[0-9a-f]{64}$/);
  expect(revoked.status).toBe('revoked');
}, 60_000);

afterAll(async () => {
  await redis?.stop();
  dir?.remove();
});

describe('keys import refuses what would take over or revive a key, and writes nothing then', () => {
  it("a prevHash that is another key's hash is refused with its line number; nothing is written", async () => {
    const r = await refused(file(fresh(), fresh({ prevHash: active.hash, prevHashUntil: Date.now() + 3_600_000 })));
    expect(r.lines).toEqual([`line 2: a hash of this record belongs to key ${active.id}; a hash opens one key only`]);
    expect(r.stdout).toBe('Imported 0, unchanged 0, refused 1.');
  });

  it("a key's grace hash (its old key) under another id is refused", async () => {
    const r = await refused(file(fresh({ hash: rotated.prevHash! })));
    expect(r.lines).toEqual([`line 1: a hash of this record belongs to key ${rotated.id}; a hash opens one key only`]);
  });

  it("a revoked key's hash under a new id is refused: the revoked key does not come back", async () => {
    const r = await refused(file(fresh({ hash: revoked.hash })));
    expect(r.lines).toEqual([`line 1: a hash of this record belongs to revoked key ${revoked.id}; a hash opens one key only`]);
    // Nor the revoked key itself, made active again under its own id.
    const again = await refused(file({ ...revoked, status: 'active', revokedAt: undefined }));
    expect(again.lines).toEqual([`line 1: key ${revoked.id} exists with other content; left as it is (change it with keys update, or revoke it)`]);
  });

  it('an unknown plan is refused', async () => {
    const r = await refused(file(fresh(), fresh({ plan: 'gold' })));
    expect(r.lines).toEqual(['line 2: unknown plan "gold"; plans: free, pro']);
  });

  it('an id or a hash twice within the file is refused on the later line', async () => {
    const first = fresh();
    const r = await refused(file(first, { ...first, name: 'twin' }, fresh({ hash: first.hash }), fresh({ prevHash: first.hash })));
    expect(r.lines).toEqual([
      'line 2: its id is also on line 1',
      'line 3: a hash of this record is also on line 1',
      'line 4: a hash of this record is also on line 1',
    ]);
  });

  it('a hash collision in line 3 leaves lines 1 and 2 unwritten; every refusal in the file is listed at once', async () => {
    const one = fresh();
    const two = fresh();
    const r = await refused(file(one, two, fresh({ hash: active.hash }), 'not json', { id: 'x' }));
    expect(r.lines[0]).toBe(`line 3: a hash of this record belongs to key ${active.id}; a hash opens one key only`);
    expect(r.lines[1]).toBe('line 4: not JSON');
    expect(r.lines[2]).toMatch(/^line 5: /);
    const c = redis.client();
    try {
      expect(await c.exists(`${PREFIX}key:{${one.id}}`, `${PREFIX}key:{${two.id}}`, `${PREFIX}keyhash:${one.hash}`)).toBe(0);
    } finally {
      c.disconnect();
    }
    // The refused attempt is audited too: who tried, when, what was refused.
    expect(r.audit).toEqual([expect.objectContaining({ audit: true, action: 'import', by: 'cli', imported: 0, unchanged: 0, refused: 3 })]);
  });
});

describe('keys import against malformed and hostile lines', () => {
  it('refuses prototype tricks, non-objects, unknown fields and a prevHash equal to the hash, each by line', async () => {
    const own = fresh();
    const r = await refused(
      file(
        '{"__proto__":{"plan":"free"},"id":"key_proto"}',
        'null',
        '[1,2]',
        '"key"',
        { ...fresh(), status: 'active', admin: true },
        { ...own, prevHash: own.hash, prevHashUntil: Date.now() + 60_000 },
        { ...fresh(), id: '../../etc' },
        { ...fresh(), plan: '__proto__' },
        { ...fresh(), plan: 'toString' },
      ),
    );
    expect(r.lines.map((l) => l.replace(/:.*/, ''))).toEqual(['line 1', 'line 2', 'line 3', 'line 4', 'line 5', 'line 6', 'line 7', 'line 8', 'line 9']);
    expect(r.lines[5]).toBe("line 6: prevHash is the key's own hash");
    expect(r.lines[7]).toBe('line 8: unknown plan "__proto__"; plans: free, pro');
    expect(r.lines[8]).toBe('line 9: unknown plan "toString"; plans: free, pro');
  });

  it('an empty file imports nothing and succeeds; a missing file is one line on stderr', async () => {
    const empty = await keys('import', file());
    expect(empty.code, empty.stderr).toBe(0);
    expect(empty.stdout.trim()).toBe('Imported 0, unchanged 0.');
    const missing = await keys('import', `${dir.dir}/nope.jsonl`);
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim()).toMatch(/^error: cannot read .*nope\.jsonl: ENOENT$/);
  });
});

describe('keys import that passes', () => {
  it('writes every record, and one audit line says who, when and how many', async () => {
    const a = fresh();
    const b = fresh({ plan: 'pro', prevHash: newHash(), prevHashUntil: Date.now() + 3_600_000 });
    // The change feed: every instance drops the imported ids from its cache (a key looked up before it existed).
    const sub = redis.client();
    const heard: string[] = [];
    // Besides the ids, each hash an import links is announced ("+<sha256>") for every instance's key filter.
    const hashes: string[] = [];
    sub.on('message', (_channel: string, m: string) => (m.startsWith('+') ? hashes.push(m.slice(1)) : heard.push(m)));
    await sub.subscribe(`${PREFIX}keys:events`);
    const t0 = Date.now();
    const r = await keys('import', file(a, b, active));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('Imported 2, unchanged 1.');
    expect(withoutAudit(r.stderr)).toBe('');
    const audit = auditOf(r.stderr);
    expect(audit).toEqual([expect.objectContaining({ audit: true, action: 'import', by: 'cli', imported: 2, unchanged: 1, refused: 0 })]);
    // A bound: a time, written during the import (less a second for clock rounding).
    expect(Date.parse(String(audit[0]!.time))).toBeGreaterThanOrEqual(t0 - 1000);
    expect(audit[0]).not.toHaveProperty('keyId');
    await waitFor(() => heard.length >= 2 && hashes.length >= 2, 'the change feed', 30_000);
    sub.disconnect();
    expect(heard.sort()).toEqual([a.id, b.id].sort());
    expect(hashes).toEqual(expect.arrayContaining([a.hash, b.hash]));
    const c = redis.client();
    try {
      expect(await c.get(`${PREFIX}keyhash:${a.hash}`)).toBe(a.id);
      expect(await c.get(`${PREFIX}keyhash:${b.prevHash!}`)).toBe(b.id);
      expect(await c.pttl(`${PREFIX}keyhash:${b.prevHash!}`)).toBeGreaterThan(0);
      expect(await c.sismember(`${PREFIX}keys`, b.id)).toBe(1);
    } finally {
      c.disconnect();
    }
  });

  it('importing the export again changes nothing and succeeds', async () => {
    const before = await snapshot();
    const r = await keys('import', exportFile);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('Imported 0, unchanged 3.');
    expect(withoutAudit(r.stderr)).toBe('');
    expect(await snapshot()).toEqual(before);
  });
});

describe('judgeRecord, the store rules every import record passes (a record and what the store holds in, a verdict out, no I/O)', () => {
  const plans = new Set(['free']);
  const exported = (key: StoredKey) => ({ key, customer: false, idGiven: true, retired: [] });
  const stored: StoredKey = { id: 'key_a', plan: 'free', createdAt: '2026-11-01T00:00:00.000Z', status: 'active', hash: newHash() };
  const gone: StoredKey = { ...stored, id: 'key_gone', hash: newHash(), status: 'revoked', revokedAt: '2026-11-02T00:00:00.000Z' };

  it("creates a new record, leaves one stored as it is, refuses a revoked key's hash and an unknown plan", () => {
    expect(judgeRecord(exported(fresh()), { byId: undefined, owner: undefined }, plans)).toBe('create');
    expect(judgeRecord(exported({ ...stored }), { byId: stored, owner: stored }, plans)).toBe('unchanged');
    expect(judgeRecord(exported(fresh({ hash: gone.hash })), { byId: undefined, owner: gone }, plans)).toBe(
      'a hash of this record belongs to revoked key key_gone; a hash opens one key only',
    );
    expect(judgeRecord(exported(fresh({ plan: 'gold' })), { byId: undefined, owner: undefined }, plans)).toBe('unknown plan "gold"; plans: free');
  });

  it('never writes over an id whose stored record cannot be read', () => {
    expect(judgeRecord(exported(fresh({ id: 'key_bad' })), { byId: 'unreadable', owner: undefined }, plans)).toBe(
      'key key_bad exists with an unreadable record; repair or delete it in Redis first',
    );
  });
});
