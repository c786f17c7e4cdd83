// Route policy (docs: "The request path"): Deprecation (RFC 9745), Sunset (RFC 8594) and Link headers on matching routes,
// 410 gone after the sunset without calling the upstream, and live route swaps through Runtime.apply.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { beforeEach, describe, expect, it } from 'vitest';
import request from 'supertest';
import { ManualClock } from '../src/util/clock.js';
import { generateKey, hashKey } from '../src/keys/format.js';
import { policyPath } from '../src/routing/routes.js';
import { metricValue } from './helpers/limits.js';
import { TestUpstream, echo } from './helpers/upstream.js';
import { RawConnection, leaksIn, rawRequest, startTestGateway, testConfig } from './helpers/gateway.js';
import { useStack } from './helpers/stack.js';
import type { Config } from '../src/config/schema.js';

const PETS = {
  method: 'GET',
  path: '/v1/pets/:petId',
  deprecation: '2026-06-01T00:00:00Z',
  sunset: '2027-06-01T00:00:00Z',
  link: 'https://example.com/docs/migrate-pets',
  afterSunset: 'gone',
};
const ORDERS = {
  method: 'POST',
  path: '/v1/store/orders',
  deprecation: '2026-01-01T00:00:00Z',
  sunset: '2026-06-01T00:00:00Z',
  link: 'https://example.com/docs/orders-v2',
  afterSunset: 'pass',
};
const LEGACY = { method: '*', path: '/v1/legacy/*rest', deprecation: '2026-01-01T00:00:00Z' };
const SUNSET_ONLY = { method: 'GET', path: '/v1/reports', sunset: '2027-01-01T00:00:00Z', link: 'https://example.com/reports' };

const PETS_HEADERS = {
  deprecation: '@1780272000',
  sunset: 'Tue, 01 Jun 2027 00:00:00 GMT',
  link: '<https://example.com/docs/migrate-pets>; rel="deprecation"',
};

const BEFORE_SUNSET = Date.UTC(2026, 6, 1); // 2026-07-01: pets deprecated, not yet sunset; orders past sunset
const PETS_SUNSET = Date.parse(PETS.sunset);

const clock = new ManualClock(BEFORE_SUNSET);

function config(routes: unknown[], upstreamUrl = s.up.url): Config {
  return testConfig({ upstream: { url: upstreamUrl }, routes });
}

const s = useStack({ gateway: async () => startTestGateway(config([PETS, ORDERS, LEGACY, SUNSET_ONLY]), { clock }) });

beforeEach(() => {
  s.up.seen.length = 0;
  s.up.behaviour = echo;
  clock.set(BEFORE_SUNSET);
  s.gw.runtime.apply(config([PETS, ORDERS, LEGACY, SUNSET_ONLY]));
});

function expectNoPolicyHeaders(headers: Record<string, unknown>): void {
  expect(headers.deprecation).toBeUndefined();
  expect(headers.sunset).toBeUndefined();
  expect(headers.link).toBeUndefined();
}

