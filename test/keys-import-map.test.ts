// `tollgate keys import --map`, `--dry-run`'s listing and `keys rotate --keep-prefix`, through the built CLI as child
// processes on a private redis-server, with a gateway composed in this process on the same Redis answering /v1: a
// customer's columns renamed (CSV and JSON lines) and every wrong map refused with one stderr line and exit 2; a dry
// run lists each record (import, unchanged, refuse with its reason) and writes nothing (Redis compared before and
// after); an imported key's visible prefix is recorded (never more: a key without a separator records none), a hash-only
// record's prefix column is checked; a rotation keeping the prefix gives a key the gateway accepts, keeps it on the
// next rotation, and the old key stops after its grace as for any rotation.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { assertBuilt, runCli, tempDir, withoutAudit, type CliResult } from './helpers/cli.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { waitFor } from './helpers/wait.js';
import { composeGateway } from '../src/compose.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { Metrics } from '../src/observability/metrics.js';
import { prefixOf } from '../src/keys/key-prefix.js';

const PREFIX = 'kmap:';
let redis: TestRedis;
let up: TestUpstream;
let gw: RunningGateway;
let dir: ReturnType<typeof tempDir>;
let foreign: string;
let strict: string;
let n = 0;

const sha = (key: string) => createHash('sha256').update(key).digest('hex');
const keys = (cfg: string, ...args: string[]): Promise<CliResult> => runCli(['keys', ...args, '--config', cfg]);
const jsonl = (...records: unknown[]) => dir.write(`m-${++n}.jsonl`, records.map((r) => JSON.stringify(r)).join('\n') + '\n');
const csv = (text: string) => dir.write(`m-${++n}.csv`, text);
/** The stderr lines a person reads: without the audit lines and the line naming the config and Redis. */
const errLines = (r: CliResult) => withoutAudit(r.stderr).split('\n').filter(Boolean);

async function call(key: string): Promise<number> {
  const res = await fetch(`${gw.url}/v1/things`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

/** Every key and value in Redis, and DBSIZE: what "nothing written" compares. */
async function dump(): Promise<string> {
  const c = redis.client();
  try {
    const out: string[] = [`dbsize=${await c.dbsize()}`];
    for (const k of (await c.keys('*')).sort()) {
      const t = await c.type(k);
      out.push(`${k}=${t === 'string' ? await c.get(k) : t === 'set' ? (await c.smembers(k)).sort().join(',') : t}`);
    }
    return out.join('\n');
  } finally {
    c.disconnect();
  }
}

async function record(id: string): Promise<Record<string, unknown>> {
  const c = redis.client();
  try {
    return JSON.parse((await c.get(`${PREFIX}key:{${id}}`))!) as Record<string, unknown>;
  } finally {
    c.disconnect();
  }
}

beforeAll(async () => {
  assertBuilt();
  redis = await TestRedis.start();
  up = await TestUpstream.start();
  dir = tempDir();
  const plans = { free: { perMinute: 100, perDay: 1000 }, pro: { perMinute: 200, perDay: 2000 } };
  const base = { redis: { url: redis.url, prefix: PREFIX }, plans };
  foreign = dir.write('foreign.yaml', { ...base, auth: { foreignKeys: true } });
  strict = dir.write('strict.yaml', base);
  const config = testConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url },
    redis: { url: redis.url, prefix: PREFIX, commandTimeoutMs: 2000 },
    auth: { foreignKeys: true },
    plans,
  });
  gw = await startGateway({
    gateway: await composeGateway({ config, logger: silentLogger, metrics: new Metrics(), upstreamCheckTimeoutMs: 500 }),
    logger: silentLogger,
  });
}, 60_000);

afterAll(async () => {
  await gw?.shutdown();
  await up?.close();
  await redis?.stop();
  dir?.remove();
});

