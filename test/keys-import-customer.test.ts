// `tollgate keys import` of a customer's own records (plaintext key or sha256, no id, no createdAt) as JSON lines and
// CSV, through the built CLI on a private redis-server: the plaintext is hashed and appears nowhere (Redis, stdout,
// stderr, refusals); a re-run changes nothing; bad fields are refused by line; --dry-run writes nothing (no audit
// line); --skip-invalid imports the rest and exits 0. Hostile files: a CSV formula in a name, a BOM, CRLF, quoted commas
// and newlines, duplicate header columns, a line of a megabyte.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { auditOf, assertBuilt, runCli, tempDir, withoutAudit, type CliResult } from './helpers/cli.js';
import { TestRedis } from './helpers/redis-server.js';
import { generateKey } from '../src/keys/format.js';
import { normaliseSha256 } from '../src/keys/import-records.js';

const PREFIX = 'cust:';
let redis: TestRedis;
let dir: ReturnType<typeof tempDir>;
let config: string;
let foreignConfig: string;
let n = 0;

const sha = (key: string) => createHash('sha256').update(key).digest('hex');
const keys = (cfg: string, ...args: string[]): Promise<CliResult> => runCli(['keys', ...args, '--config', cfg]);
const jsonl = (...records: unknown[]) => dir.write(`c-${++n}.jsonl`, records.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join('\n') + '\n');
const csvFile = (text: string | Buffer, ext = 'csv') => dir.write(`c-${++n}.${ext}`, text as string);

/** Every key and value in Redis as one string: what "the plaintext is nowhere" and "nothing written" look at. */
async function dump(): Promise<string> {
  const c = redis.client();
  try {
    const out: string[] = [];
    for (const k of (await c.keys('*')).sort()) {
      const t = await c.type(k);
      out.push(`${k}=${t === 'string' ? await c.get(k) : t === 'set' ? (await c.smembers(k)).sort().join(',') : t}`);
    }
    return out.join('\n');
  } finally {
    c.disconnect();
  }
}

async function idOfHash(hash: string): Promise<string | null> {
  const c = redis.client();
  try {
    return await c.get(`${PREFIX}keyhash:${hash}`);
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
  dir = tempDir();
  const base = { redis: { url: redis.url, prefix: PREFIX }, plans: { free: { perMinute: 10, perDay: 100 }, pro: { perMinute: 20, perDay: 200 } } };
  config = dir.write('gateway.yaml', base);
  foreignConfig = dir.write('foreign.yaml', { ...base, auth: { foreignKeys: true } });
}, 60_000);

afterAll(async () => {
  await redis?.stop();
  dir?.remove();
});

