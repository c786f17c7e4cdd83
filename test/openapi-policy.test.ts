// A service's OpenAPI document as its route policy, end to end: the built CLI (`tollgate serve`) on a private
// redis-server, keys issued through the admin API, a real upstream on loopback. What the document says becomes what
// clients see, header for header: deprecated / x-deprecated-at / x-sunset / externalDocs.url / x-successor as
// Deprecation, Sunset and Link; a past x-sunset as 410 with the backend untouched; x-brownouts written at test time
// around now (410 with Retry-After) and in the future (200); x-stability as X-API-Stability and the service's
// stability map (403 plan_not_allowed before any quota); security: [] as a public operation under the anonymous
// limit; the deprecated-route report naming operations; validate: shadow, then enforce after a SIGHUP. Then hostile
// documents (`config check` refusing them with file#pointer), and descriptions that cannot be applied, found by
// `config check` and at start-up rather than on the first request.
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { hashAdminToken } from '../src/admin/tokens.js';
import { loadConfigFile } from '../src/config/load.js';
import { compileRoutes } from '../src/routing/routes.js';
import { assertBuilt, CliProcess, runCli, startServe, tempDir } from './helpers/cli.js';
import { freePort, TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';
import { waitFor } from './helpers/wait.js';

const TOKEN = 'tga_openapi-policy-test-token';
const ok200 = { '200': { description: 'ok' } };
/** An instant as x-brownouts writes it: seconds, Z. */
const iso = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
const NEXT_YEAR = new Date().getUTCFullYear() + 1;
const SUNSET_FUTURE = `${NEXT_YEAR}-06-01T00:00:00Z`;

/** Written at test time: a brownout from a minute ago to ten minutes from now, and one tomorrow. */
function petsDocument(now: number): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: { title: 'pets', version: '1' },
    servers: [{ url: 'https://api.example.com/v1' }],
    security: [{ bearer: [] }],
    paths: {
      '/pets/{petId}': {
        parameters: [{ name: 'petId', in: 'path', required: true, schema: { type: 'string' } }],
        get: {
          operationId: 'getPet',
          deprecated: true,
          'x-deprecated-at': '2026-01-15T09:30:00Z',
          'x-sunset': SUNSET_FUTURE,
          externalDocs: { url: 'https://docs.example.com/migrate to v2' },
          'x-successor': 'getPetV2',
          responses: ok200,
        },
      },
      '/pets-v2/{petId}': {
        parameters: [{ name: 'petId', in: 'path', required: true, schema: { type: 'string' } }],
        get: { operationId: 'getPetV2', responses: ok200 },
      },
      '/retired': { get: { operationId: 'retired', deprecated: true, 'x-deprecated-at': '2019-01-01', 'x-sunset': '2020-01-01', responses: ok200 } },
      '/browned': {
        get: {
          operationId: 'browned',
          'x-sunset': SUNSET_FUTURE,
          'x-successor': 'getPetV2',
          'x-brownouts': [`${iso(now - 60_000)}/${iso(now + 600_000)}`],
          responses: ok200,
        },
      },
      '/browned-later': {
        get: { operationId: 'brownedLater', 'x-sunset': SUNSET_FUTURE, 'x-brownouts': [`${iso(now + 86_400_000)}/PT1H`], responses: ok200 },
      },
      '/beta': { get: { operationId: 'betaThing', 'x-stability': 'beta', responses: ok200 } },
      '/stable': { get: { operationId: 'stableThing', 'x-stability': 'stable', responses: ok200 } },
      '/public': { get: { operationId: 'publicThing', security: [], responses: ok200 } },
      '/undated': { get: { operationId: 'undated', deprecated: true, responses: ok200 } },
      '/orders': {
        post: {
          operationId: 'createOrder',
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['sku', 'qty'],
                  additionalProperties: false,
                  properties: { sku: { type: 'string', minLength: 1 }, qty: { type: 'integer', minimum: 1 } },
                },
              },
            },
          },
          responses: ok200,
        },
      },
    },
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
  };
}

let redis: TestRedis;
let up: TestUpstream;
let dir: ReturnType<typeof tempDir>;
let gw: { proc: CliProcess; url: string };
let admin: string;
let configFile: string;

