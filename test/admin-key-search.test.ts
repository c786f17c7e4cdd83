// GET /keys?q=: finding keys by id prefix, a piece of the name or a metadata value, through the real admin listener
// on real Redis. Each match rule (case, Unicode normalisation, text taken literally, never as a pattern), paging a
// search a key at a time (every match once, in id order), a page's bounded read (10,000 records at most: a search
// that matches late answers an empty page with a cursor, and the next page finds it), and what a buggy client or an
// attacker sends (an empty, overlong or repeated q, bytes that are not UTF-8): a 400 with the JSON error body or an
// answer, never a 500. Every answer is checked against docs/admin.openapi.yaml.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { composeGateway } from '../src/compose.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { Metrics } from '../src/observability/metrics.js';
import { PAGE_SCAN_MAX } from '../src/keys/listing.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { OpenApiDocument } from './helpers/openapi.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';

const doc = new OpenApiDocument(new URL('../docs/admin.openapi.yaml', import.meta.url));
const TOKEN = generateAdminToken();
let redis: TestRedis;
let up: TestUpstream;
let gw: RunningGateway;
const problems: string[] = [];

interface Answer {
  status: number;
  body: Record<string, unknown>;
  text: string;
}

async function admin(method: string, path: string, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${gw.adminUrl}${path}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  problems.push(...doc.check(method, path, res.status, Object.fromEntries(res.headers), text));
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {}
  return { status: res.status, body: parsed, text };
}

/** The ids a search finds, following nextCursor to the end (at most `pages` requests). */
async function search(query: string, pages = 50): Promise<{ ids: string[]; requests: number; sizes: number[] }> {
  const ids: string[] = [];
  const sizes: number[] = [];
  let cursor: string | null = null;
  let requests = 0;
  for (; requests < pages;) {
    const r: Answer = await admin('GET', `/keys?${query}${cursor ? `&cursor=${cursor}` : ''}`);
    requests++;
    expect(r.status, r.text).toBe(200);
    const keys = r.body.keys as Array<{ id: string }>;
    sizes.push(keys.length);
    ids.push(...keys.map((k) => k.id));
    cursor = r.body.nextCursor as string | null;
    if (cursor === null) break;
  }
  expect(cursor, 'the search ended within its pages').toBeNull();
  return { ids, requests, sizes };
}

const q = (text: string) => `q=${encodeURIComponent(text)}`;
const made: Record<string, string> = {};

beforeAll(async () => {
  redis = await TestRedis.start();
  up = await TestUpstream.start();
  const config = testConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url },
    redis: { url: redis.url, prefix: 'search:', commandTimeoutMs: 2000 },
    admin: { port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] },
    plans: { starter: { perMinute: 5, perDay: 100 }, growth: { perMinute: 50, perDay: 5000 } },
    anonymous: { perMinute: 1000 },
  });
  const gateway = await composeGateway({ config, logger: silentLogger, metrics: new Metrics(), upstreamCheckTimeoutMs: 500 });
  gw = await startGateway({ gateway, logger: silentLogger });
  const keys: Array<[string, Record<string, unknown>]> = [
    ['acme', { plan: 'starter', name: 'Acme-Prod', metadata: { customer: 'c_42', tier: 'gold' } }],
    ['acmeStaging', { plan: 'growth', name: 'acme staging' }],
    ['beta', { plan: 'growth', name: 'beta-app', metadata: { customer: 'c_7' } }],
    ['dots', { plan: 'growth', name: 'a.*b (x) [y] \\d+ $^|?' }],
    ['plainA', { plan: 'growth', name: 'aXXb' }],
    ['cafe', { plan: 'growth', name: 'Caf\u00e9 Zürich', metadata: { city: 'Z\u00fcrich' } }],
    ['decomposed', { plan: 'growth', name: 'cafe\u0301 au lait' }],
    ['emoji', { plan: 'growth', name: 'rocket \u{1F680} launch', metadata: { note: '日本語のキー' } }],
    ['turkish', { plan: 'growth', name: '\u0130stanbul' }],
  ];
  for (const [label, body] of keys) {
    const r = await admin('POST', '/keys', body);
    expect(r.status, r.text).toBe(201);
    made[label] = String(r.body.id);
  }
}, 60_000);

