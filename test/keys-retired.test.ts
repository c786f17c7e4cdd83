// Retired keys stay retired: every hash a key ever had (rotated away, with or without grace; revoked) is remembered,
// so the documented re-import of an earlier export, or a customer file naming the old plaintext, under the same id,
// another id or none, is refused with its line number (and skipped with --skip-invalid), through the built CLI on a
// private redis-server; `keys export` carries the retired hashes so another Redis refuses them too; the key filter
// never holds them. Also the memory store, through KeyAdmin.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { assertBuilt, runCli, tempDir, withoutAudit, type CliResult } from './helpers/cli.js';
import { TestRedis } from './helpers/redis-server.js';
import { hashKey } from '../src/keys/format.js';
import { MemoryKeyStore } from '../src/keys/memory-store.js';
import { bufferSource } from '../src/keys/import-read.js';
import { testKeyAdmin } from './helpers/key-stores.js';

let redis: TestRedis;
let dir: ReturnType<typeof tempDir>;
let n = 0;

/** A config on its own Redis prefix, so each test starts from an empty key store. */
function session(foreignKeys = false): {
  keys: (...args: string[]) => Promise<CliResult>;
  ok: (...args: string[]) => Promise<CliResult>;
  file: (name: string, text: string) => string;
} {
  const prefix = `ret${++n}:`;
  const config = dir.write(`gateway-${n}.yaml`, {
    upstream: { url: 'http://127.0.0.1:9' },
    redis: { url: redis.url, prefix },
    auth: { foreignKeys },
    plans: { free: { perMinute: 10, perDay: 100 } },
  });
  const keys = (...args: string[]) => runCli(['keys', ...args, '--config', config]);
  return {
    keys,
    ok: async (...args: string[]) => {
      const r = await keys(...args);
      if (r.code !== 0) throw new Error(`keys ${args.join(' ')} exited ${r.code}: ${r.stderr}${r.stdout}`);
      return r;
    },
    file: (name: string, text: string) => {
      const path = join(dir.dir, `${n}-${name}`);
      writeFileSync(path, text);
      return path;
    },
  };
}

/** The refusal lines of an import's stderr (audit lines left out). */
const refusals = (r: CliResult) =>
  withoutAudit(r.stderr)
    .split('\n')
    .filter((l) => l.startsWith('line '));

beforeAll(async () => {
  assertBuilt();
  redis = await TestRedis.start();
  dir = tempDir();
}, 120_000);

afterAll(async () => {
  await redis?.stop();
  dir?.remove();
});