function gatewayConfig(validate: 'shadow' | 'enforce', adminPort: number): Record<string, unknown> {
  return {
    server: { port: 0 },
    log: { level: 'info' },
    redis: { url: redis.url, prefix: 'oapol:' },
    admin: { port: adminPort, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] },
    usage: { flushIntervalMs: 200 },
    plans: { free: { perMinute: 100, perDay: 1000 }, pro: { perMinute: 100, perDay: 1000 } },
    anonymous: { perMinute: 3 },
    services: { pets: { targets: [up.url], openapi: { file: 'pets.yaml', validate, stability: { beta: ['pro'] } } } },
  };
}

const call = (path: string, key?: string, init: RequestInit = {}): Promise<Response> =>
  fetch(`${gw.url}${path}`, {
    ...init,
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(init.headers as Record<string, string> | undefined) },
    signal: AbortSignal.timeout(5000),
  });

async function adminGet(path: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${admin}${path}`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(5000) });
  expect(res.status, `${path}: ${res.status}`).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

async function issueKey(plan: string): Promise<{ id: string; key: string }> {
  const res = await fetch(`${admin}/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ plan }),
    signal: AbortSignal.timeout(5000),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as { id: string; key: string };
}

/** The minute window's `used` of a key, read through the admin API (which does not count). */
async function minuteUsed(id: string): Promise<number> {
  const k = (await adminGet(`/keys/${id}`)) as { windows: Array<{ name: string; used: number }> };
  const w = k.windows.find((x) => x.name === 'minute');
  if (!w) throw new Error(`no minute window in ${JSON.stringify(k)}`);
  return w.used;
}

/** What the upstream saw of a path since `before`. */
const seenSince = (before: number, path: string): number => up.seen.slice(before).filter((s) => s.url.startsWith(path)).length;

beforeAll(async () => {
  assertBuilt();
  [redis, up] = await Promise.all([TestRedis.start(), TestUpstream.start()]);
  dir = tempDir();
  dir.write('pets.yaml', stringify(petsDocument(Date.now())));
  const adminPort = await freePort();
  admin = `http://127.0.0.1:${adminPort}`;
  configFile = dir.write('gateway.yaml', gatewayConfig('shadow', adminPort));
  gw = await startServe(configFile, 60_000);
}, 120_000);

afterAll(async () => {
  await gw?.proc.stop();
  await up?.close();
  await redis?.stop();
  dir?.remove();
}, 90_000);

describe('deprecation, sunset and successor from the document', () => {
  it('a deprecated operation sends Deprecation, Sunset and one Link with its docs and its successor operation', async () => {
    const { key } = await issueKey('free');
    const res = await call('/v1/pets/7', key);
    expect(res.status).toBe(200);
    expect(res.headers.get('deprecation')).toBe(`@${Date.UTC(2026, 0, 15, 9, 30) / 1000}`);
    expect(res.headers.get('deprecation')).toBe('@1768469400');
    const weekday = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'][new Date(SUNSET_FUTURE).getUTCDay()];
    expect(res.headers.get('sunset')).toBe(`${weekday}, 01 Jun ${NEXT_YEAR} 00:00:00 GMT`);
    expect(res.headers.get('link')).toBe('<https://docs.example.com/migrate%20to%20v2>; rel="deprecation", </v1/pets-v2/%7BpetId%7D>; rel="successor-version"');
    // Its successor is an ordinary route.
    const v2 = await call('/v1/pets-v2/7', key);
    expect([v2.status, v2.headers.get('deprecation'), v2.headers.get('link')]).toEqual([200, null, null]);
  });

  it('x-sunset in the past: 410 gone naming the sunset, the upstream not called', async () => {
    const { key } = await issueKey('free');
    const before = up.seen.length;
    const res = await call('/v1/retired', key);
    expect(res.status).toBe(410);
    const body = (await res.json()) as { code: string; message: string };
    expect(body).toMatchObject({ code: 'gone', message: 'GET /v1/retired was retired at 2020-01-01T00:00:00.000Z.' });
    expect(res.headers.get('sunset')).toBe('Wed, 01 Jan 2020 00:00:00 GMT');
    expect(res.headers.get('deprecation')).toBe('@1546300800');
    expect(seenSince(before, '/v1/retired')).toBe(0);
  });

  it('x-brownouts around now: 410 naming the sunset and successor, with Retry-After; a brownout tomorrow: 200', async () => {
    const { key } = await issueKey('free');
    const before = up.seen.length;
    const res = await call('/v1/browned', key);
    expect(res.status).toBe(410);
    const body = (await res.json()) as { code: string; message: string };
    expect(body.code).toBe('gone');
    expect(body.message).toMatch(
      new RegExp(
        `^GET /v1/browned is browned out until \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.000Z: it will be retired on ${NEXT_YEAR}-06-01T00:00:00\\.000Z; move to /v1/pets-v2/%7BpetId%7D\\.$`,
      ),
    );
    const until = Date.parse(/until (\S+):/.exec(body.message)![1]!);
    const retryAfter = Number(res.headers.get('retry-after'));
    // The brownout ends about ten minutes after the document was written, and Retry-After counts down to it.
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(600);
    expect(Math.abs(Date.now() + retryAfter * 1000 - until)).toBeLessThan(5000);
    expect(res.headers.get('sunset')).toBe(new Date(SUNSET_FUTURE).toUTCString());
    expect(seenSince(before, '/v1/browned')).toBe(0);
    const later = await call('/v1/browned-later', key);
    expect([later.status, later.headers.get('retry-after')]).toEqual([200, null]);
    expect(seenSince(before, '/v1/browned-later')).toBe(1);
  });
});

