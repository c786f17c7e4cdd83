// Method overrides (docs/routing.md, Method overrides): a POST that says it is another method, by
// X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override or ?_method, is matched as the method its backend will
// run, with that route's sunset and cost; overrides the gateway cannot route are refused 400 before anything counts.
// The gateway on a real upstream on loopback, with its key stages.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey, hashKey } from '../src/keys/format.js';
import { routingMethod } from '../src/routing/routes.js';
import { startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';
import { TestUpstream } from './helpers/upstream.js';

let up: TestUpstream;
let g: TestGateway;
let strict: TestGateway;
const key = generateKey();
const AUTH = { authorization: `Bearer ${key}` };

function config(extra: Record<string, unknown> = {}) {
  return testConfig({
    services: { pets: { targets: [up.url] } },
    routes: [
      { method: 'GET', path: '/v1/pets/:petId', service: 'pets', deprecation: '2020-01-01T00:00:00Z', sunset: '2021-01-01T00:00:00Z', afterSunset: 'gone' },
      { method: 'DELETE', path: '/v1/pets/:petId', service: 'pets', cost: 5 },
      { path: '/v1/*', service: 'pets' },
    ],
    plans: { small: { perMinute: 100, perDay: 10_000 } },
    keys: [{ id: 'key_override', plan: 'small', sha256: hashKey(key) }],
    ...extra,
  });
}

beforeAll(async () => {
  up = await TestUpstream.start();
  g = await startTestGateway(config(), { keyStages: true });
  strict = await startTestGateway(config({ methodOverride: 'refuse' }), { keyStages: true });
});
afterAll(async () => {
  await g.close();
  await strict.close();
  await up.close();
});

async function send(gw: TestGateway, method: string, path: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${gw.url}${path}`, { method, headers: { ...AUTH, ...headers }, ...(method === 'POST' ? { body: '{}' } : {}) });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    body: text,
    json: () => JSON.parse(text) as { code?: string; message?: string; method?: string; headers?: Record<string, string> },
  };
}

async function remaining(gw: TestGateway): Promise<number> {
  const q = (await (await fetch(`${gw.url}/ratelimit`, { headers: AUTH })).json()) as { windows: Array<{ name: string; remaining: number }> };
  return q.windows.find((w) => w.name === 'minute')!.remaining;
}

describe('a POST with a method override is routed as the method it names', () => {
  it('every override spelling reaches the retired GET route: 410, the backend never called', async () => {
    const before = up.seen.length;
    const spellings: Array<[string, Record<string, string>]> = [
      ['/v1/pets/1', { 'x-http-method-override': 'GET' }],
      ['/v1/pets/1', { 'x-http-method': 'GET' }],
      ['/v1/pets/1', { 'x-method-override': 'GET' }],
      ['/v1/pets/1', { 'x-http-method-override': ' get ' }],
      ['/v1/pets/1?_method=GET', {}],
      ['/v1/pets/1?a=1&_method=get', {}],
      ['/v1/pets/1?%5Fmethod=G%45T', {}],
    ];
    for (const [path, headers] of spellings) {
      const r = await send(g, 'POST', path, headers);
      expect(r.status, `${path} ${JSON.stringify(headers)}`).toBe(410);
      expect(r.json().code).toBe('gone');
    }
    expect(up.seen.length).toBe(before);
    // Without an override the POST is a POST: the catch-all route, proxied.
    expect((await send(g, 'POST', '/v1/pets/1')).status).toBe(200);
  });

  it("an override to DELETE pays the DELETE route's cost, and the backend gets the DELETE it was judged as", async () => {
    const start = await remaining(g);
    const before = up.seen.length;
    const r = await send(g, 'POST', '/v1/pets/2', { 'x-http-method-override': 'DELETE' });
    expect(r.status).toBe(200);
    expect(await remaining(g)).toBe(start - 5);
    const viaParam = await send(g, 'POST', '/v1/pets/2?a=1&_method=DELETE');
    expect(viaParam.status).toBe(200);
    expect(await remaining(g)).toBe(start - 10);
    const seen = up.seen.slice(before);
    expect(seen.map((s) => [s.method, s.url, s.body.length])).toEqual([
      ['DELETE', '/v1/pets/2', 0],
      ['DELETE', '/v1/pets/2?a=1', 0],
    ]);
    for (const s of seen) {
      expect(s.headers['x-http-method-override']).toBeUndefined();
      expect(s.headers['content-length']).toBeUndefined();
      expect(s.headers['content-type']).toBeUndefined();
    }
  });

  it('a keyless POST overridden to GET on a public GET route never reaches the backend as its keyed POST twin, nor with its body', async () => {
    // The public, free GET route and a POST twin that needs a key, costs 10 and is experimental (closed to the plan).
    const twin = await startTestGateway(
      testConfig({
        services: { pets: { targets: [up.url], openapi: { stability: { experimental: ['enterprise'] } } } },
        routes: [
          { method: 'GET', path: '/v1/reports/:id', service: 'pets', auth: 'none' },
          { method: 'POST', path: '/v1/reports/:id', service: 'pets', cost: 10, stability: 'experimental' },
        ],
        plans: { small: { perMinute: 100, perDay: 10_000 }, enterprise: { perMinute: 100, perDay: 10_000 } },
        keys: [{ id: 'key_override', plan: 'small', sha256: hashKey(key) }],
      }),
      { keyStages: true },
    );
    try {
      const before = up.seen.length;
      const spellings: Array<[string, Record<string, string>]> = [
        ['/v1/reports/7', { 'x-http-method-override': 'GET' }],
        ['/v1/reports/7', { 'x-http-method': 'get', 'x-method-override': 'GET' }],
        ['/v1/reports/7?_method=GET&page=2', {}],
        ['/v1/reports/7?%5Fmethod=GET', {}],
      ];
      for (const [path, headers] of spellings) {
        const res = await fetch(`${twin.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify({ delete: 'everything', padding: 'x'.repeat(2000) }),
        });
        const answer = (await res.json()) as { method: string };
        expect(res.status, path).toBe(200);
        // Judged and answered as the public GET route: no key needed, nothing charged, no stability header.
        expect(res.headers.get('x-api-stability'), path).toBeNull();
        expect(answer.method, path).toBe('GET');
      }
      const seen = up.seen.slice(before);
      expect(seen.map((s) => s.method)).toEqual(['GET', 'GET', 'GET', 'GET']);
      expect(seen.map((s) => s.url)).toEqual(['/v1/reports/7', '/v1/reports/7', '/v1/reports/7?page=2', '/v1/reports/7']);
      for (const s of seen) {
        expect(s.body.length).toBe(0);
        for (const name of ['x-http-method-override', 'x-http-method', 'x-method-override', 'content-length', 'transfer-encoding', 'content-type'])
          expect(s.headers[name], name).toBeUndefined();
      }
      // The POST itself is still the keyed twin: without a key, 401, and the backend never called.
      const post = await fetch(`${twin.url}/v1/reports/7`, { method: 'POST', body: '{}' });
      expect(post.status).toBe(401);
      expect(up.seen.length).toBe(before + 4);
    } finally {
      await twin.close();
    }
  });

  it("an override naming the request's own method changes nothing", async () => {
    const start = await remaining(g);
    expect((await send(g, 'DELETE', '/v1/pets/3', { 'x-http-method-override': 'DELETE' })).status).toBe(200);
    expect((await send(g, 'POST', '/v1/pets/3', { 'x-http-method-override': 'POST' })).status).toBe(200);
    expect(await remaining(g)).toBe(start - 6);
  });
});