describe('a rotated or revoked key never comes back through an import', () => {
  it('create, export, rotate: re-importing the export is refused with its line, under the same id and under another; --skip-invalid skips it', async () => {
    const s = session();
    const created = JSON.parse((await s.ok('create', '--plan', 'free', '--json')).stdout) as { id: string; key: string };
    const other = JSON.parse((await s.ok('create', '--plan', 'free', '--json')).stdout) as { id: string };
    const exported = (await s.ok('export')).stdout;
    const line = exported
      .trim()
      .split('\n')
      .find((l) => l.includes(`"${created.id}"`))!;
    await s.ok('rotate', created.id);
    // The same file again: line 1 is the key's old record (its id now holds another hash).
    const same = await s.keys('import', s.file('same.jsonl', `${line}\n`));
    expect(same.code).toBe(1);
    expect(refusals(same)).toEqual([`line 1: key ${created.id} exists with other content; left as it is (change it with keys update, or revoke it)`]);
    // Under another id: before, the old hash came back as a new active key.
    const moved = line.replace(`"${created.id}"`, '"key_comeback"');
    const otherId = await s.keys('import', s.file('other-id.jsonl', `${JSON.stringify({ plan: 'free', sha256: hashKey('filler-not-a-key-1') })}\n${moved}\n`));
    expect(otherId.code).toBe(1);
    expect(refusals(otherId)).toEqual([
      `line 2: a hash of this record was key ${created.id}'s and was retired (rotated away or revoked); a retired key is never brought back`,
    ]);
    // A customer's record naming the old plaintext, without an id: refused the same way.
    const customer = await s.keys('import', s.file('customer.jsonl', `${JSON.stringify({ plan: 'free', key: created.key })}\n`));
    expect(customer.code).toBe(1);
    expect(refusals(customer)).toEqual([
      `line 1: a hash of this record was key ${created.id}'s and was retired (rotated away or revoked); a retired key is never brought back`,
    ]);
    const skipped = await s.ok(
      'import',
      '--skip-invalid',
      s.file('skip.jsonl', `${moved}\n${JSON.stringify({ plan: 'free', sha256: hashKey('a-new-customer-key') })}\n`),
    );
    expect(skipped.stdout).toContain('Imported 1, unchanged 0, refused 1.');
    expect(refusals(skipped)).toEqual([expect.stringMatching(/^line 1: a hash of this record was key /)]);
    const listed = JSON.parse((await s.ok('list', '--json')).stdout) as Array<{ id: string }>;
    expect(listed.map((k) => k.id).sort()).not.toContain('key_comeback');
    expect(listed).toHaveLength(3);
    expect(other.id).toMatch(/^key_/);
  }, 60_000);

  it('create, export, revoke (after a rotation with grace): the current and the grace hash are both refused, under any id', async () => {
    const s = session();
    const created = JSON.parse((await s.ok('create', '--plan', 'free', '--json')).stdout) as { id: string; key: string };
    const exported = (await s.ok('export')).stdout.trim();
    const rotated = JSON.parse((await s.ok('rotate', created.id, '--grace', '3600', '--json')).stdout) as { key: string };
    await s.ok('revoke', created.id);
    const same = await s.keys('import', s.file('same.jsonl', `${exported}\n`));
    expect(same.code).toBe(1);
    expect(refusals(same)).toEqual([`line 1: key ${created.id} exists with other content; left as it is (change it with keys update, or revoke it)`]);
    // The first hash was the grace hash when the key was revoked: a revoke used to drop it from the record.
    const first = await s.keys('import', s.file('first.jsonl', `${exported.replace(`"${created.id}"`, '"key_first"')}\n`));
    expect(first.code).toBe(1);
    expect(refusals(first)).toEqual([
      `line 1: a hash of this record was key ${created.id}'s and was retired (rotated away or revoked); a retired key is never brought back`,
    ]);
    const second = await s.keys('import', s.file('second.jsonl', `${JSON.stringify({ id: 'key_second', plan: 'free', key: rotated.key })}\n`));
    expect(second.code).toBe(1);
    expect(refusals(second)).toEqual([expect.stringMatching(new RegExp(`^line 1: a hash of this record (was|belongs to revoked) key ${created.id}`))]);
  }, 60_000);

  it('`keys export` carries the retired hashes: imported into another Redis, they are refused there too', async () => {
    const a = session();
    const created = JSON.parse((await a.ok('create', '--plan', 'free', '--json')).stdout) as { id: string; key: string };
    await a.ok('rotate', created.id);
    const exported = (await a.ok('export')).stdout.trim();
    expect(JSON.parse(exported)).toMatchObject({ id: created.id, retiredHashes: [hashKey(created.key)] });
    const b = session();
    await b.ok('import', b.file('move.jsonl', `${exported}\n`));
    // Importing the export again there changes nothing.
    expect((await b.ok('import', b.file('again.jsonl', `${exported}\n`))).stdout).toContain('Imported 0, unchanged 1.');
    expect(JSON.parse((await b.ok('export')).stdout)).toEqual(JSON.parse(exported));
    const back = await b.keys('import', b.file('back.jsonl', `${JSON.stringify({ plan: 'free', key: created.key })}\n`));
    expect(back.code).toBe(1);
    expect(refusals(back)).toEqual([
      `line 1: a hash of this record was key ${created.id}'s and was retired (rotated away or revoked); a retired key is never brought back`,
    ]);
    // An export record whose retired hash another key holds is refused: a hash opens, or once opened, one key only.
    const taken = JSON.parse((await b.ok('create', '--plan', 'free', '--json')).stdout) as { key: string };
    const thief = JSON.stringify({ ...JSON.parse(exported), id: 'key_thief', hash: randomBytes(32).toString('hex'), retiredHashes: [hashKey(taken.key)] });
    const stolen = await b.keys('import', b.file('thief.jsonl', `${thief}\n`));
    expect(stolen.code).toBe(1);
    expect(refusals(stolen)).toEqual([expect.stringMatching(/^line 1: a hash of this record belongs to key key_/)]);
    // A revoked key's export carries its own hash among the retired ones: it moves as it is, and stays refused.
    const revoked = JSON.parse((await a.ok('create', '--plan', 'free', '--json')).stdout) as { id: string; key: string };
    await a.ok('revoke', revoked.id);
    const revokedLine = (await a.ok('export')).stdout
      .trim()
      .split('\n')
      .find((l) => (JSON.parse(l) as { id: string }).id === revoked.id)!;
    expect(JSON.parse(revokedLine)).toMatchObject({ id: revoked.id, status: 'revoked', retiredHashes: [hashKey(revoked.key)] });
    expect((await b.ok('import', b.file('revoked.jsonl', `${revokedLine}\n`))).stdout).toContain('Imported 1, unchanged 0.');
    const revived = await b.keys('import', b.file('revived.jsonl', `${JSON.stringify({ plan: 'free', key: revoked.key })}\n`));
    expect(revived.code).toBe(1);
    expect(refusals(revived)).toEqual([expect.stringMatching(new RegExp(`^line 1: a hash of this record belongs to revoked key ${revoked.id};`))]);
  }, 90_000);

  it('the memory store remembers too, and its key filter source holds no retired hash', async () => {
    const store = new MemoryKeyStore();
    const admin = testKeyAdmin(store);
    const created = await admin.issuer.create({ plan: 'free' });
    const rotated = await admin.lifecycle.rotate(created.record.id, 0);
    const hashes: string[] = [];
    await store.forEachHash((h) => hashes.push(...h));
    expect(hashes).toEqual([hashKey(rotated!.key)]);
    expect(await store.retiredHashes(created.record.id)).toEqual([hashKey(created.key)]);
    const record = JSON.stringify({ plan: 'free', sha256: hashKey(created.key) });
    const r = await admin.importer.importKeys(bufferSource(Buffer.from(`${record}\n`), 'jsonl'));
    expect(r.imported).toBe(0);
    expect(r.refusals).toEqual([
      { line: 1, error: `a hash of this record was key ${created.record.id}'s and was retired (rotated away or revoked); a retired key is never brought back` },
    ]);
    await admin.lifecycle.revoke(created.record.id);
    expect(await store.retiredHashes(created.record.id)).toEqual([hashKey(created.key), hashKey(rotated!.key)].sort());
  }, 60_000);
});