describe('keys import --map', () => {
  it("renames a CSV's columns (metadata.<name> too) and a JSON record's fields to Tollgate's names", async () => {
    const a = `acme_${randomBytes(16).toString('hex')}`;
    const f = csv(`customer_id,customer,tier,api_key,crm\ncsv_a,Acme,pro,${a},c_77\n`);
    const r = await keys(
      foreign,
      'import',
      f,
      '--map',
      'api_key=key',
      '--map',
      'customer=name',
      '--map',
      'tier=plan',
      '--map',
      'customer_id=id',
      '--map',
      'crm=metadata.crm',
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('Imported 1, unchanged 0.');
    expect(await record('csv_a')).toMatchObject({ id: 'csv_a', name: 'Acme', plan: 'pro', metadata: { crm: 'c_77' }, hash: sha(a), prefix: 'acme_' });
    expect(await call(a)).toBe(200);

    const b = `bolt-${randomBytes(16).toString('hex')}`;
    const j = jsonl({ ref: 'json_b', tier: 'free', api_key: b }, { ref: 'json_c', tier: 'free', sha256: sha('c'.repeat(20)) });
    const rj = await keys(foreign, 'import', j, '--map', 'api_key=key', '--map', 'tier=plan', '--map', 'ref=id');
    expect(rj.code, rj.stderr).toBe(0);
    expect(rj.stdout.trim()).toBe('Imported 2, unchanged 0.');
    expect(await record('json_b')).toMatchObject({ plan: 'free', hash: sha(b), prefix: 'bolt-' });
    expect(await record('json_c')).toMatchObject({ plan: 'free', hash: sha('c'.repeat(20)) });
  });

  it('refuses a wrong map with one stderr line and exit 2, writing nothing', async () => {
    const f = csv(`api_key,plan,key_type\nk_${randomBytes(16).toString('hex')},free,x\n`);
    const before = await dump();
    const cases: Array<[string[], RegExp]> = [
      [['--map', 'api_key'], /^error: --map "api_key": expected OLD=NEW \(the file's column, then Tollgate's field\)$/],
      [['--map', '=key'], /^error: --map "=key": expected OLD=NEW/],
      [
        ['--map', 'api_key=kye'],
        /^error: --map "api_key=kye": "kye" is not a field an import reads \(did you mean "key"\?\); fields: id, name, plan, key, sha256, prefix, perMinute, perDay, expiresAt, consumer, metadata\.<name>$/,
      ],
      [['--map', 'api_key=hash'], /^error: --map "api_key=hash": "hash" is not a field an import reads.*; fields: id, name/],
      [
        ['--map', 'api_key=key', '--map', 'key_type=key'],
        /^error: --map "key_type=key": columns "api_key" and "key_type" both map to "key"; a field takes one column$/,
      ],
      [['--map', 'api_key=key', '--map', 'api_key=sha256'], /^error: --map "api_key=sha256": column "api_key" is mapped twice$/],
      [['--map', 'apikey=key'], /^error: --map apikey=key: the CSV header has no column "apikey"$/],
      [['--map', 'key_type=plan'], /^error: --map key_type=plan: the file also has a column "plan"; columns "key_type" and "plan" would both fill "plan"$/],
    ];
    for (const [args, expected] of cases) {
      const r = await keys(foreign, 'import', f, ...args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(errLines(r), args.join(' ')).toHaveLength(1);
      expect(errLines(r)[0], args.join(' ')).toMatch(expected);
      expect(r.stdout).toBe('');
    }
    // JSON lines: a field no record has is a misspelt name; a record with both the field and its target is refused by line.
    const j = jsonl(
      { plan: 'free', api_key: `j_${randomBytes(16).toString('hex')}` },
      { plan: 'free', api_key: `x_${randomBytes(16).toString('hex')}`, key: 'y'.repeat(20) },
    );
    const missing = await keys(foreign, 'import', j, '--map', 'apikey=key', '--dry-run');
    expect(missing.code).toBe(2);
    expect(errLines(missing)).toEqual(['error: --map apikey=key: no record of the file has a field "apikey"']);
    const both = await keys(foreign, 'import', j, '--map', 'api_key=key', '--dry-run');
    expect(both.code).toBe(1);
    expect(both.stdout.split('\n')).toContain('line 2: refuse: fields "api_key" and "key" both give key (map api_key=key)');
    expect(await dump()).toBe(before);
  }, 60_000);
});

describe('keys import --dry-run', () => {
  it('lists each record as import, unchanged or refuse (with its line and reason), then the counts; --json the same; nothing written', async () => {
    const there = `dry_${randomBytes(16).toString('hex')}`;
    expect((await keys(foreign, 'import', jsonl({ id: 'dry_there', plan: 'free', key: there, name: 'There' }))).code).toBe(0);
    const fresh = `new_${randomBytes(16).toString('hex')}`;
    const f = jsonl(
      { id: 'dry_there', plan: 'free', key: there, name: 'There' }, // same id, hash, plan, name: unchanged
      { id: 'dry_new', plan: 'pro', key: fresh }, // import
      { plan: 'free', sha256: sha(there) }, // its hash opens dry_there, with other fields (no name): refused
      { id: 'dry_there', plan: 'pro', key: there, name: 'There' }, // same id, another plan: refused, an import never changes a key
      { plan: 'gold', sha256: sha('g'.repeat(20)) },
    );
    const before = await dump();
    const r = await keys(foreign, 'import', f, '--dry-run', '--skip-invalid');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual([
      'line 1: unchanged dry_there',
      'line 2: import dry_new',
      'line 3: refuse: a hash of this record belongs to key dry_there; a hash opens one key only',
      'line 4: refuse: key dry_there exists with other content; left as it is (change it with keys update, or revoke it)',
      'line 5: refuse: unknown plan "gold"; plans: free, pro',
      'Dry run (nothing written): would import 1, unchanged 1, refused 3.',
    ]);
    const j = await keys(foreign, 'import', f, '--dry-run', '--json');
    expect(j.code).toBe(1);
    const parsed = JSON.parse(j.stdout) as Record<string, unknown>;
    expect(parsed).toEqual({
      dryRun: true,
      lines: [
        { line: 1, action: 'unchanged', id: 'dry_there' },
        { line: 2, action: 'import', id: 'dry_new' },
        { line: 3, action: 'refuse', reason: 'a hash of this record belongs to key dry_there; a hash opens one key only' },
        { line: 4, action: 'refuse', reason: 'key dry_there exists with other content; left as it is (change it with keys update, or revoke it)' },
        { line: 5, action: 'refuse', reason: 'unknown plan "gold"; plans: free, pro' },
      ],
      imported: 0,
      unchanged: 1,
      refused: [
        { line: 3, reason: 'a hash of this record belongs to key dry_there; a hash opens one key only' },
        { line: 4, reason: 'key dry_there exists with other content; left as it is (change it with keys update, or revoke it)' },
        { line: 5, reason: 'unknown plan "gold"; plans: free, pro' },
      ],
      warnings: [],
    });
    expect(await dump()).toBe(before);
    expect(r.stdout + j.stdout + r.stderr + j.stderr).not.toContain(fresh);
  });
});

describe('prefixes recorded at import', () => {
  it('records the visible prefix of a plaintext key, never more; checks a prefix column given with a hash', async () => {
    const secret = randomBytes(16).toString('hex');
    const f = jsonl(
      { id: 'p_stripe', plan: 'free', key: `sk_live_${secret}` },
      { id: 'p_none', plan: 'free', key: `x${randomBytes(20).toString('hex')}` }, // no separator: no prefix
      { id: 'p_late', plan: 'free', key: `${randomBytes(8).toString('hex')}_${randomBytes(4).toString('hex')}` }, // separator past the first third
      { id: 'p_hash', plan: 'free', sha256: sha('h'.repeat(30)), prefix: 'pk_test_' },
    );
    const r = await keys(foreign, 'import', f);
    expect(r.code, r.stderr).toBe(0);
    expect(await record('p_stripe')).toMatchObject({ prefix: 'sk_live_' });
    expect(await record('p_none')).not.toHaveProperty('prefix');
    expect(await record('p_late')).not.toHaveProperty('prefix');
    expect(await record('p_hash')).toMatchObject({ prefix: 'pk_test_' });
    expect(JSON.stringify(await dump())).not.toContain(secret);
    const shown = await keys(foreign, 'show', 'p_stripe', '--json');
    expect(JSON.parse(shown.stdout)).toMatchObject({ id: 'p_stripe', prefix: 'sk_live_' });
    // The rule itself: at most 32 characters and a third of the key, ending at the last separator there.
    expect(prefixOf('abc_def_' + 'x'.repeat(40))).toBe('abc_def_');
    expect(prefixOf('ab_' + 'x'.repeat(3))).toBeUndefined(); // 3 is not within the first third of 6
    expect(prefixOf('a'.repeat(40) + '_' + 'x'.repeat(200))).toBeUndefined(); // past 32
    expect(prefixOf('_' + 'x'.repeat(40))).toBeUndefined(); // a separator alone

    const g = jsonl(
      { plan: 'free', sha256: sha('1'.repeat(20)), prefix: 'sk_\u0007live_' },
      { plan: 'free', sha256: sha('2'.repeat(20)), prefix: `sk_live_${secret}_` },
      { plan: 'free', sha256: sha('3'.repeat(20)), prefix: `sk_live_${secret.slice(0, 10)}` },
      { plan: 'free', sha256: sha('4'.repeat(20)), prefix: 'sk live_' },
      { plan: 'free', key: `rk_${randomBytes(16).toString('hex')}`, prefix: 'rk_' },
    );
    const bad = await keys(foreign, 'import', g, '--dry-run');
    expect(bad.code).toBe(1);
    expect(bad.stdout.trim().split('\n')).toEqual([
      'line 1: refuse: prefix: visible ASCII characters only (no space or control character)',
      'line 2: refuse: prefix: at most 32 characters (a prefix, never a whole key)',
      'line 3: refuse: prefix: must end in "_" or "-" (the separator before the secret part)',
      'line 4: refuse: prefix: visible ASCII characters only (no space or control character)',
      'line 5: refuse: prefix: give it only with sha256 (with key, the prefix is taken from the key)',
      'Dry run (nothing written): would import 0, unchanged 0, refused 5.',
    ]);
    expect(bad.stdout + bad.stderr).not.toContain(secret);
    // A CSV prefix column reads the same.
    const c = await keys(foreign, 'import', csv(`id,plan,sha256,prefix\np_csv,free,${sha('5'.repeat(20))},ak-\n`));
    expect(c.code, c.stderr).toBe(0);
    expect(await record('p_csv')).toMatchObject({ prefix: 'ak-' });
  }, 60_000);
});

describe('keys rotate --keep-prefix', () => {
  it('gives a key with the recorded prefix that the gateway accepts; a second rotation keeps it; the old key stops after its grace', async () => {
    const old = `sk_live_${randomBytes(16).toString('hex')}`;
    expect((await keys(foreign, 'import', jsonl({ id: 'rot_a', plan: 'free', key: old }))).code).toBe(0);
    expect(await call(old)).toBe(200);
    const r = await keys(foreign, 'rotate', 'rot_a', '--keep-prefix', '--grace', '2', '--json');
    expect(r.code, r.stderr).toBe(0);
    const first = JSON.parse(r.stdout) as { key: string; prefix: string; graceSeconds: number };
    expect(first.key).toMatch(/^sk_live_[0-9A-Za-z]{49}$/);
    expect(first.prefix).toBe('sk_live_');
    expect(await call(first.key)).toBe(200);
    expect(await call(old)).toBe(200); // in its grace
    const started = Date.now();
    await waitFor(async () => (await call(old)) === 401, 'the old key stops after its grace', 30_000, 200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    // Twice: the prefix stays, the first rotated key stops at once (no grace).
    const again = await keys(foreign, 'rotate', 'rot_a', '--keep-prefix');
    expect(again.code, again.stderr).toBe(0);
    const second = again.stdout
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l.startsWith('sk_live_'))!;
    expect(second).toMatch(/^sk_live_[0-9A-Za-z]{49}$/);
    expect(second).not.toBe(first.key);
    expect(await call(second)).toBe(200);
    expect(await call(first.key)).toBe(401);
    expect((await record('rot_a')).prefix).toBe('sk_live_');
    // A rotation without it issues a tg_ key, and the record forgets the prefix.
    const plain = await keys(foreign, 'rotate', 'rot_a', '--json');
    const issued = JSON.parse(plain.stdout) as { key: string; prefix?: string };
    expect(issued.key.startsWith('tg_')).toBe(true);
    expect(issued).not.toHaveProperty('prefix');
    expect(await call(issued.key)).toBe(200);
  }, 60_000);

  it('is refused for a key without a prefix, a revoked key, and when auth.foreignKeys is false; the key unchanged', async () => {
    const none = `x${randomBytes(20).toString('hex')}`;
    const withPrefix = `sk_live_${randomBytes(16).toString('hex')}`;
    expect((await keys(foreign, 'import', jsonl({ id: 'rot_none', plan: 'free', key: none }, { id: 'rot_rev', plan: 'free', key: withPrefix }))).code).toBe(0);
    const noPrefix = await keys(foreign, 'rotate', 'rot_none', '--keep-prefix');
    expect(noPrefix.code).toBe(1);
    expect(errLines(noPrefix)).toEqual([
      'error: key rot_none has no recorded prefix (only keys imported with one have it: a plaintext key with a separator near its start, or a prefix column); rotate without keeping the prefix',
    ]);
    const strictRefusal = await keys(strict, 'rotate', 'rot_rev', '--keep-prefix');
    expect(strictRefusal.code).toBe(1);
    expect(errLines(strictRefusal)).toEqual([
      'error: cannot keep the prefix: auth.foreignKeys is false, so the gateway accepts only keys with the issued prefix "tg_" and would refuse the new key; rotate without keeping the prefix, or set auth.foreignKeys: true',
    ]);
    expect(await call(none)).toBe(200);
    expect(await call(withPrefix)).toBe(200);
    expect((await keys(foreign, 'revoke', 'rot_rev')).code).toBe(0);
    const revoked = await keys(foreign, 'rotate', 'rot_rev', '--keep-prefix');
    expect(revoked.code).toBe(1);
    expect(errLines(revoked)).toEqual(['error: key rot_rev is revoked; create a new key instead']);
    expect(await record('rot_rev')).toMatchObject({ status: 'revoked', hash: sha(withPrefix) });
    expect(await record('rot_none')).toMatchObject({ hash: sha(none) });
  }, 60_000);
});
