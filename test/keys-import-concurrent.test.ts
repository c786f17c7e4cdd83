// Two imports at once on a real redis-server, as two gateway instances would run them (two connections, two key
// administrations): one import writes at a time, so the second is refused at once with import_in_progress and writes
// nothing, the first writes all of its records, and the second run again refuses the overlapping record by its line.
// Nothing is ever left half-written.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { KeyAdmin } from '../src/keys/admin.js';
import { KeyAdminError } from '../src/keys/admin-errors.js';
import type { ImportItem, ImportSource } from '../src/keys/import-run.js';
import { RedisKeyStore } from '../src/keys/redis-store.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { connectRedis, type RedisConnection } from '../src/storage/redis.js';
import { systemClock } from '../src/util/clock.js';
import { testConfig } from './helpers/gateway.js';
import { TestRedis } from './helpers/redis-server.js';

const PREFIX = 'conc:';
const config = testConfig({ upstream: { url: 'http://127.0.0.1:9' }, plans: { free: { perMinute: 10, perDay: 100 } } });
let redis: TestRedis;
const connections: RedisConnection[] = [];

/** A key administration on a connection of its own: what one gateway instance has. */
function instance(): KeyAdmin {
  const c = connectRedis({ url: redis.url, commandTimeoutMs: 2000, purpose: 'cli' });
  connections.push(c);
  return new KeyAdmin(new RedisKeyStore(c, new Keyspace(PREFIX)), systemClock, { plans: () => config.plans });
}

/** Every key under the prefix with its value: what "nothing written" is compared against. */
async function snapshot(): Promise<string[]> {
  const c = redis.client();
  try {
    const out: string[] = [];
    for (const k of (await c.keys(`${PREFIX}*`)).sort()) {
      if (k === `${PREFIX}keys:import:lock`) continue;
      const type = await c.type(k);
      out.push(`${k} ${type === 'string' ? await c.get(k) : type === 'set' ? (await c.smembers(k)).sort().join(',') : type}`);
    }
    return out;
  } finally {
    c.disconnect();
  }
}

const hash = () => randomBytes(32).toString('hex');
const records = (n: number, tag: string) => Array.from({ length: n }, (_, i) => ({ id: `${tag}_${i}`, plan: 'free', sha256: hash() }));

/** A source that yields its first `before` records, then waits for `gate` before the rest (each pass). */
function gated(items: unknown[], before: number, gate: Promise<void>, reached: () => void): ImportSource {
  return async function* (): AsyncGenerator<ImportItem> {
    for (const [i, record] of items.entries()) {
      if (i === before) {
        reached();
        await gate;
      }
      yield { line: i + 1, record };
    }
  };
}

const plain = (items: unknown[]): ImportSource =>
  async function* () {
    for (const [i, record] of items.entries()) yield { line: i + 1, record };
  };

beforeAll(async () => {
  redis = await TestRedis.start();
}, 120_000);

afterAll(async () => {
  for (const c of connections) await c.close();
  await redis?.stop();
});

describe('two imports at once, on two instances', () => {
  it('the second is refused with import_in_progress and writes nothing; the first writes everything; run again, the overlap is refused by its line', async () => {
    const a = instance();
    const b = instance();
    await Promise.all(connections.map((c) => c.waitForReady(5000)));
    const first = records(600, 'a');
    // The second file shares one hash with the first (line 3 of it) and brings 299 keys of its own.
    const second = records(300, 'b');
    second[2] = { ...second[2]!, sha256: first[450]!.sha256 };
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let reached!: () => void;
    const paused = new Promise<void>((r) => (reached = r));
    // A stops in the middle of its check, holding the lock (as a slow million-record check would).
    const running = a.importer.importKeys(gated(first, 300, gate, reached));
    await paused;
    const before = await snapshot();
    const refused = await b.importer.importKeys(plain(second)).then(
      () => 'resolved',
      (err: unknown) => (err instanceof KeyAdminError ? err.code : String(err)),
    );
    expect(refused).toBe('import_in_progress');
    expect(await snapshot()).toEqual(before);
    open();
    const done = await running;
    expect(done).toMatchObject({ imported: 600, unchanged: 0, refusals: [], wrote: true });
    const c = redis.client();
    try {
      expect(await c.scard(`${PREFIX}keys`)).toBe(600);
      expect(await c.get(`${PREFIX}keyhash:${first[450]!.sha256}`)).toBe('a_450');
      // The lock is released once the import is done.
      expect(await c.exists(`${PREFIX}keys:import:lock`)).toBe(0);
    } finally {
      c.disconnect();
    }
    // B again: the overlapping record is refused by its line and nothing of B is written.
    const again = await b.importer.importKeys(plain(second));
    expect(again).toMatchObject({
      imported: 0,
      wrote: false,
      refusals: [{ line: 3, error: 'a hash of this record belongs to key a_450; a hash opens one key only' }],
    });
    const c2 = redis.client();
    try {
      expect(await c2.scard(`${PREFIX}keys`)).toBe(600);
    } finally {
      c2.disconnect();
    }
  });

  it('a dry run takes no lock: it answers while another import runs', async () => {
    const a = instance();
    const b = instance();
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let reached!: () => void;
    const paused = new Promise<void>((r) => (reached = r));
    const running = a.importer.importKeys(gated(records(4, 'dry_a'), 2, gate, reached));
    await paused;
    const dry = await b.importer.importKeys(plain(records(3, 'dry_b')), undefined, { dryRun: true });
    expect(dry).toMatchObject({ imported: 3, dryRun: true, wrote: false });
    open();
    expect(await running).toMatchObject({ imported: 4 });
  });
});
