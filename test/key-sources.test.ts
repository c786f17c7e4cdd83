// Where keys are read and which shapes are accepted (auth.sources, auth.foreignKeys, auth.issuedPrefix): a gateway
// composed as `tollgate serve` composes it, keys in a real redis-server, a real upstream on loopback. Key-store
// lookups are counted with Redis's INFO commandstats (a lookup by hash is one GET).
import { request as httpRequest, type OutgoingHttpHeaders } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, onTestFinished } from 'vitest';
import { generateKey, generateKeyId, hashKey } from '../src/keys/format.js';
import { validateConfig } from '../src/config/load.js';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { composeGateway } from '../src/compose.js';
import { Metrics } from '../src/observability/metrics.js';
import { startGateway } from '../src/server/gateway-server.js';
import { CheckedApi } from './helpers/openapi.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { captureLogger, commandCalls, startLimitsGateway, type LimitsGateway } from './helpers/limits.js';
import { compileKeySources } from '../src/http/credentials.js';
import { useStack } from './helpers/stack.js';

const stack = useStack({ redis: true, client: true });
let prefixes = 0;

function config(auth: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return testConfig({
    upstream: { url: stack.up.url },
    // A Redis prefix per gateway: every test starts with no keys and no counts.
    redis: { url: stack.redis.url, prefix: `ks${++prefixes}:` },
    plans: { free: { perMinute: 1000, perDay: 10_000 } },
    anonymous: { perMinute: 10_000 },
    auth,
    ...extra,
  });
}

