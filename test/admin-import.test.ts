// POST /keys/import on the admin API, on real Redis through the real admin listener: a JSON array, JSON lines and CSV;
// dryRun and skipInvalid; the 10 MB body limit; audited with the token's id; no answer or log line ever holds a
// plaintext key; hostile bodies (not an array, not objects, another key's hash, unknown parameters) are answered with a
// clear error or refusals by line, never a 500. Every answer is checked against docs/admin.openapi.yaml.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { composeGateway } from '../src/compose.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { hashAdminToken, generateAdminToken } from '../src/admin/tokens.js';
import { generateKey } from '../src/keys/format.js';
import { Metrics } from '../src/observability/metrics.js';
import { testConfig } from './helpers/gateway.js';
import { captureLogger } from './helpers/limits.js';
import { OpenApiDocument } from './helpers/openapi.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';

const doc = new OpenApiDocument(new URL('../docs/admin.openapi.yaml', import.meta.url));
const PREFIX = 'aimp:';
const TOKEN = generateAdminToken();
let redis: TestRedis;
let up: TestUpstream;
let gw: RunningGateway;
const log = captureLogger();
const problems: string[] = [];
const sha = (key: string) => createHash('sha256').update(key).digest('hex');

async function post(query: string, body: string | Buffer, type: string): Promise<{ status: number; body: Record<string, unknown>; text: string }> {
  const res = await fetch(`${gw.adminUrl}/keys/import${query}`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': type }, body });
  const text = await res.text();
  problems.push(...doc.check('POST', `/keys/import${query}`, res.status, Object.fromEntries(res.headers), text));
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {}
  return { status: res.status, body: parsed, text };
}

async function idOfHash(hash: string): Promise<string | null> {
  const c = redis.client();
  try {
    return await c.get(`${PREFIX}keyhash:${hash}`);
  } finally {
    c.disconnect();
  }
}

beforeAll(async () => {
  redis = await TestRedis.start();
  up = await TestUpstream.start();
  const config = testConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url },
    redis: { url: redis.url, prefix: PREFIX, commandTimeoutMs: 1000 },
    admin: { port: 0, tokens: [{ id: 'migrator', sha256: hashAdminToken(TOKEN) }] },
    auth: { foreignKeys: true },
    plans: { free: { perMinute: 10, perDay: 100 } },
  });
  const gateway = await composeGateway({ config, logger: log.logger, metrics: new Metrics(), env: {}, upstreamCheckTimeoutMs: 500 });
  gw = await startGateway({ gateway, logger: log.logger });
}, 120_000);

afterAll(async () => {
  await gw?.shutdown();
  await up?.close();
  await redis?.stop();
});