describe('deprecated routes', () => {
  it('adds Deprecation @<secs>, Sunset IMF-fixdate and Link rel="deprecation" to a matching route', async () => {
    const res = await request(s.gw.url).get('/v1/pets/42');
    expect(res.status).toBe(200);
    expect(res.headers).toMatchObject(PETS_HEADERS);
    expect(s.up.seen.map((s) => s.url)).toEqual(['/v1/pets/42']);
    // The policy headers are for the client, not the upstream.
    expect(s.up.seen[0]!.headers.deprecation).toBeUndefined();
  });

  it('matches with a query string, a trailing slash, percent-encoded ids and any letter case', async () => {
    for (const path of ['/v1/pets/42?expand=owner', '/v1/pets/42/', '/v1/pets/%34%32', '/v1/pets/fluffy-the-cat', '/V1/Pets/42']) {
      const res = await request(s.gw.url).get(path);
      expect(res.status, path).toBe(200);
      expect(res.headers, path).toMatchObject(PETS_HEADERS);
    }
  });

  it('HEAD matches a GET route', async () => {
    const res = await request(s.gw.url).head('/v1/pets/42');
    expect(res.status).toBe(200);
    expect(res.headers).toMatchObject(PETS_HEADERS);
    expect(s.up.seen[0]!.method).toBe('HEAD');
  });

  it('is method-aware: other methods on the same path get no policy headers', async () => {
    for (const method of ['post', 'put', 'patch', 'delete'] as const) {
      const res = await request(s.gw.url)[method]('/v1/pets/42').send({});
      expect(res.status, method).toBe(200);
      expectNoPolicyHeaders(res.headers);
    }
  });

  it('leaves other paths alone, including longer and shorter ones', async () => {
    for (const path of ['/v1/categories', '/v1/pets', '/v1/pets/42/photos', '/v1/store/orders', '/v1/petsx/42']) {
      const res = await request(s.gw.url).get(path);
      expect(res.status, path).toBe(200);
      expectNoPolicyHeaders(res.headers);
    }
  });

  it('a "*" route matches every method, and a route without link or sunset sends only Deprecation', async () => {
    for (const method of ['get', 'post', 'delete'] as const) {
      const res = await request(s.gw.url)[method]('/v1/legacy/a/b');
      expect(res.status).toBe(200);
      expect(res.headers.deprecation).toBe('@1767225600');
      expect(res.headers.sunset).toBeUndefined();
      expect(res.headers.link).toBeUndefined();
    }
  });

  it('a route with a sunset but no deprecation links its documentation as rel="sunset"', async () => {
    const res = await request(s.gw.url).get('/v1/reports');
    expect(res.headers.sunset).toBe('Fri, 01 Jan 2027 00:00:00 GMT');
    expect(res.headers.deprecation).toBeUndefined();
    expect(res.headers.link).toBe('<https://example.com/reports>; rel="sunset"');
  });

  it("keeps the upstream's own Link values next to the gateway's, and the gateway's Deprecation over the upstream's", async () => {
    s.up.behaviour = (_req, res) => {
      res.setHeader('link', '</v1/pets/43>; rel="next"');
      res.setHeader('deprecation', '@1');
      res.end('{}');
    };
    const res = await request(s.gw.url).get('/v1/pets/42');
    expect(res.headers.link).toBe('<https://example.com/docs/migrate-pets>; rel="deprecation", </v1/pets/43>; rel="next"');
    expect(res.headers.deprecation).toBe('@1780272000');
  });

  it('adds the headers to upstream error answers too', async () => {
    s.up.behaviour = (_req, res) => {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"code":"not_found","message":"no such pet","status":404}');
    };
    const res = await request(s.gw.url).get('/v1/pets/999');
    expect(res.status).toBe(404);
    expect(res.body.message).toBe('no such pet');
    expect(res.headers).toMatchObject(PETS_HEADERS);
  });
});

describe('policyPath', () => {
  it('merges repeated slashes and decodes escaped unreserved characters, nothing else', () => {
    expect(policyPath('/v1//pets///1')).toBe('/v1/pets/1');
    expect(policyPath('/v1/p%65ts/%31')).toBe('/v1/pets/1');
    expect(policyPath('/v1/a%2Db%5Fc%2ed%7Ee')).toBe('/v1/a-b_c.d~e');
    // Reserved and other characters keep their escapes: they mean something else decoded.
    expect(policyPath('/v1/a%2Fb%3Fc%25d%20e')).toBe('/v1/a%2Fb%3Fc%25d%20e');
    expect(policyPath('/v1/bad%zz/%4')).toBe('/v1/bad%zz/%4');
    expect(policyPath('/v1/pets/1')).toBe('/v1/pets/1');
  });
});