describe('overrides the gateway cannot route are refused: 400 invalid_method_override, nothing counted', () => {
  it('disagreeing overrides, an unknown method, an override on a GET', async () => {
    const start = await remaining(g);
    const before = up.seen.length;
    const cases: Array<[string, string, Record<string, string>, string]> = [
      ['POST', '/v1/pets/4?_method=DELETE', { 'x-http-method-override': 'GET' }, 'disagree (X-HTTP-Method-Override and _method)'],
      ['POST', '/v1/pets/4', { 'x-http-method-override': 'GET', 'x-http-method': 'DELETE' }, 'disagree (X-HTTP-Method-Override and X-HTTP-Method)'],
      ['POST', '/v1/pets/4', { 'x-http-method-override': 'GET, DELETE' }, 'disagree (X-HTTP-Method-Override)'],
      ['POST', '/v1/pets/4?_method=GET&_method=DELETE', {}, 'disagree (_method)'],
      ['POST', '/v1/pets/4', { 'x-http-method-override': 'TRACE' }, 'does not route'],
      ['POST', '/v1/pets/4', { 'x-method-override': 'FETCH' }, 'does not route'],
      // A HEAD's answer has no body: it cannot answer the POST the client sent.
      ['POST', '/v1/pets/4', { 'x-http-method-override': 'HEAD' }, 'names HEAD, which cannot answer a POST'],
      ['GET', '/v1/pets/4', { 'x-http-method-override': 'DELETE' }, 'on a POST only'],
      ['PUT', '/v1/pets/4?_method=GET', {}, 'on a POST only'],
    ];
    for (const [method, path, headers, says] of cases) {
      const r = await send(g, method, path, headers);
      expect(r.status, `${method} ${path} ${JSON.stringify(headers)}`).toBe(400);
      expect(r.json()).toEqual({ code: 'invalid_method_override', status: 400, message: expect.stringContaining(says) });
    }
    expect(up.seen.length).toBe(before);
    expect(await remaining(g)).toBe(start);
  });

  it('methodOverride: refuse (backends that do not honour overrides) refuses any override; plain requests pass', async () => {
    const r = await send(strict, 'POST', '/v1/pets/5', { 'x-http-method-override': 'GET' });
    expect(r.status).toBe(400);
    expect(r.json()).toEqual({
      code: 'invalid_method_override',
      status: 400,
      message: "This gateway does not take method overrides (X-HTTP-Method-Override): send GET as the request's method.",
    });
    expect((await send(strict, 'POST', '/v1/pets/5?_method=DELETE')).status).toBe(400);
    expect((await send(strict, 'POST', '/v1/pets/5')).status).toBe(200);
    expect((await send(strict, 'DELETE', '/v1/pets/5', { 'x-http-method-override': 'delete' })).status).toBe(200);
  });
});