describe('x-stability and the service stability map', () => {
  it('X-API-Stability on the 200 and on the 401', async () => {
    const { key } = await issueKey('pro');
    const ok = await call('/v1/beta', key);
    expect([ok.status, ok.headers.get('x-api-stability')]).toEqual([200, 'beta']);
    const noKey = await call('/v1/beta');
    expect(noKey.status).toBe(401);
    expect(noKey.headers.get('x-api-stability')).toBe('beta');
    expect((await call('/v1/pets/1', key)).headers.get('x-api-stability')).toBeNull();
  });

  it('a free key gets 403 plan_not_allowed on beta and spends no quota; a pro key passes; stable is open to any plan', async () => {
    const free = await issueKey('free');
    const before = up.seen.length;
    for (let i = 0; i < 3; i++) {
      const res = await call('/v1/beta', free.key);
      expect(res.status).toBe(403);
      expect(res.headers.get('x-api-stability')).toBe('beta');
      expect(((await res.json()) as { code: string; message: string }).message).toBe('This route is beta: plan free is not allowed to call it (open to pro).');
    }
    expect(seenSince(before, '/v1/beta')).toBe(0);
    expect(await minuteUsed(free.id)).toBe(0);
    // Its first admitted request is its first counted one.
    const stable = await call('/v1/stable', free.key);
    expect([stable.status, stable.headers.get('x-api-stability'), stable.headers.get('x-ratelimit-remaining')]).toEqual([200, 'stable', '99']);
    expect(await minuteUsed(free.id)).toBe(1);
    const pro = await issueKey('pro');
    expect((await call('/v1/beta', pro.key)).status).toBe(200);
    expect((await call('/v1/stable', pro.key)).status).toBe(200);
  });
});

describe('security: []', () => {
  it('a public operation needs no key and is metered by the anonymous limit', async () => {
    const before = up.seen.length;
    const answers: Array<[number, string | null, string | null]> = [];
    for (let i = 0; i < 5; i++) {
      const res = await call('/v1/public');
      answers.push([res.status, res.headers.get('x-ratelimit-limit'), res.headers.get('x-ratelimit-remaining')]);
      if (res.status === 429) {
        expect(((await res.json()) as { code: string }).code).toBe('rate_limit_exceeded');
        break;
      }
    }
    // The anonymous limit (3 a minute per address; the 401s above took some of it) counts each request down to its 429.
    const ok = answers.filter((a) => a[0] === 200);
    expect(ok.length).toBeGreaterThan(0);
    expect(answers.at(-1)![0]).toBe(429);
    expect(answers.every((a) => a[1] === '3')).toBe(true);
    expect(ok.map((a) => Number(a[2]))).toEqual(ok.map((_a, i) => Number(ok[0]![2]) - i));
    expect(Number(ok.at(-1)![2])).toBe(0);
    expect(seenSince(before, '/v1/public')).toBe(ok.length);
  });
});