describe('after the sunset', () => {
  it('afterSunset gone: 410 gone, with the policy headers, and the upstream is not called', async () => {
    clock.set(PETS_SUNSET);
    const res = await request(s.gw.url).get('/v1/pets/42');
    expect(res.status).toBe(410);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual({ code: 'gone', message: expect.any(String), status: 410 });
    expect(res.headers).toMatchObject(PETS_HEADERS);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(leaksIn(res.text)).toEqual([]);
    expect(s.up.seen).toEqual([]);
  });

  it('is still served one millisecond before the sunset', async () => {
    clock.set(PETS_SUNSET - 1);
    expect((await request(s.gw.url).get('/v1/pets/42')).status).toBe(200);
    clock.advance(1);
    expect((await request(s.gw.url).get('/v1/pets/42')).status).toBe(410);
    expect(s.up.seen).toHaveLength(1);
  });

  it('gone cannot be dodged by case, trailing slash, repeated slashes, escaped letters, HEAD or an absolute-form target', async () => {
    clock.set(PETS_SUNSET + 1000);
    // Also spelled the ways an upstream that merges slashes or decodes unreserved escapes would read as the route.
    for (const path of [
      '/V1/PETS/42',
      '/v1/pets/42/',
      '/v1/pets/42?x=1',
      '/v1//pets/42',
      '/v1/pets//42',
      '/v1/p%65ts/42',
      '/v1/%70ets/%34%32',
      '/v1/P%45TS/42',
    ]) {
      expect((await request(s.gw.url).get(path)).status, path).toBe(410);
    }
    expect((await request(s.gw.url).head('/v1/pets/42')).status).toBe(410);
    const conn = await RawConnection.open(s.gw.port);
    try {
      conn.write('GET http://other.invalid/v1/pets/42 HTTP/1.1\r\nHost: other.invalid\r\nConnection: close\r\n\r\n');
      expect((await conn.read()).status).toBe(410);
    } finally {
      conn.destroy();
    }
    expect(s.up.seen).toEqual([]);
  });

  it('a request that waits on Expect: 100-continue gets its 410 at once, without being asked for its body', async () => {
    clock.set(PETS_SUNSET + 1000);
    const conn = await RawConnection.open(s.gw.port);
    try {
      conn.write('GET /v1/pets/42 HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n');
      const res = await conn.read();
      expect(res.status).toBe(410);
      expect(JSON.parse(res.body)).toMatchObject({ code: 'gone', status: 410 });
      // The client may or may not send the body now: the gateway closes rather than guess.
      expect(res.headers.connection).toBe('close');
      expect(await conn.closedWithin(2000)).toBe(true);
    } finally {
      conn.destroy();
    }
    expect(s.up.seen).toEqual([]);
  });

  it('gone applies only to the matching method', async () => {
    clock.set(PETS_SUNSET + 1000);
    expect((await request(s.gw.url).post('/v1/pets/42').send({})).status).toBe(200);
  });

  it('afterSunset pass: keeps proxying, with the headers', async () => {
    const res = await request(s.gw.url).post('/v1/store/orders').send({ petId: 1 });
    expect(res.status).toBe(200);
    expect(res.headers.deprecation).toBe('@1767225600');
    expect(res.headers.sunset).toBe('Mon, 01 Jun 2026 00:00:00 GMT');
    expect(res.headers.link).toBe('<https://example.com/docs/orders-v2>; rel="deprecation"');
    expect(s.up.seen.map((s) => `${s.method} ${s.url}`)).toEqual(['POST /v1/store/orders']);
  });

  it('labels metrics with the route pattern', async () => {
    clock.set(PETS_SUNSET);
    await request(s.gw.url).get('/v1/pets/7');
    const metrics = (await request(s.gw.url).get('/metrics')).text;
    expect(metrics).toMatch(/^tollgate_http_requests_total\{route="\/v1\/pets\/:petId",method="GET",status="410"\} [1-9]/m);
  });
});