describe('customer records as JSON lines', () => {
  it('hashes a plaintext key (never stored or printed), takes sha256 in hex or base64, gives a missing id a generated one; a re-run changes nothing', async () => {
    const issued = generateKey();
    const foreign = `sk_live_${randomBytes(16).toString('hex')}`;
    const b64key = `legacy-${randomBytes(12).toString('hex')}`;
    const hexKey = `legacy-${randomBytes(12).toString('hex')}`;
    const b64 = createHash('sha256').update(b64key).digest('base64');
    const f = jsonl(
      { name: 'Acme', plan: 'pro', key: issued, metadata: { customer: 'c_1' } },
      { id: 'cust_2', plan: 'free', key: foreign, perMinute: 5, expiresAt: '2030-01-01T00:00:00+02:00' },
      { plan: 'free', sha256: b64 },
      { plan: 'free', sha256: sha(hexKey).toUpperCase() },
      { plan: 'free', sha256: b64.replace(/=$/, ''), name: 'twin of line 3' },
    );
    // Line 5 is line 3's hash without its padding: the same digest, refused as a repeat within the file.
    const dry = await keys(foreignConfig, 'import', '--file', f, '--dry-run');
    expect(withoutAudit(dry.stderr).trim().split('\n')).toEqual([
      'line 5: a hash of this record is also on line 3',
      'error: this import would be refused: every record must pass before any is written (see above), or give --skip-invalid',
    ]);
    expect(dry.code).toBe(1);
    // The listing: each record's outcome by line (an id only where the record gives one), then the counts.
    expect(dry.stdout.trim().split('\n')).toEqual([
      'line 1: import',
      'line 2: import cust_2',
      'line 3: import',
      'line 4: import',
      'line 5: refuse: a hash of this record is also on line 3',
      'Dry run (nothing written): would import 0, unchanged 0, refused 1.',
    ]);
    expect(auditOf(dry.stderr)).toEqual([]);
    const good = jsonl(
      { name: 'Acme', plan: 'pro', key: issued, metadata: { customer: 'c_1' } },
      { id: 'cust_2', plan: 'free', key: foreign, perMinute: 5, expiresAt: '2030-01-01T00:00:00+02:00' },
      { plan: 'free', sha256: b64 },
      { plan: 'free', sha256: sha(hexKey).toUpperCase() },
    );
    const r = await keys(foreignConfig, 'import', '--file', good);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('Imported 4, unchanged 0.');
    expect(auditOf(r.stderr)).toEqual([expect.objectContaining({ action: 'import', imported: 4, unchanged: 0, refused: 0 })]);
    const acme = (await idOfHash(sha(issued)))!;
    expect(acme).toMatch(/^key_[0-9A-Za-z]{16}$/);
    expect(await record(acme)).toMatchObject({ name: 'Acme', plan: 'pro', metadata: { customer: 'c_1' }, status: 'active', hash: sha(issued) });
    expect(await idOfHash(sha(foreign))).toBe('cust_2');
    expect(await record('cust_2')).toMatchObject({ perMinute: 5, expiresAt: '2029-12-31T22:00:00.000Z' });
    expect(await idOfHash(sha(b64key))).toMatch(/^key_/);
    expect(await idOfHash(sha(hexKey))).toMatch(/^key_/);
    const everything = `${await dump()}${r.stdout}${r.stderr}${dry.stdout}${dry.stderr}`;
    for (const plain of [issued, foreign, b64key, hexKey]) expect(everything).not.toContain(plain);
    // The same file again: every record is there as given (those without an id found by their hash).
    const before = await dump();
    const again = await keys(foreignConfig, 'import', good);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout.trim()).toBe('Imported 0, unchanged 4.');
    expect(await dump()).toBe(before);
    // The same hash with another plan is not "already there": it belongs to the stored key.
    const other = await keys(foreignConfig, 'import', jsonl({ plan: 'free', key: issued }));
    expect(withoutAudit(other.stderr)).toContain(`line 1: a hash of this record belongs to key ${acme}; a hash opens one key only`);
  });

  it('refuses a foreign key unless auth.foreignKeys is on, and an issued key with a bad checksum, without ever quoting the key', async () => {
    const foreign = `sk_live_${randomBytes(16).toString('hex')}`;
    const good = generateKey();
    const mistyped = good.slice(0, -1) + (good.endsWith('A') ? 'B' : 'A');
    const f = jsonl({ plan: 'free', key: foreign }, { plan: 'free', key: mistyped }, { plan: 'free', key: 'short' }, { plan: 'free', key: `${foreign} x` });
    const before = await dump();
    const r = await keys(config, 'import', f);
    expect(r.code).toBe(1);
    expect(await dump()).toBe(before);
    const lines = withoutAudit(r.stderr).trim().split('\n');
    expect(lines).toEqual([
      'line 1: key: not an issued key (prefix "tg_"); keys of another shape need auth.foreignKeys: true in the config',
      'line 2: key: starts with the issued prefix "tg_" but is not a valid issued key (its checksum does not match)',
      'line 3: key: not an issued key (prefix "tg_"); keys of another shape need auth.foreignKeys: true in the config',
      'line 4: key: not an issued key (prefix "tg_"); keys of another shape need auth.foreignKeys: true in the config',
      'error: nothing was imported: every record must pass before any is written (see above)',
    ]);
    const withForeign = await keys(foreignConfig, 'import', f);
    expect(withoutAudit(withForeign.stderr)).toContain('line 3: key: a foreign key must be 16-256 visible ASCII characters (no spaces)');
    expect(withoutAudit(withForeign.stderr)).toContain('line 4: key: a foreign key must be');
    for (const out of [r.stdout, r.stderr, withForeign.stdout, withForeign.stderr]) for (const k of [foreign, mistyped]) expect(out).not.toContain(k);
  });

  it('refuses bad fields with their line numbers', async () => {
    const f = jsonl(
      { plan: 'gold', sha256: sha('a') },
      { plan: 'free', sha256: 'abc' },
      { plan: 'free', sha256: sha('b'), key: generateKey() },
      { plan: 'free' },
      { plan: 'free', sha256: sha('c'), perMinute: 0 },
      { plan: 'free', sha256: sha('d'), perDay: 1.5 },
      { plan: 'free', sha256: sha('e'), expiresAt: 'next tuesday' },
      { plan: 'free', sha256: sha('f'), metadata: { a: 1 } },
      { plan: 'free', sha256: sha('g'), metadata: ['x'] },
      { plan: 'free', sha256: sha('h'), colour: 'red' },
      [1, 2],
      '{"plan": "free", "sha256": ',
      { plan: 'free', sha256: sha('i'), id: 'bad id!' },
      { plan: 'free', sha256: sha('j'), perMinute: '5' },
    );
    const r = await keys(config, 'import', f);
    expect(r.code).toBe(1);
    const lines = withoutAudit(r.stderr).trim().split('\n');
    expect(lines.map((l) => l.replace(/:.*/, ''))).toEqual([...Array.from({ length: 14 }, (_, i) => `line ${i + 1}`), 'error']);
    expect(lines[0]).toBe('line 1: unknown plan "gold"; plans: free, pro');
    expect(lines[1]).toMatch(/^line 2: sha256: expected 64 hex digits, or base64/);
    expect(lines[2]).toBe('line 3: give key or sha256, not both');
    expect(lines[3]).toBe('line 4: give key (the plaintext, hashed on import) or sha256');
    expect(lines[4]).toMatch(/^line 5: perMinute: /);
    expect(lines[5]).toMatch(/^line 6: perDay: /);
    expect(lines[6]).toBe('line 7: expiresAt: expected an ISO-8601 date-time with its offset, e.g. 2027-01-01T00:00:00Z');
    expect(lines[7]).toMatch(/^line 8: metadata\.a: /);
    expect(lines[8]).toMatch(/^line 9: metadata: /);
    expect(lines[9]).toMatch(/^line 10: \(record\): .*colour/);
    expect(lines[10]).toBe('line 11: not a JSON object');
    expect(lines[11]).toBe('line 12: not JSON');
    expect(lines[12]).toMatch(/^line 13: id: /);
    expect(lines[13]).toMatch(/^line 14: perMinute: /);
  });

  it('--skip-invalid imports the records that pass, lists the refused ones on stderr and exits 0', async () => {
    const k1 = `skip-${randomBytes(8).toString('hex')}`;
    const f = jsonl({ plan: 'free', sha256: sha(k1) }, { plan: 'gold', sha256: sha('x') }, { plan: 'free', sha256: 'nope' });
    const r = await keys(config, 'import', '--file', f, '--skip-invalid');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('Imported 1, unchanged 0, refused 2.');
    expect(
      withoutAudit(r.stderr)
        .trim()
        .split('\n')
        .map((l) => l.slice(0, 7)),
    ).toEqual(['line 2:', 'line 3:']);
    expect(auditOf(r.stderr)).toEqual([expect.objectContaining({ imported: 1, refused: 2 })]);
    expect(await idOfHash(sha(k1))).toMatch(/^key_/);
  });

  it('a line of a megabyte is refused by its number; the lines around it are read', async () => {
    const k = `huge-${randomBytes(8).toString('hex')}`;
    const f = jsonl({ plan: 'free', sha256: sha(k) }, JSON.stringify({ plan: 'free', sha256: sha('y'), name: 'x'.repeat(1 << 20) }), {
      plan: 'gold',
      sha256: sha('z'),
    });
    const r = await keys(config, 'import', f, '--dry-run');
    expect(withoutAudit(r.stderr).trim().split('\n')).toEqual([
      'line 2: longer than 65536 bytes',
      'line 3: unknown plan "gold"; plans: free, pro',
      'error: this import would be refused: every record must pass before any is written (see above), or give --skip-invalid',
    ]);
  });

  it('arguments: no file, both a file and --file, an unknown format, a directory', async () => {
    expect((await keys(config, 'import')).stderr).toContain('no file to import: give --file FILE');
    expect((await keys(config, 'import', 'a.jsonl', '--file', 'b.jsonl')).stderr).toContain('give the file once');
    expect((await keys(config, 'import', '--file', 'a.jsonl', '--format', 'xml')).code).toBe(2);
    const r = await keys(config, 'import', '--file', dir.dir);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(/^error: cannot read .*: /);
  });
});