describe('the deprecated-route report', () => {
  it('names a called deprecated operation by operationId, method and path; an undated one is counted but sends no Deprecation', async () => {
    const k = await issueKey('free');
    expect((await call('/v1/pets/9', k.key)).status).toBe(200);
    const undated = await call('/v1/undated', k.key);
    expect([undated.status, undated.headers.get('deprecation'), undated.headers.get('sunset'), undated.headers.get('link')]).toEqual([200, null, null, null]);
    type Row = { method: string; path: string; operationId?: string; deprecation?: string; keys: Array<{ id: string; calls: number }> };
    let routes: Row[] = [];
    await waitFor(
      async () => {
        routes = (await adminGet('/routes/deprecated')).routes as Row[];
        return ['getPet', 'undated'].every((id) => routes.find((r) => r.operationId === id)?.keys.some((x) => x.id === k.id));
      },
      'both calls in the deprecated-route report',
      30_000,
      100,
    );
    expect(routes.find((r) => r.operationId === 'getPet')).toMatchObject({
      method: 'GET',
      path: '/v1/pets/:petId',
      deprecation: '2026-01-15T09:30:00.000Z',
      sunset: `${NEXT_YEAR}-06-01T00:00:00.000Z`,
      link: 'https://docs.example.com/migrate to v2',
      afterSunset: 'gone',
    });
    const u = routes.find((r) => r.operationId === 'undated')!;
    expect(u).toMatchObject({ method: 'GET', path: '/v1/undated' });
    expect(u.deprecation).toBeUndefined();
    expect(u.keys.find((x) => x.id === k.id)?.calls).toBe(1);
    // Not deprecated: not in the report.
    expect(routes.map((r) => r.operationId)).not.toContain('getPetV2');
  });

  it('config check warns about the undated deprecation, exit 0', async () => {
    const r = await runCli(['config', 'check', '--config', configFile]);
    expect(r.code, r.stderr).toBe(0);
    const warnings = r.stderr.split('\n').filter((l) => l.startsWith('warning: '));
    expect(warnings).toContain(
      'warning: pets.yaml#/paths/~1undated/get: deprecated without x-deprecated-at: counted as deprecated, but no Deprecation header is sent (it needs a date)',
    );
    // Dated deprecations are not warned about.
    expect(r.stderr).not.toContain('~1pets~1{petId}/get: deprecated');
  });
});

describe('request validation: shadow for a week, then enforce', () => {
  const badOrder = { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"sku":"","colour":"brown"}' };

  it('shadow proxies the invalid POST and counts it; enforce after SIGHUP answers 400 with every problem, upstream not called', async () => {
    const k = await issueKey('free');
    let before = up.seen.length;
    const shadow = await call('/v1/orders', k.key, badOrder);
    expect(shadow.status).toBe(200);
    expect(seenSince(before, '/v1/orders')).toBe(1);
    type Op = { operation: string; mode: string; keys: Array<{ id: string; calls: number; pointer: string | null }> };
    let ops: Op[] = [];
    await waitFor(
      async () => {
        ops = (await adminGet('/usage/invalid-requests')).operations as Op[];
        return ops.some((o) => o.operation === 'createOrder' && o.keys.some((x) => x.id === k.id));
      },
      'the invalid request in the report',
      30_000,
      100,
    );
    const op = ops.find((o) => o.operation === 'createOrder')!;
    expect(op.mode).toBe('shadow');
    const counted = op.keys.find((x) => x.id === k.id)!;
    expect(counted.calls).toBe(1);

    writeFileSync(configFile, stringify(gatewayConfig('enforce', Number(new URL(admin).port))));
    const mark = gw.proc.logs.length;
    gw.proc.signal('SIGHUP');
    await gw.proc.waitForLog('config reloaded', { after: mark });
    before = up.seen.length;
    const enforced = await call('/v1/orders', k.key, badOrder);
    expect(enforced.status).toBe(400);
    const body = (await enforced.json()) as { code: string; problems: Array<{ path: string; message: string }> };
    expect(body.code).toBe('invalid_request');
    expect(body.problems).toEqual([
      { path: '/body/qty', message: 'is required' },
      { path: '/body/colour', message: 'is not a property this operation takes' },
      { path: '/body/sku', message: 'must NOT have fewer than 1 characters' },
    ]);
    // The report's pointer for the shadowed request is where that same request first fails.
    expect(counted.pointer).toBe(body.problems[0]!.path);
    expect(seenSince(before, '/v1/orders')).toBe(0);
    // A valid order still goes through.
    const good = await call('/v1/orders', k.key, { ...badOrder, body: '{"sku":"a1","qty":2}' });
    expect(good.status).toBe(200);
    expect(seenSince(before, '/v1/orders')).toBe(1);
  });
});