describe('POST /keys/import', () => {
  it('a JSON array: dry run first (nothing written, no audit), then for real (audited with the token id); plaintexts never in an answer or a log line', async () => {
    const plain = `legacy_${randomBytes(12).toString('hex')}`;
    const bad = generateKey().slice(0, -2) + 'zz';
    const records = [{ plan: 'free', key: plain, name: 'Acme' }, { plan: 'free', key: bad }, { plan: 'gold', sha256: sha('x') }, 'just text', null];
    const dry = await post('?dryRun=true&skipInvalid=true', JSON.stringify(records), 'application/json');
    expect(dry.status, dry.text).toBe(200);
    expect(dry.body).toEqual({
      imported: 1,
      unchanged: 0,
      dryRun: true,
      warnings: [],
      // Every record's outcome, in order (the plaintext never in it).
      lines: [
        { line: 1, action: 'import' },
        { line: 2, action: 'refuse', reason: 'key: starts with the issued prefix "tg_" but is not a valid issued key (its checksum does not match)' },
        { line: 3, action: 'refuse', reason: 'unknown plan "gold"; plans: free' },
        { line: 4, action: 'refuse', reason: 'not a JSON object' },
        { line: 5, action: 'refuse', reason: 'not a JSON object' },
      ],
      refused: [
        { line: 2, reason: 'key: starts with the issued prefix "tg_" but is not a valid issued key (its checksum does not match)' },
        { line: 3, reason: 'unknown plan "gold"; plans: free' },
        { line: 4, reason: 'not a JSON object' },
        { line: 5, reason: 'not a JSON object' },
      ],
    });
    expect(await idOfHash(sha(plain))).toBeNull();
    expect(log.lines.filter((l) => l.msg === 'admin change')).toEqual([]);
    // Without skipInvalid, one refusal stops the whole import.
    const all = await post('', JSON.stringify(records), 'application/json');
    expect(all.status, all.text).toBe(422);
    expect(all.body).toMatchObject({ code: 'import_refused', status: 422, imported: 0, dryRun: false });
    expect((all.body.refused as Array<{ line: number }>).map((r) => r.line)).toEqual([2, 3, 4, 5]);
    expect(await idOfHash(sha(plain))).toBeNull();
    const real = await post('?skipInvalid=true', JSON.stringify(records), 'application/json');
    expect(real.body).toMatchObject({ imported: 1, unchanged: 0, dryRun: false });
    expect(await idOfHash(sha(plain))).toMatch(/^key_/);
    const audits = log.lines.filter((l) => l.msg === 'admin change');
    expect(audits.at(-1)).toMatchObject({ action: 'import', by: 'migrator', imported: 1, refused: 4 });
    expect(audits.at(-1)?.reqId).toEqual(expect.any(String));
    const again = await post('', JSON.stringify([records[0]]), 'application/json');
    expect(again.body).toEqual({ imported: 0, unchanged: 1, refused: [], warnings: [], dryRun: false });
    for (const text of [dry.text, all.text, real.text, again.text, JSON.stringify(log.lines)]) {
      expect(text).not.toContain(plain);
      expect(text).not.toContain(bad);
    }
  });

  it("JSON lines and CSV bodies; a record taking over another key's hash is refused", async () => {
    const k1 = `nd_${randomBytes(12).toString('hex')}`;
    const nd = await post('', `${JSON.stringify({ plan: 'free', sha256: sha(k1), id: 'nd_1' })}\n\n`, 'application/x-ndjson; charset=utf-8');
    expect(nd.body).toEqual({ imported: 1, unchanged: 0, refused: [], warnings: [], dryRun: false });
    const k2 = `csv_${randomBytes(12).toString('hex')}`;
    const csv = await post('', `\ufeffid,plan,sha256,metadata.team\r\ncsv_1,free,${sha(k2)},"a, b"\r\ntaker,free,${sha(k1)},\r\n`, 'text/csv');
    expect(csv.status, csv.text).toBe(422);
    expect(csv.body).toEqual({
      code: 'import_refused',
      status: 422,
      message: '1 record was refused (see refused); nothing was imported: every record must pass, or give skipInvalid=true',
      imported: 0,
      unchanged: 0,
      dryRun: false,
      warnings: [],
      refused: [{ line: 3, reason: 'a hash of this record belongs to key nd_1; a hash opens one key only' }],
    });
    expect(await idOfHash(sha(k1))).toBe('nd_1');
    const header = await post('', 'plan,plan\nfree,free\n', 'text/csv');
    expect(header.status).toBe(400);
    expect(header.body).toMatchObject({ code: 'invalid_request', message: 'CSV header: column "plan" appears twice' });
  });

  it('hostile bodies and parameters: a clear error, never a 500', async () => {
    expect((await post('', '{"plan":"free"}', 'application/json')).body).toMatchObject({ code: 'invalid_request', status: 400 });
    expect((await post('', '[{"plan":', 'application/json')).body).toMatchObject({ code: 'invalid_json', status: 400 });
    expect((await post('', '"text"', 'application/json')).status).toBe(400);
    expect((await post('', '<keys/>', 'application/xml')).body).toMatchObject({ code: 'unsupported_media_type', status: 415 });
    expect((await post('', '', '')).status).toBe(415);
    expect((await post('?dryRun=yes', '[]', 'application/json')).body).toMatchObject({ code: 'invalid_request' });
    expect((await post('?dryRun=true&dryRun=false', '[]', 'application/json')).status).toBe(400);
    const key = generateKey();
    const unknown = await post(`?${key}=true`, '[]', 'application/json');
    expect(unknown.status).toBe(400);
    expect(unknown.text).not.toContain(key);
    // Proto tricks are refused as unknown fields, by line.
    const proto = await post('', '[{"plan":"free","sha256":"' + sha('p') + '","__proto__":{"x":1}}]', 'application/json');
    expect(proto.status).toBe(422);
    expect((proto.body.refused as unknown[]).length).toBe(1);
    expect((await post('', '[]', 'application/json')).body).toEqual({ imported: 0, unchanged: 0, refused: [], warnings: [], dryRun: false });
  });

  it('a body over 10 MB is refused with 413 payload_too_large, naming the CLI', async () => {
    const big = Buffer.alloc(10 * 1024 * 1024 + 1, 0x20);
    const r = await post('', big, 'text/csv');
    expect(r.status).toBe(413);
    expect(r.body).toMatchObject({ code: 'payload_too_large' });
    expect(String(r.body.message)).toContain('tollgate keys import --file');
  });

  it('every answer matched the OpenAPI document', () => {
    expect(problems).toEqual([]);
  });
});