describe('Runtime.apply', () => {
  it('swaps routes for the next request, on the same open connection', async () => {
    const conn = await RawConnection.open(s.gw.port);
    try {
      conn.write('GET /v1/pets/42 HTTP/1.1\r\nHost: x\r\n\r\n');
      expect((await conn.read()).headers.deprecation).toBe('@1780272000');

      const ignored = s.gw.runtime.apply(config([{ method: 'GET', path: '/v1/categories', deprecation: '2026-02-01T00:00:00Z' }]));
      expect(ignored).toEqual([]);

      conn.write('GET /v1/pets/42 HTTP/1.1\r\nHost: x\r\n\r\n');
      const pets = await conn.read();
      expect(pets.status).toBe(200);
      expect(pets.headers.deprecation).toBeUndefined();
      conn.write('GET /v1/categories HTTP/1.1\r\nHost: x\r\n\r\n');
      expect((await conn.read()).headers.deprecation).toBe('@1769904000');
      expect(conn.ended).toBe(false);
    } finally {
      conn.destroy();
    }
  });

  it('a new sunset with gone takes effect at once', async () => {
    s.gw.runtime.apply(config([{ ...PETS, sunset: '2026-06-30T00:00:00Z' }]));
    const res = await request(s.gw.url).get('/v1/pets/42');
    expect(res.status).toBe(410);
    expect(res.headers.sunset).toBe('Tue, 30 Jun 2026 00:00:00 GMT');
  });

  it('reports restart-only sections and keeps them as they were', async () => {
    const other = await TestUpstream.start();
    try {
      const changed = config([], other.url);
      const ignored = s.gw.runtime.apply(testConfig({ ...changed, server: { maxBodyBytes: 10 }, routes: [] }));
      expect(ignored.sort()).toEqual(['server.*', 'upstream.*']);
      expect(s.gw.runtime.config.upstream.url).toBe(s.up.url);
      expect((await request(s.gw.url).get('/v1/categories')).status).toBe(200);
      expect(s.up.seen).toHaveLength(1);
      expect(other.seen).toHaveLength(0);
    } finally {
      await other.close();
    }
  });

  it('tells its listeners', () => {
    const seen: string[] = [];
    s.gw.runtime.onChange((next, prev) => seen.push(`${prev.routes.length}->${next.routes.length}`));
    s.gw.runtime.apply(config([PETS]));
    expect(seen).toEqual(['4->1']);
  });
});