describe('hostile documents', () => {
  const base = (op: Record<string, unknown>): Record<string, unknown> => ({
    openapi: '3.1.0',
    info: { title: 'h', version: '1' },
    security: [],
    paths: { '/a': { get: { operationId: 'a', responses: ok200, ...op } }, '/b': { get: { operationId: 'b', responses: ok200 } } },
  });

  async function check(doc: Record<string, unknown> | string): Promise<{ code: number | null; stderr: string }> {
    const d = tempDir();
    try {
      d.write('doc.yaml', typeof doc === 'string' ? doc : stringify(doc));
      const file = d.write('gateway.yaml', { services: { h: { targets: ['http://127.0.0.1:9'], openapi: { file: 'doc.yaml' } } } });
      return await runCli(['config', 'check', '--config', file]);
    } finally {
      d.remove();
    }
  }

  it.each([
    ['CR LF', 'beta\r\nX-Injected: 1'],
    ['a space', 'beta version'],
    ['an empty string', ''],
  ])('x-stability holding %s is a config error naming file#pointer', async (_what, value) => {
    const r = await check(base({ 'x-stability': value }));
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/^ {2}doc\.yaml#\/paths\/~1a\/get\/x-stability: /m);
  });

  it('x-brownouts past x-sunset is a config error naming file#pointer', async () => {
    const r = await check(base({ 'x-sunset': '2030-01-01', 'x-brownouts': ['2029-12-31T23:00:00Z/PT1H', '2030-01-01T00:00:00Z/PT1H'] }));
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/^ {2}doc\.yaml#\/paths\/~1a\/get\/x-brownouts\/1: .*after the route's sunset/m);
    expect(r.stderr).not.toMatch(/x-brownouts\/0/);
  });

  it('x-brownouts without x-sunset is a config error naming file#pointer', async () => {
    const r = await check(base({ 'x-brownouts': ['2029-12-31T23:00:00Z/PT1H'] }));
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/^ {2}doc\.yaml#\/paths\/~1a\/get\/x-brownouts: /m);
  });

  it.each([
    ['x-sunset', '2027-02-30T00:00:00Z'],
    ['x-sunset', '2027-02-29'],
    ['x-deprecated-at', '2026-06-01T24:30:00Z'],
    ['x-deprecated-at', '2026-06-01T12:60:00+01:00'],
    ['x-sunset', '2027-06-01T00:00:00+24:00'],
    ['x-brownouts', ['2027-02-30T14:00:00Z/PT1H']],
  ])('%s: %j, a date the calendar does not have, is refused naming file#pointer (not rolled over)', async (field, value) => {
    const d = tempDir();
    try {
      const dated = field === 'x-brownouts' ? { 'x-sunset': '2099-01-01', [field]: value } : { [field]: value };
      // Written unquoted, as an author would (the document's YAML reader keeps a timestamp as text).
      d.write('doc.yaml', stringify(base(dated)).replaceAll(`"${String(value)}"`, String(value)));
      const r = await loadConfigFile(d.write('gateway.yaml', { services: { h: { targets: ['http://127.0.0.1:9'], openapi: { file: 'doc.yaml' } } } }), {});
      expect(r.ok).toBe(false);
      if (r.ok) return;
      expect(r.errors.join('\n')).toMatch(new RegExp(`doc\\.yaml#/paths/~1a/get/${field}(/0)?: `));
    } finally {
      d.remove();
    }
  });

  it('a leap day and the last second of a day are dates the calendar has', async () => {
    const d = tempDir();
    try {
      d.write('doc.yaml', stringify(base({ 'x-deprecated-at': '2028-02-29', 'x-sunset': '2028-12-31T23:59:59.999+14:00' })));
      const r = await loadConfigFile(d.write('gateway.yaml', { services: { h: { targets: ['http://127.0.0.1:9'], openapi: { file: 'doc.yaml' } } } }), {});
      if (!r.ok) throw new Error(r.errors.join('\n'));
      const route = r.config.routes.find((x) => x.operationId === 'a')!;
      expect(route.sunset).toBe('2028-12-31T09:59:59.999Z');
      expect(route.deprecation).toBe('2028-02-29T00:00:00.000Z');
    } finally {
      d.remove();
    }
  });

  it('x-successor naming an unknown operationId is a config error', async () => {
    const r = await check(base({ 'x-successor': 'noSuchOperation' }));
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(
      'doc.yaml#/paths/~1a/get/x-successor: expected an http(s) URL or the operationId of an operation of this document, got "noSuchOperation"',
    );
  });

  it.each(['//evil.example', '//evil.example/v1', 'javascript:alert(1)', '/\\evil.example', ' https://ok.example/'])(
    'x-successor %j is refused',
    async (value) => {
      const r = await check(base({ 'x-successor': value }));
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/doc\.yaml#\/paths\/~1a\/get\/x-successor/);
    },
  );

  it('an x-successor URL that tries to close the link and add a relation is sent percent-encoded, one relation', async () => {
    const d = tempDir();
    try {
      d.write('doc.yaml', stringify(base({ 'x-sunset': '2099-01-01', 'x-successor': 'https://ok.example/a b>; rel="x", <https://evil.example>' })));
      const r = await loadConfigFile(d.write('gateway.yaml', { services: { h: { targets: ['http://127.0.0.1:9'], openapi: { file: 'doc.yaml' } } } }), {});
      if (!r.ok) throw new Error(r.errors.join('\n'));
      const route = compileRoutes(r.config.routes, r.config.services, r.config.openapi!.routes).find((x) => x.operationId === 'a')!;
      expect(route.headers.find(([name]) => name.toLowerCase() === 'link')?.[1]).toBe(
        '<https://ok.example/a%20b%3E%3B%20rel=%22x%22%2C%20%3Chttps://evil.example%3E>; rel="successor-version"',
      );
    } finally {
      d.remove();
    }
  });

  it('an operationId that looks like a host is still only a path on this gateway', async () => {
    const doc = base({ 'x-successor': '//evil.example' });
    (doc.paths as Record<string, unknown>)['/c'] = { get: { operationId: '//evil.example', responses: ok200 } };
    const r = await check(doc);
    // Either refused, or the successor is the operation's path (/c), never the host.
    if (r.code === 0) expect(r.stderr).not.toContain('evil');
    else expect(r.stderr).toMatch(/x-successor/);
  });
});