describe('customer records as CSV', () => {
  it('reads a BOM, CRLF, quoted commas and newlines and metadata.<name> columns; a formula in a name is stored as text', async () => {
    const ka = `csv-a-${randomBytes(8).toString('hex')}`;
    const kb = `csv-b-${randomBytes(8).toString('hex')}`;
    const text =
      '\ufeffname,plan,sha256,metadata.customer,perMinute\r\n' +
      `"Smith, Jones & Co",free,${sha(ka)},c_9,7\r\n` +
      `"=HYPERLINK(""http://evil"")\nline two",pro,${createHash('sha256').update(kb).digest('base64')},,\r\n`;
    const f = csvFile(text);
    const r = await keys(config, 'import', '--file', f);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('Imported 2, unchanged 0.');
    expect(await record((await idOfHash(sha(ka)))!)).toMatchObject({ name: 'Smith, Jones & Co', plan: 'free', metadata: { customer: 'c_9' }, perMinute: 7 });
    const b = (await idOfHash(sha(kb)))!;
    expect(await record(b)).toMatchObject({ name: '=HYPERLINK("http://evil")\nline two', plan: 'pro' });
    expect(await record(b)).not.toHaveProperty('metadata');
    // Again: nothing changes.
    const again = await keys(config, 'import', f);
    expect(again.stdout.trim()).toBe('Imported 0, unchanged 2.');
    // --format csv reads a CSV whatever its name.
    const named = csvFile(text, 'txt');
    // Rows are numbered by the line they end on (the quoted newline makes the second row end on line 4).
    expect((await keys(config, 'import', named, '--format', 'csv', '--dry-run')).stdout.trim().split('\n')).toEqual([
      'line 2: unchanged',
      'line 4: unchanged',
      'Dry run (nothing written): would import 0, unchanged 2.',
    ]);
  });

  it('refuses a file with duplicate or unknown header columns, a row of another length, a row line-numbered by where it ends', async () => {
    const before = await dump();
    const dup = await keys(config, 'import', csvFile(`plan,sha256,plan\nfree,${sha('q')},pro\n`));
    expect(dup.code).toBe(1);
    expect(withoutAudit(dup.stderr)).toMatch(/^error: .*CSV header: column "plan" appears twice$/);
    const unknown = await keys(config, 'import', csvFile(`plan,sha256,hash\nfree,${sha('q')},x\n`));
    expect(unknown.stderr.trim()).toMatch(/CSV header: unknown column "hash"/);
    const key = generateKey();
    const ragged = await keys(config, 'import', csvFile(`plan,key\nfree,${key},extra\n`));
    expect(ragged.stderr.trim()).toMatch(/a row with another number of cells than the header \(line 2\)$/);
    expect(ragged.stderr).not.toContain(key);
    const quoted = await keys(config, 'import', csvFile(`plan,key\nfree,ab"${key}\n`));
    expect(quoted.code).toBe(1);
    expect(quoted.stderr).not.toContain(key);
    const rows = await keys(config, 'import', csvFile(`name,plan,sha256\n"two\nlines",gold,${sha('r')}\nok,free,bad\n`));
    expect(withoutAudit(rows.stderr).trim().split('\n').slice(0, 2)).toEqual([
      'line 3: unknown plan "gold"; plans: free, pro',
      'line 4: sha256: expected 64 hex digits, or base64 of 32 bytes (44 characters with "=", or 43 without)',
    ]);
    expect(await dump()).toBe(before);
  });
});

describe('normaliseSha256', () => {
  it('takes hex in either case and canonical base64 with or without padding; nothing else', () => {
    const d = createHash('sha256').update('x').digest();
    expect(normaliseSha256(d.toString('hex').toUpperCase())).toBe(d.toString('hex'));
    expect(normaliseSha256(d.toString('base64'))).toBe(d.toString('hex'));
    expect(normaliseSha256(d.toString('base64').slice(0, 43))).toBe(d.toString('hex'));
    expect(normaliseSha256(d.toString('base64url'))).toBe(d.toString('base64url').match(/[-_]/) ? undefined : d.toString('hex'));
    expect(normaliseSha256(d.toString('hex').slice(1))).toBeUndefined();
    expect(normaliseSha256('')).toBeUndefined();
  });
});