async function gateway(auth: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<LimitsGateway> {
  const gw = await startLimitsGateway(config(auth, extra));
  onTestFinished(() => gw.close());
  // The key filter's first build reads the stored records (GETs) in the background: let it finish, so that the
  // lookups the tests count are the request path's alone.
  for (let i = 0; i < 300 && !gw.gateway.keys.knownHashes.isCertain; i++) await sleep(10);
  return gw;
}

/** Stores a key record whose hash is the SHA-256 of `plaintext`, as an import would (through the key store). */
async function storeForeignKey(gw: LimitsGateway, plaintext: string): Promise<string> {
  const id = generateKeyId();
  await gw.gateway.keys.store.create({ id, plan: 'free', createdAt: new Date().toISOString(), status: 'active', hash: hashKey(plaintext) });
  return id;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: { code?: string; message?: string; plan?: string };
}

/** One request with headers exactly as given (an array value is sent as repeated header lines). */
function send(gw: LimitsGateway, path: string, headers: OutgoingHttpHeaders = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: gw.port, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: Answer['body'] = {};
        try {
          body = JSON.parse(text) as Answer['body'];
        } catch {
          // not JSON
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
      });
    });
    req.setTimeout(5000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

/** Key-store lookups so far: a lookup by hash is one GET (the record's read, a second, only for a known hash). */
async function gets(): Promise<number> {
  return (await commandCalls(stack.client)).get('get') ?? 0;
}

const ALL = { sources: ['bearer', 'header:X-API-Key', 'query:api_key'], foreignKeys: true };
const LEGACY = 'sk_live_51HxQz8Lm3Vb9TqWc2Ry7Pk';

describe('auth.sources: where a key is read', () => {
  it('reads a key from the bearer token, a header or a query parameter, and removes it before proxying', async () => {
    const gw = await gateway(ALL);
    const { id, key } = await gw.createKey({});
    stack.up.seen.length = 0;
    expect((await send(gw, '/v1/things', { authorization: `Bearer ${key}` })).status).toBe(200);
    expect((await send(gw, '/v1/things?b=2', { 'x-api-key': key })).status).toBe(200);
    const viaQuery = await send(gw, `/v1/things?b=2&api_key=${key}&a=%41+x&&c;d=1`);
    expect(viaQuery.status).toBe(200);
    expect(stack.up.seen.map((s) => s.headers['x-consumer-id'])).toEqual([id, id, id]);
    // The key is gone from what the upstream receives; the rest of the query is as it was sent, byte for byte.
    expect(stack.up.seen.map((s) => s.url)).toEqual(['/v1/things', '/v1/things?b=2', '/v1/things?b=2&a=%41+x&&c;d=1']);
    for (const s of stack.up.seen) {
      expect(s.headers.authorization).toBeUndefined();
      expect(s.headers['x-api-key']).toBeUndefined();
      expect(JSON.stringify(s)).not.toContain(key);
    }
    // The only parameter: the query goes with it. An escaped name is the same name (upstreams decode it too).
    stack.up.seen.length = 0;
    expect((await send(gw, `/v1/things?api_key=${key}`)).status).toBe(200);
    expect((await send(gw, `/v1/things?api%5Fkey=${key}&x=1`)).status).toBe(200);
    expect(stack.up.seen.map((s) => s.url)).toEqual(['/v1/things', '/v1/things?x=1']);
  });

  it('reads only the sources listed: the default reads the bearer token alone', async () => {
    const plain = await gateway({});
    const { key } = await plain.createKey({});
    const viaHeader = await send(plain, '/v1/things', { 'x-api-key': key });
    expect(viaHeader.status).toBe(401);
    expect(viaHeader.body.code).toBe('missing_api_key');
    expect((await send(plain, `/v1/things?api_key=${key}`)).body.code).toBe('missing_api_key');

    const headerOnly = await gateway({ sources: ['header:Api-Key'] });
    const other = await headerOnly.createKey({});
    // A bearer token is not read at all here: not a conflict, not a key.
    expect((await send(headerOnly, '/v1/things', { 'api-key': other.key, authorization: `Bearer ${generateKey()}` })).status).toBe(200);
    const missing = await send(headerOnly, '/v1/things', { authorization: `Bearer ${other.key}` });
    expect(missing.status).toBe(401);
    expect(missing.body.message).toBe('An API key is required: send "Api-Key: <key>".');
    expect(missing.headers['www-authenticate']).toBe('Bearer realm="tollgate"');
  });

  it('takes the key from the first source that carries one (Basic credentials are no bearer key)', async () => {
    const gw = await gateway({ sources: ['bearer', 'header:X-API-Key'] });
    const { id, key } = await gw.createKey({});
    stack.up.seen.length = 0;
    expect((await send(gw, '/v1/things', { authorization: 'Basic dXNlcjpwYXNz', 'x-api-key': key })).status).toBe(200);
    expect(stack.up.seen[0]!.headers['x-consumer-id']).toBe(id);
    const none = await send(gw, '/v1/things', { authorization: 'Basic dXNlcjpwYXNz' });
    expect(none.body.message).toBe('An API key is required: send "Authorization: Bearer <key>" or "X-API-Key: <key>".');
  });

  it("removes exactly what carried the gateway's key: a backend's own credentials (its users' bearer tokens, Basic) pass", async () => {
    // Keys from X-API-Key: the client's Authorization is its user's token for a backend that checks its own users.
    const headerOnly = await gateway({ sources: ['header:X-API-Key'] });
    const a = await headerOnly.createKey({});
    stack.up.seen.length = 0;
    const userToken = 'Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIn0.c2lnbmF0dXJl';
    expect((await send(headerOnly, '/v1/orders?page=2', { 'x-api-key': a.key, authorization: userToken, cookie: 'session=s1' })).status).toBe(200);
    expect(stack.up.seen[0]!.headers.authorization).toBe(userToken);
    expect(stack.up.seen[0]!.headers.cookie).toBe('session=s1');
    expect(stack.up.seen[0]!.headers['x-api-key']).toBeUndefined();
    expect(stack.up.seen[0]!.url).toBe('/v1/orders?page=2');
    expect(JSON.stringify(stack.up.seen[0])).not.toContain(a.key);

    // bearer among the sources: a Bearer header is the gateway's key and goes; another scheme carries no key, and passes.
    const both = await gateway({ sources: ['bearer', 'header:X-API-Key'] });
    const b = await both.createKey({});
    stack.up.seen.length = 0;
    expect((await send(both, '/v1/orders', { authorization: 'Basic dXNlcjpwYXNz', 'x-api-key': b.key })).status).toBe(200);
    expect((await send(both, '/v1/orders', { authorization: `Bearer ${b.key}` })).status).toBe(200);
    expect(stack.up.seen.map((s) => [s.headers.authorization, s.headers['x-api-key']])).toEqual([
      ['Basic dXNlcjpwYXNz', undefined],
      [undefined, undefined],
    ]);
  });

  it('refuses two different keys in one request with 401 invalid_api_key, and accepts the same key twice', async () => {
    const gw = await gateway(ALL);
    const a = await gw.createKey({});
    const b = await gw.createKey({});
    const conflicts: Array<[string, OutgoingHttpHeaders]> = [
      ['/v1/things', { authorization: `Bearer ${a.key}`, 'x-api-key': b.key }],
      [`/v1/things?api_key=${a.key}&api_key=${b.key}`, {}],
      [`/v1/things?api_key=${a.key}`, { 'x-api-key': b.key }],
      ['/v1/things', { 'x-api-key': [a.key, b.key] }],
      // A key and a made-up one: still two different keys, refused before any lookup.
      [`/v1/things?api_key=${LEGACY}`, { authorization: `Bearer ${a.key}` }],
    ];
    stack.up.seen.length = 0;
    for (const [path, headers] of conflicts) {
      const res = await send(gw, path, headers);
      expect(res.status, path).toBe(401);
      expect(res.body).toEqual({ code: 'invalid_api_key', status: 401, message: 'The request carries two different API keys; send one key, in one place.' });
      expect(res.headers['www-authenticate']).toBe('Bearer realm="tollgate", error="invalid_token"');
    }
    expect(stack.up.seen).toHaveLength(0);
    // The same key in two places (or twice in one) is one key.
    expect((await send(gw, `/v1/things?api_key=${a.key}`, { authorization: `Bearer ${a.key}`, 'x-api-key': a.key })).status).toBe(200);
    expect((await send(gw, `/v1/things?api_key=${a.key}&api_key=${a.key}`)).status).toBe(200);
    expect((await send(gw, '/v1/things', { 'x-api-key': [a.key, a.key] })).status).toBe(200);
  });

  it('answers the quota endpoint from the same sources', async () => {
    const gw = await gateway(ALL);
    const { key } = await gw.createKey({});
    const viaHeader = await send(gw, '/ratelimit', { 'x-api-key': key });
    expect(viaHeader.status).toBe(200);
    expect(viaHeader.body.plan).toBe('free');
    expect((await send(gw, `/ratelimit?api_key=${key}`)).body.plan).toBe('free');
    const conflict = await send(gw, `/ratelimit?api_key=${key}`, { 'x-api-key': generateKey() });
    expect(conflict.status).toBe(401);
    expect(conflict.body.code).toBe('invalid_api_key');
  });

  it('keeps the key header and parameter for the upstream with hideCredentials: false', async () => {
    const gw = await gateway(ALL, { upstream: { url: stack.up.url, hideCredentials: false } });
    const { key } = await gw.createKey({});
    stack.up.seen.length = 0;
    expect((await send(gw, `/v1/things?api_key=${key}&b=1`, { 'x-api-key': key })).status).toBe(200);
    expect(stack.up.seen[0]!.url).toBe(`/v1/things?api_key=${key}&b=1`);
    expect(stack.up.seen[0]!.headers['x-api-key']).toBe(key);
  });

  it('applies new sources on reload; a new issuedPrefix waits for a restart', async () => {
    const gw = await gateway({ sources: ['bearer'] });
    const { key } = await gw.createKey({});
    expect((await send(gw, '/v1/things', { 'x-api-key': key })).status).toBe(401);
    const next = config({ sources: ['header:X-API-Key'], issuedPrefix: 'acme_' }, {});
    const ignored = gw.runtime.apply({ ...next, redis: gw.runtime.config.redis } as typeof next);
    expect(ignored).toEqual(['auth.issuedPrefix']);
    expect((await send(gw, '/v1/things', { 'x-api-key': key })).status).toBe(200);
    expect((await send(gw, '/v1/things', { authorization: `Bearer ${key}` })).status).toBe(401);
    expect((await gw.createKey({})).key.startsWith('tg_')).toBe(true);
  });

  it('gives a request whose X-Request-Id holds its key a fresh id', async () => {
    const gw = await gateway(ALL);
    await storeForeignKey(gw, LEGACY);
    stack.up.seen.length = 0;
    const res = await send(gw, '/v1/things', { 'x-api-key': LEGACY, 'x-request-id': LEGACY });
    expect(res.status).toBe(200);
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(stack.up.seen[0]!.headers['x-request-id']).toBe(res.headers['x-request-id']);
    // An id that is not the key is kept.
    expect((await send(gw, '/v1/things', { 'x-api-key': LEGACY, 'x-request-id': 'order-4711-retry-2' })).headers['x-request-id']).toBe('order-4711-retry-2');
  });
});

describe('the logger redacts key headers by name', () => {
  it('a request logged with its headers has every configured key header redacted, whatever the key looks like', () => {
    compileKeySources(['bearer', 'header:X-Legacy-Token']);
    const { logger, lines } = captureLogger();
    logger.info({ req: { method: 'GET', headers: { 'x-legacy-token': LEGACY, accept: '*/*' } } }, 'a request');
    expect(lines[0]!.req).toEqual({ method: 'GET', headers: { 'x-legacy-token': '[redacted]', accept: '*/*' } });
    expect(JSON.stringify(lines)).not.toContain(LEGACY);
  });
});

describe('auth.foreignKeys: keys of any shape, looked up by SHA-256', () => {
  it('accepts a foreign key from every source when its hash is stored; refuses it with foreignKeys off', async () => {
    const gw = await gateway(ALL);
    const id = await storeForeignKey(gw, LEGACY);
    stack.up.seen.length = 0;
    expect((await send(gw, '/v1/things', { authorization: `Bearer ${LEGACY}` })).status).toBe(200);
    expect((await send(gw, '/v1/things', { 'x-api-key': LEGACY })).status).toBe(200);
    expect((await send(gw, `/v1/things?api_key=${encodeURIComponent(LEGACY)}`)).status).toBe(200);
    expect(stack.up.seen.map((s) => s.headers['x-consumer-id'])).toEqual([id, id, id]);

    const strict = await gateway({ sources: ['header:X-API-Key'] });
    await storeForeignKey(strict, LEGACY);
    const before = await gets();
    const refused = await send(strict, '/v1/things', { 'x-api-key': LEGACY });
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('invalid_api_key');
    expect(refused.headers['www-authenticate']).toBe('Bearer realm="tollgate", error="invalid_token"');
    expect((await gets()) - before).toBe(0);
  });

  it('refuses without a lookup: a mistyped issued key, 15 or 257 characters, spaces and control characters', async () => {
    const gw = await gateway(ALL);
    const { key } = await gw.createKey({});
    // Warm: the anonymous limit's own Redis commands are no GETs; this shows the count sees a lookup.
    const unknown = 'legacy-key-0000000000000001';
    let before = await gets();
    expect((await send(gw, '/v1/things', { 'x-api-key': unknown })).status).toBe(401);
    expect((await gets()) - before).toBe(1);

    const mistyped = key.slice(0, 10) + (key[10] === 'a' ? 'b' : 'a') + key.slice(11);
    const refusals: Array<[string, OutgoingHttpHeaders]> = [
      ['/v1/things', { 'x-api-key': mistyped }],
      ['/v1/things', { authorization: `Bearer ${mistyped}` }],
      [`/v1/things?api_key=${mistyped}`, {}],
      // Starts with the issued prefix, so it is judged as an issued key even with foreign keys on.
      ['/v1/things', { 'x-api-key': 'tg_legacyKeyThatIsLongEnough' }],
      ['/v1/things', { 'x-api-key': 'a'.repeat(15) }],
      ['/v1/things', { 'x-api-key': 'b'.repeat(257) }],
      ['/v1/things', { 'x-api-key': 'sk_live_has a space in it' }],
      [`/v1/things?api_key=${encodeURIComponent('sk_live_0123456789\u0000abc')}`, {}],
      [`/v1/things?api_key=${encodeURIComponent('sk_live_0123456789\nabc')}`, {}],
      [`/v1/things?api_key=${encodeURIComponent('sk_live_0123456789\u00e9abc')}`, {}],
      ['/v1/things?api_key=sk_live_0123456789%zzabc', {}],
    ];
    before = await gets();
    for (const [path, headers] of refusals) {
      const res = await send(gw, path, headers);
      expect(res.status, `${path} ${JSON.stringify(headers)}`).toBe(401);
      expect(res.body.code).toBe('invalid_api_key');
    }
    expect((await gets()) - before).toBe(0);

    // 16 and 256 characters are worth a lookup (unknown here: one GET each).
    before = await gets();
    expect((await send(gw, '/v1/things', { 'x-api-key': 'c'.repeat(16) })).status).toBe(401);
    expect((await send(gw, '/v1/things', { 'x-api-key': 'd'.repeat(256) })).status).toBe(401);
    expect((await gets()) - before).toBe(2);
  });

  it('lets a static config key with a foreign key’s hash in only with foreignKeys on', async () => {
    const keys = [{ id: 'legacy-static', plan: 'free', sha256: hashKey(LEGACY) }];
    const on = await gateway({ sources: ['bearer'], foreignKeys: true }, { keys });
    stack.up.seen.length = 0;
    expect((await send(on, '/v1/things', { authorization: `Bearer ${LEGACY}` })).status).toBe(200);
    expect(stack.up.seen[0]!.headers['x-consumer-id']).toBe('legacy-static');
    const off = await gateway({ sources: ['bearer'] }, { keys });
    expect((await send(off, '/v1/things', { authorization: `Bearer ${LEGACY}` })).status).toBe(401);
  });
});

describe('auth.issuedPrefix', () => {
  it('issues keys with the prefix, accepts them, and still refuses a mistyped one without a lookup', async () => {
    const gw = await gateway({ issuedPrefix: 'acme_live_', foreignKeys: true });
    const { id, key } = await gw.createKey({});
    expect(key).toMatch(/^acme_live_[0-9A-Za-z]{49}$/);
    stack.up.seen.length = 0;
    expect((await send(gw, '/v1/things', { authorization: `Bearer ${key}` })).status).toBe(200);
    expect(stack.up.seen[0]!.headers['x-consumer-id']).toBe(id);
    const rotated = await gw.gateway.admin.lifecycle.rotate(id, 0);
    expect(rotated!.key.startsWith('acme_live_')).toBe(true);
    const before = await gets();
    const bad = rotated!.key.slice(0, -1) + (rotated!.key.endsWith('a') ? 'b' : 'a');
    expect((await send(gw, '/v1/things', { authorization: `Bearer ${bad}` })).status).toBe(401);
    expect((await gets()) - before).toBe(0);
  });
});

describe('the admin API issues keys with auth.issuedPrefix', () => {
  it('POST /keys and POST /keys/{id}/rotate answer keys with the prefix, as docs/admin.openapi.yaml describes them', async () => {
    const token = generateAdminToken();
    const cfg = config({ issuedPrefix: 'acme_' }, { admin: { port: 0, tokens: [{ id: 'portal', sha256: hashAdminToken(token) }] } });
    const gateway = await composeGateway({ config: cfg, logger: silentLogger, metrics: new Metrics(), upstreamCheckTimeoutMs: 500 });
    const running = await startGateway({ gateway, logger: silentLogger });
    onTestFinished(() => running.shutdown());
    const api = new CheckedApi({ target: () => running.adminUrl!, token });
    const created = await api.call('POST', '/keys', { body: { plan: 'free' } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.key).toMatch(/^acme_[0-9A-Za-z]{49}$/);
    const rotated = await api.call('POST', `/keys/${created.body.id}/rotate`, { body: {} });
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body.key).toMatch(/^acme_[0-9A-Za-z]{49}$/);
    expect(rotated.body.key).not.toBe(created.body.key);
    expect(api.problems).toEqual([]);
    const res = await fetch(`${running.url}/v1/things`, { headers: { authorization: `Bearer ${rotated.body.key}` } });
    expect(res.status).toBe(200);
  });
});

describe('auth config errors name the path', () => {
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ sources: ['cookie:session'] }, 'auth.sources[0]: "cookie:session": expected "bearer", "header:<Name>" or "query:<param>"'],
    [{ sources: ['bearer', 'header:'] }, 'auth.sources[1]: "header:": a header name is 1-64 token characters'],
    [{ sources: ['header:X API Key'] }, 'auth.sources[0]: "header:X API Key": a header name is 1-64 token characters'],
    [{ sources: ['header:Host'] }, 'auth.sources[0]: "header:Host": Host cannot carry an API key (a reserved, hop-by-hop or gateway-set header)'],
    [{ sources: ['header:Cookie'] }, 'auth.sources[0]: "header:Cookie": Cookie cannot carry an API key'],
    [{ sources: ['header:content-length'] }, 'auth.sources[0]: "header:content-length": content-length cannot carry an API key'],
    [{ sources: ['header:Connection'] }, 'auth.sources[0]: "header:Connection": Connection cannot carry an API key'],
    [{ sources: ['header:X-Forwarded-For'] }, 'auth.sources[0]: "header:X-Forwarded-For": X-Forwarded-For cannot carry an API key'],
    [{ sources: ['header:X-Consumer-Id'] }, 'auth.sources[0]: "header:X-Consumer-Id": X-Consumer-Id cannot carry an API key'],
    [{ sources: ['header:Authorization'] }, 'auth.sources[0]: "header:Authorization": Authorization cannot carry an API key (use the "bearer" source)'],
    [{ sources: ['query:'] }, 'auth.sources[0]: "query:": a query parameter name is 1-64 characters'],
    [{ sources: ['query:api key'] }, 'auth.sources[0]: "query:api key": a query parameter name is 1-64 characters'],
    [{ sources: ['header:X-API-Key', 'header:x-api-key'] }, 'auth.sources[1]: this source is listed twice'],
    [{ sources: [] }, 'auth.sources: name at least one source'],
    [{ sources: 'bearer' }, 'auth.sources:'],
    [{ issuedPrefix: '' }, 'auth.issuedPrefix: expected 1-32 characters of A-Z a-z 0-9 . _ ~ -'],
    [{ issuedPrefix: 'tg/' }, 'auth.issuedPrefix: expected 1-32 characters'],
    [{ issuedPrefix: 'tg_ ' }, 'auth.issuedPrefix: expected 1-32 characters'],
    [{ issuedPrefix: 'x'.repeat(33) }, 'auth.issuedPrefix: expected 1-32 characters'],
    [{ issuedPrefix: 'tga_live_' }, 'auth.issuedPrefix: must not start with tga_: admin tokens have that prefix'],
    [{ foreignKeys: 'yes' }, 'auth.foreignKeys:'],
    [{ header: 'X-API-Key' }, 'auth.header: unknown field'],
  ];
  it.each(cases)('%j', (auth, error) => {
    const result = validateConfig({ auth });
    expect(result.ok).toBe(false);
    if (!result.ok)
      expect(
        result.errors.some((e) => e.startsWith(error)),
        result.errors.join('\n'),
      ).toBe(true);
  });

  it('takes the documented defaults and every valid source', () => {
    const result = validateConfig({ auth: { sources: ['query:api_key', 'header:X-API-Key', 'bearer', 'header:Api-Key'] } });
    expect(result.ok && result.config.auth).toEqual({
      sources: ['query:api_key', 'header:X-API-Key', 'bearer', 'header:Api-Key'],
      foreignKeys: false,
      issuedPrefix: 'tg_',
    });
    const defaults = validateConfig({});
    expect(defaults.ok && defaults.config.auth).toEqual({ sources: ['bearer'], foreignKeys: false, issuedPrefix: 'tg_' });
  });
});