describe('a description that cannot be applied', () => {
  const loopDoc = (): string =>
    stringify({
      openapi: '3.1.0',
      info: { title: 'loop', version: '1' },
      security: [],
      paths: {
        '/ok': { post: { operationId: 'fine', requestBody: { content: { 'application/json': { schema: { type: 'object' } } } }, responses: ok200 } },
        '/loop': {
          post: {
            operationId: 'looped',
            requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/A' } } } },
            responses: ok200,
          },
        },
      },
      components: { schemas: { A: { $ref: '#/components/schemas/B' }, B: { allOf: [{ $ref: '#/components/schemas/A' }] } } },
    });

  it('config check warns naming file#pointer (exit 0), only for an operation that is validated', async () => {
    const d = tempDir();
    try {
      d.write('loop.yaml', loopDoc());
      const shadow = d.write('shadow.yaml', { services: { l: { targets: ['http://127.0.0.1:9'], openapi: { file: 'loop.yaml', validate: 'shadow' } } } });
      const r = await runCli(['config', 'check', '--config', shadow]);
      expect(r.code, r.stderr).toBe(0);
      const warnings = r.stderr.split('\n').filter((l) => l.startsWith('warning: '));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(
        /^warning: loop\.yaml#\/paths\/~1loop\/post: its description cannot be applied, so request validation is off for this operation: a schema refers to itself with nothing in between \(.*#\/components\/schemas\/[AB].*\)$/,
      );
      const off = d.write('off.yaml', { services: { l: { targets: ['http://127.0.0.1:9'], openapi: { file: 'loop.yaml' } } } });
      const r2 = await runCli(['config', 'check', '--config', off]);
      expect(r2.code, r2.stderr).toBe(0);
      expect(r2.stderr).not.toContain('cannot be applied');
    } finally {
      d.remove();
    }
  });

  it('start-up logs it as a config warning; the operation is proxied unchecked', async () => {
    const d = tempDir();
    try {
      d.write('loop.yaml', loopDoc());
      const file = d.write('gateway.yaml', {
        server: { port: 0 },
        services: { l: { targets: [up.url], openapi: { file: 'loop.yaml', validate: 'enforce' } } },
      });
      const s = await startServe(file, 60_000);
      try {
        const line = await s.proc.waitForLog('config warning');
        expect(String(line.warning)).toMatch(/^loop\.yaml#\/paths\/~1loop\/post: its description cannot be applied/);
        const res = await fetch(`${s.url}/loop`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{}',
          signal: AbortSignal.timeout(5000),
        });
        expect(res.status).toBe(200);
        const bad = await fetch(`${s.url}/ok`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '[]',
          signal: AbortSignal.timeout(5000),
        });
        expect(bad.status).toBe(400);
      } finally {
        await s.proc.stop();
      }
    } finally {
      d.remove();
    }
  });
});