afterAll(async () => {
  await gw?.shutdown();
  await up?.close();
  await redis?.stop();
  expect(problems).toEqual([]);
});

describe('GET /keys?q=', () => {
  it('finds a key by its id (a prefix, or the whole id; case counts)', async () => {
    const id = made.beta!;
    expect((await search(q(id))).ids).toEqual([id]);
    expect((await search(q(id.slice(0, 12)))).ids).toContain(id);
    // Every id starts with key_: its prefix finds every key.
    expect((await search(q('key_'))).ids).toHaveLength(Object.keys(made).length);
    const flipped = id.slice(0, 4) + [...id.slice(4)].map((c) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase())).join('');
    expect((await search(q(flipped))).ids).not.toContain(id);
  });

  it('finds a key by a piece of its name, whatever the case', async () => {
    expect((await search(q('ACME'))).ids.sort()).toEqual([made.acme, made.acmeStaging].sort());
    expect((await search(q('prod'))).ids).toEqual([made.acme]);
    expect((await search(q('ta-ap'))).ids).toEqual([made.beta]);
    expect((await search(q('no such thing'))).ids).toEqual([]);
  });

  it('finds a key by any of its metadata values (not by the metadata names)', async () => {
    expect((await search(q('c_42'))).ids).toEqual([made.acme]);
    expect((await search(q('GOLD'))).ids).toEqual([made.acme]);
    expect((await search(q('c_'))).ids.sort()).toEqual([made.acme, made.beta].sort());
    expect((await search(q('customer'))).ids).toEqual([]);
  });

  it('takes regex metacharacters as the characters they are', async () => {
    // As a pattern, "a.*b" would find aXXb too; as text, only the name that holds ".*".
    expect((await search(q('a.*b'))).ids).toEqual([made.dots]);
    for (const text of ['(x)', '[y]', '\\d+', '$^|?', '(', '[', '\\', '*', '?', '+', '^', '$', '|', '.'])
      expect((await search(q(text))).ids, text).toEqual([made.dots]);
    expect((await search(q('.*'))).ids).toEqual([made.dots]);
    expect((await search(q('%'))).ids).toEqual([]);
  });

  it('compares Unicode text by its lower case after NFC normalisation', async () => {
    // "café" typed composed (U+00E9) finds the name stored decomposed (e + U+0301), and the other way round.
    expect((await search(q('caf\u00e9'))).ids.sort()).toEqual([made.cafe, made.decomposed].sort());
    expect((await search(q('cafe\u0301'))).ids.sort()).toEqual([made.cafe, made.decomposed].sort());
    expect((await search(q('ZÜRICH'))).ids).toEqual([made.cafe]);
    expect((await search(q('\u{1F680}'))).ids).toEqual([made.emoji]);
    expect((await search(q('日本語'))).ids).toEqual([made.emoji]);
    expect((await search(q('\u0130stanbul'))).ids).toEqual([made.turkish]);
  });

  it('combines with plan and status, and pages a key at a time: every match once, in id order', async () => {
    expect((await search(`${q('acme')}&plan=growth`)).ids).toEqual([made.acmeStaging]);
    await admin('POST', `/keys/${made.acmeStaging}/revoke`);
    expect((await search(`${q('acme')}&status=active`)).ids).toEqual([made.acme]);
    expect((await search(`${q('acme')}&status=revoked`)).ids).toEqual([made.acmeStaging]);
    const all = Object.values(made).sort();
    const paged = await search(`${q('key_')}&limit=1`);
    expect(paged.ids).toEqual(all);
    expect(paged.sizes.every((n) => n <= 1)).toBe(true);
    const two = await search(`${q('c')}&limit=2`);
    expect(two.ids).toEqual([...new Set(two.ids)]);
    expect(two.ids).toEqual([...two.ids].sort());
    // "c" is in acme's names, beta's customer c_7, both cafés and the rocket's "launch".
    expect(two.ids.sort()).toEqual([made.acme, made.acmeStaging, made.beta, made.cafe, made.decomposed, made.emoji].sort());
  });

  it('refuses an empty, overlong or repeated q with the JSON error body; odd bytes are only text', async () => {
    for (const query of ['q=', `q=${'x'.repeat(257)}`, `q=${'x'.repeat(10_000)}`, `q=${encodeURIComponent('\u{1F680}'.repeat(257))}`, 'q=a&q=b']) {
      const r = await admin('GET', `/keys?${query}`);
      expect(r.status, query.slice(0, 20)).toBe(400);
      expect(r.body).toMatchObject({ code: 'invalid_request', status: 400 });
      expect((r.body.problems as Array<{ path: string; message: string }>)[0]).toMatchObject({ path: 'query.q' });
      expect(String(r.body.message)).toMatch(/^query\.q: /);
    }
    expect((await admin('GET', `/keys?q=${'x'.repeat(257)}`)).body.message).toBe('query.q: expected 1-256 characters');
    // 256 characters is within the bound, counted in characters: 256 emoji are 512 UTF-16 code units.
    for (const query of [`q=${'x'.repeat(256)}`, `q=${encodeURIComponent('\u{1F680}'.repeat(256))}`]) {
      const r = await admin('GET', `/keys?${query}`);
      expect(r.status, query.slice(0, 20)).toBe(200);
      expect(r.body.keys).toEqual([]);
    }
    // Not UTF-8, a lone surrogate's bytes, a NUL, a broken escape: searched for as they decode, found nowhere.
    for (const query of ['q=%FF%FE', 'q=%ED%A0%80', 'q=%00', 'q=%%41', 'q=%E2%80%AE']) {
      const r = await admin('GET', `/keys?${query}`);
      expect(r.status, query).toBe(200);
      expect(r.body.keys, query).toEqual([]);
    }
  });

  it(`reads at most ${PAGE_SCAN_MAX} records a page: a late match comes on a later page, through the cursor`, async () => {
    // 10,050 keys imported (by hash) whose names match nothing, then one whose id sorts after all of them.
    const filler = Array.from({ length: PAGE_SCAN_MAX + 50 }, (_, i) => ({
      id: `m-${String(i).padStart(6, '0')}`,
      plan: 'growth',
      name: `filler ${i}`,
      sha256: createHash('sha256').update(`filler-${i}`).digest('hex'),
    }));
    filler.push({ id: 'zz-needle', plan: 'growth', name: 'the needle', sha256: createHash('sha256').update('needle').digest('hex') });
    const imported = await admin('POST', '/keys/import', filler);
    expect(imported.status, imported.text.slice(0, 300)).toBe(200);
    expect(imported.body.imported).toBe(PAGE_SCAN_MAX + 51);
    const found = await search(`${q('needle')}&limit=5`);
    expect(found.ids).toEqual(['zz-needle']);
    // The ids before the filler (key_...) are few: the first page reads 10,000 records and finds nothing, then
    // says where to go on; the last page reads the rest and finds the needle.
    expect(found.sizes).toEqual([0, 1]);
    const first = await admin('GET', `/keys?${q('needle')}&limit=5`);
    expect(first.body.keys).toEqual([]);
    expect(typeof first.body.nextCursor).toBe('string');
    // A page the filter does not thin out is not held back: it stops at its limit, as before.
    const plain = await admin('GET', '/keys?limit=1000');
    expect((plain.body.keys as unknown[]).length).toBe(1000);
  }, 120_000);
});