describe('routingMethod, as a table', () => {
  const rows: Array<[method: string, headers: Record<string, string>, url: string, mode: 'match' | 'refuse', want: string]> = [
    ['POST', {}, '/x', 'match', 'POST'],
    ['POST', {}, '/x?method=GET&other_method=GET', 'match', 'POST'],
    ['POST', { 'x-http-method-override': '' }, '/x?_method=', 'match', 'POST'],
    ['POST', { 'x-http-method-override': 'patch' }, '/x', 'match', 'PATCH'],
    ['POST', { 'x-http-method-override': 'PUT', 'x-method-override': 'put' }, '/x?_method=Put', 'match', 'PUT'],
    ['POST', {}, '/x?_%6Dethod=OPTIONS', 'match', 'OPTIONS'],
    ['POST', { 'x-http-method-override': 'GET,GET' }, '/x', 'match', 'GET'],
    ['POST', { 'x-http-method-override': 'GET,DELETE' }, '/x', 'match', 'refused'],
    ['POST', { 'x-http-method-override': 'CONNECT' }, '/x', 'match', 'refused'],
    ['HEAD', { 'x-http-method-override': 'GET' }, '/x', 'match', 'refused'],
    ['POST', { 'x-http-method-override': 'head' }, '/x', 'match', 'refused'],
    ['GET', { 'x-http-method-override': 'GET' }, '/x', 'refuse', 'GET'],
    ['POST', {}, '/x', 'refuse', 'POST'],
    ['POST', { 'x-http-method': 'DELETE' }, '/x', 'refuse', 'refused'],
  ];
  it.each(rows)('%s %j %s (%s): %s', (method, headers, url, mode, want) => {
    const got = routingMethod(method, headers, url, mode);
    expect(got.refused === undefined ? got.method : 'refused').toBe(want);
  });
});