describe('a retired route spelled with encoded slashes, backslashes or ";" parameters', () => {
  // Two real upstreams that read a path their own way before routing, as deployed servers do: one decodes it (a WSGI
  // server hands Flask or Django PATH_INFO percent-decoded, so `%2F` is a slash; a server on Windows takes `\` and
  // `%5C` for one too), the other drops `;params` from each segment (Tomcat, Spring). Each serves GET /v1/pets/:id.
  type Reading = (path: string) => string;
  const decoding: Reading = (path) => {
    let decoded = path;
    try {
      decoded = decodeURIComponent(path);
    } catch {
      // an invalid escape: routed as sent
    }
    return decoded.replace(/\\/g, '/');
  };
  const matrixStripping: Reading = (path) =>
    path
      .split('/')
      .map((seg) => seg.split(';', 1)[0])
      .join('/');
  const READINGS: Array<[string, Reading]> = [
    ['decoding (WSGI)', decoding],
    ['stripping ;params (Tomcat)', matrixStripping],
  ];
  const RETIRED = { method: 'GET', path: '/v1/pets/:petId', sunset: '2020-01-01T00:00:00Z', afterSunset: 'gone' };
  // Each spelling, the reading under which an upstream serves it as GET /v1/pets/1, and the gateway's answer.
  const SPELLINGS: Array<[string, Reading, string]> = [
    ['/v1/pets/1', decoding, '410 gone'],
    ['/v1/pets%2F1', decoding, '400 invalid_request'],
    ['/v1/pets%2f1', decoding, '400 invalid_request'],
    ['/v1/pets%5C1', decoding, '400 invalid_request'],
    ['/v1/pets%5c1', decoding, '400 invalid_request'],
    ['/v1/pets\\1', decoding, '400 invalid_request'],
    ['/v1/pets;x/1', matrixStripping, '400 invalid_request'],
    ['/v1/pets/1;x', matrixStripping, '400 invalid_request'],
    ['/v1/pets;x=%2F/1', matrixStripping, '400 invalid_request'],
    // Not under /v1 as the gateway mounts it (the segment is "v1;x"): never proxied.
    ['/v1;x/pets/1', matrixStripping, '404 not_found'],
  ];

  interface ReadingUpstream {
    port: number;
    /** Every request target received, and those the pets handler served. */
    seen: string[];
    petsServed: string[];
    close(): Promise<void>;
  }

  async function startReadingUpstream(reading: Reading): Promise<ReadingUpstream> {
    const seen: string[] = [];
    const petsServed: string[] = [];
    const server = createServer((req, res) => {
      const url = req.url ?? '/';
      seen.push(url);
      const path = reading(url.split('?', 1)[0]!);
      if (req.method === 'GET' && /^\/v1\/pets\/[^/]+\/?$/i.test(path)) {
        petsServed.push(url);
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"pet":1}');
      } else {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"code":"not_found","message":"no route","status":404}');
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return {
      port: (server.address() as AddressInfo).port,
      seen,
      petsServed,
      async close() {
        server.closeAllConnections();
        await new Promise<void>((r) => server.close(() => r()));
      },
    };
  }

  const get = (port: number, target: string) => rawRequest(port, [`GET ${target} HTTP/1.1`, 'Host: api.test', 'Connection: close']);

  it('each spelling reaches the pets handler of the upstream that reads it so (the spellings are real)', async () => {
    for (const [name, reading] of READINGS) {
      const upstream = await startReadingUpstream(reading);
      try {
        const mine = SPELLINGS.filter(([, r]) => r === reading).map(([target]) => target);
        for (const target of mine) expect((await get(upstream.port, target)).status, `${name}: ${target}`).toBe(200);
        expect(upstream.petsServed).toEqual(mine);
      } finally {
        await upstream.close();
      }
    }
  });

  it('after its sunset no spelling reaches the upstream: 400 invalid_request (before authentication) for an encoded slash or backslash, a backslash or ";", else 410 gone', async () => {
    for (const [name, reading] of READINGS) {
      const upstream = await startReadingUpstream(reading);
      // The whole request path, with a key: a refusal before authentication counts no rate-limit decision.
      const key = generateKey();
      const gateway = await startTestGateway(
        testConfig({
          upstream: { url: `http://127.0.0.1:${upstream.port}` },
          routes: [RETIRED],
          keys: [{ id: 'key_routes', plan: 'free', sha256: hashKey(key) }],
        }),
        { keyStages: true },
      );
      const decisions = async () => metricValue(await gateway.gateway.metrics.registry.metrics(), 'tollgate_ratelimit_decisions_total') ?? 0;
      try {
        for (const [target, , want] of SPELLINGS) {
          const before = await decisions();
          const res = await rawRequest(gateway.port, [`GET ${target} HTTP/1.1`, 'Host: api.test', `Authorization: Bearer ${key}`, 'Connection: close']);
          const label = `${name}: ${target}`;
          expect(`${res.status} ${(JSON.parse(res.body) as { code?: string }).code}`, label).toBe(want);
          if (res.status === 400) expect(await decisions(), `${label}: refused before authentication`).toBe(before);
          else if (res.status === 410) expect(await decisions(), `${label}: authenticated and metered`).toBe(before + 1);
        }
        expect(upstream.seen, name).toEqual([]);
        expect(upstream.petsServed, name).toEqual([]);
        // Other paths still go through to the upstream, with their escapes.
        const other = await rawRequest(gateway.port, [
          'GET /v1/owners/a%20b?q=1;2 HTTP/1.1',
          'Host: api.test',
          `Authorization: Bearer ${key}`,
          'Connection: close',
        ]);
        expect(other.status).toBe(404);
        expect(upstream.seen, name).toEqual(['/v1/owners/a%20b?q=1;2']);
      } finally {
        await gateway.close();
        await upstream.close();
      }
    }
  });
});
