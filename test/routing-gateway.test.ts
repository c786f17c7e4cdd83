// Services and routes on a running gateway (docs/routing.md): routes matched once, by host and method, first match in
// file order; stripPrefix and a target's base path; auth: none routes metered by the anonymous limit (by its key with a valid key);
// defaultService and the 404 without it; the gateway's own paths never routed; refused requests labelled with their
// route in /metrics. Real upstream servers on loopback, one per backend.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generateKey, hashKey } from '../src/keys/format.js';
import { rawRequest, startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';
import { TestUpstream } from './helpers/upstream.js';

interface Echo {
  method: string;
  url: string;
  headers: Record<string, string>;
}

let catalog: TestUpstream;
let orders: TestUpstream;
let legacy: TestUpstream;
const key = generateKey();

beforeAll(async () => {
  [catalog, orders, legacy] = await Promise.all([TestUpstream.start(), TestUpstream.start(), TestUpstream.start()]);
});
afterAll(async () => {
  await Promise.all([catalog.close(), orders.close(), legacy.close()]);
});
afterEach(() => {
  for (const u of [catalog, orders, legacy]) u.seen.length = 0;
});

/** `filler`: more routes after these (that no test request matches), to take the config past the route table's threshold. */
function routingConfig(extra: Record<string, unknown> = {}, filler = 0) {
  return testConfig({
    services: {
      catalog: { targets: [catalog.url] },
      orders: { targets: [`${orders.url}/api`] },
      legacy: { targets: [legacy.url] },
    },
    routes: [
      { path: '/v1/categories', service: 'catalog' },
      { path: '/orders/*', method: 'POST', host: 'api.example.com', service: 'orders', stripPrefix: '/orders' },
      { path: '/orders/*', service: 'legacy' },
      { path: '/status', service: 'catalog', auth: 'none' },
      { path: '/v1/pets/:petId', method: 'GET', service: 'catalog', deprecation: '2026-06-01T00:00:00Z', sunset: '2099-06-01T00:00:00Z' },
      ...Array.from({ length: filler }, (_, i) => ({ path: `/v1/filler${i}/:id`, service: 'legacy' })),
    ],
    anonymous: { perMinute: 2 },
    keys: [{ id: 'key_routing', plan: 'pro', sha256: hashKey(key) }],
    ...extra,
  });
}

async function send(g: TestGateway, method: string, target: string, headers: string[] = [], body = '') {
  const host = headers.some((h) => /^host:/i.test(h)) ? [] : ['host: gateway.test'];
  const res = await rawRequest(
    g.port,
    [`${method} ${target} HTTP/1.1`, ...host, ...headers, ...(body ? [`content-length: ${body.length}`] : []), 'connection: close'],
    body,
  );
  return { ...res, json: () => JSON.parse(res.body.toString()) as Echo & { code?: string } };
}

const AUTH = () => `authorization: Bearer ${key}`;

// Twice: a config of few routes is scanned whole; one of many goes through the route table (src/routing/route-table.ts).
describe.each([
  ['scanned whole', 0],
  ['through the route table', 40],
])('routes to services (%s)', (_how, filler) => {
  let g: TestGateway;
  beforeAll(async () => {
    g = await startTestGateway(routingConfig({}, filler), { keyStages: true });
  });
  afterAll(async () => g.close());

  it('host and method pick the route; the first match in file order wins; the rest falls through to the next route', async () => {
    // POST on api.example.com (any case, any port): the orders route, prefix stripped, base path prepended.
    const post = await send(g, 'POST', '/orders/17?x=1', ['host: API.Example.COM:8443', AUTH()], '{}');
    expect(post.status).toBe(200);
    expect(post.json().url).toBe('/api/17?x=1');
    expect(post.json().headers['x-forwarded-prefix']).toBe('/orders');
    // The same path on another host, or with GET: the next /orders/* route, to legacy, path untouched.
    const otherHost = await send(g, 'POST', '/orders/17', ['host: www.example.com', AUTH()], '{}');
    const get = await send(g, 'GET', '/orders/17', ['host: api.example.com', AUTH()]);
    expect([otherHost.status, get.status]).toEqual([200, 200]);
    expect(legacy.seen.map((s) => `${s.method} ${s.url}`)).toEqual(['POST /orders/17', 'GET /orders/17']);
    expect(legacy.seen[0]!.headers['x-forwarded-prefix']).toBeUndefined();
    expect(orders.seen).toHaveLength(1);
    expect(catalog.seen).toHaveLength(0);
  });

  it('stripPrefix keeps the query string and encoded characters as sent; the prefix alone becomes the base path', async () => {
    const encoded = await send(g, 'POST', '/orders/a%20b/%E2%82%AC?q=%2F&x=a%26b', ['host: api.example.com', AUTH()], '{}');
    expect(encoded.json().url).toBe('/api/a%20b/%E2%82%AC?q=%2F&x=a%26b');
    // Unreserved characters spelled encoded still match the prefix, which is cut as matched.
    const spelled = await send(g, 'POST', '/ord%65rs/9', ['host: api.example.com', AUTH()], '{}');
    expect(spelled.json().url).toBe('/api/9');
    const bare = await send(g, 'POST', '/orders?only=query', ['host: api.example.com', AUTH()], '{}');
    expect(bare.json().url).toBe('/api/?only=query');
    // A client's own X-Forwarded-Prefix never reaches the backend: only the gateway's.
    const spoof = await send(g, 'POST', '/orders/1', ['host: api.example.com', 'x-forwarded-prefix: /evil', AUTH()], '{}');
    expect(spoof.json().headers['x-forwarded-prefix']).toBe('/orders');
    // A route is a whole segment: /ordersX is not under /orders/*.
    expect((await send(g, 'GET', '/ordersX/1', [AUTH()])).status).toBe(404);
  });

  it('auth: none needs no key: without one it is metered by the anonymous limit; a valid key there by its key; a keyed route still answers 401', async () => {
    const first = await send(g, 'GET', '/status', ['host: a.example', 'x-forwarded-for: 9.9.9.9']);
    expect(first.status).toBe(200);
    // The anonymous limit's one window (anonymous.perMinute 2): this route has no limits of its own.
    expect(first.headers['ratelimit-policy']).toBe('"minute";q=2;w=60');
    // A valid key sent to a public route is metered by its key (the client's anonymous window is not spent), and the
    // consumer headers go upstream.
    const withKey = await send(g, 'GET', '/status', [AUTH()]);
    expect(withKey.status).toBe(200);
    expect(withKey.json().headers['x-consumer-id']).toBe('key_routing');
    expect((await send(g, 'GET', '/status', [])).status).toBe(200);
    const third = await send(g, 'GET', '/status', []);
    expect(third.status).toBe(429);
    expect(third.json().code).toBe('rate_limit_exceeded');
    expect(catalog.seen).toHaveLength(3);
    const keyed = await send(g, 'GET', '/v1/categories', []);
    expect(keyed.status).toBe(429); // the same client's anonymous window is spent: refused before the 401
    const withGoodKey = await send(g, 'GET', '/v1/categories', [AUTH()]);
    expect(withGoodKey.status).toBe(200);
    expect(withGoodKey.json().headers['x-consumer-id']).toBe('key_routing');
  });

  it('a path no route matches gets 404 not_found without defaultService; /v1 is not special once services are configured', async () => {
    for (const target of ['/nowhere', '/v1/other', '/v1']) {
      const res = await send(g, 'GET', target, [AUTH()]);
      expect(res.status, target).toBe(404);
      expect(res.json().code).toBe('not_found');
    }
    expect(catalog.seen.length + orders.seen.length + legacy.seen.length).toBe(0);
  });

  it('the route policy still applies: deprecation headers on the matched route', async () => {
    const res = await send(g, 'GET', '/v1/pets/3', [AUTH()]);
    expect(res.status).toBe(200);
    // The route's deprecation (2026-06-01) as an RFC 9745 date, its sunset (2099-06-01) as an HTTP date.
    expect(res.headers.deprecation).toBe('@1780272000');
    expect(res.headers.sunset).toBe('Mon, 01 Jun 2099 00:00:00 GMT');
    expect(res.json().url).toBe('/v1/pets/3');
  });

  it('refused requests (401, 429) are labelled in /metrics with the route they matched, not /v1/*', async () => {
    await send(g, 'GET', '/v1/pets/4', ['authorization: Bearer tg_wrong', 'x-forwarded-for: 1.2.3.4']);
    const text = (await send(g, 'GET', '/metrics', [])).body.toString();
    expect(text).toMatch(/tollgate_http_requests_total\{route="\/v1\/pets\/:petId",method="GET",status="(401|429)"\} 1/);
    expect(text).toMatch(/tollgate_http_requests_total\{route="\/status",method="GET",status="429"\} 1/);
    expect(text).not.toContain('route="/v1/*"');
  });
});

describe('what a hostile or buggy client sends', () => {
  let g: TestGateway;
  beforeAll(async () => {
    g = await startTestGateway(routingConfig(), { keyStages: true });
  });
  afterAll(async () => g.close());

  it("Host values that only look like the route's host do not match it", async () => {
    for (const host of ['api.example.com.evil', 'evil@api.example.com', 'api.example.com@evil', 'xapi.example.com', 'api.example.com..']) {
      orders.seen.length = 0;
      const res = await send(g, 'POST', '/orders/1', [`host: ${host}`, AUTH()], '{}');
      expect(orders.seen, host).toHaveLength(0);
      expect([200, 400], host).toContain(res.status);
    }
  });

  it('the absolute-form authority wins over Host (RFC 9112 §3.2.2), both ways; X-Forwarded-Host names that host', async () => {
    // The target names the route's host, Host names another: the host route, and Host becomes the target's authority.
    const named = await send(g, 'POST', 'http://api.example.com/orders/5', ['host: www.example.com', AUTH()], '{}');
    expect(named.status).toBe(200);
    expect(named.json().url).toBe('/api/5');
    expect(named.json().headers['x-forwarded-host']).toBe('api.example.com');
    // Host names the route's host, the target another: not the host route (the legacy route takes it).
    const other = await send(g, 'POST', 'http://www.example.com:8080/orders/6', ['host: api.example.com', AUTH()], '{}');
    expect(other.status).toBe(200);
    expect(other.json().headers['x-forwarded-host']).toBe('www.example.com:8080');
    expect(orders.seen.map((r) => r.url)).toEqual(['/api/5']);
    expect(legacy.seen.map((r) => r.url)).toEqual(['/orders/6']);
    // Credentials in the authority are no part of the host; its case and port do not matter.
    const creds = await send(g, 'POST', 'http://user:pw@API.example.COM:443/orders/7', ['host: www.example.com', AUTH()], '{}');
    expect(creds.json().url).toBe('/api/7');
    expect(creds.json().headers['x-forwarded-host']).toBe('api.example.com:443');
  });

  it('a fully qualified host with its trailing dot matches the host route, in Host and in an absolute-form target', async () => {
    const dotted = await send(g, 'POST', '/orders/8', ['host: api.example.com.', AUTH()], '{}');
    const dottedPort = await send(g, 'POST', '/orders/9', ['host: API.example.com.:8443', AUTH()], '{}');
    const absolute = await send(g, 'POST', 'http://api.example.com./orders/10', ['host: www.example.com', AUTH()], '{}');
    expect([dotted.status, dottedPort.status, absolute.status]).toEqual([200, 200, 200]);
    expect(orders.seen.map((r) => r.url)).toEqual(['/api/8', '/api/9', '/api/10']);
    expect(legacy.seen).toHaveLength(0);
  });

  it('dot segments and encoded slashes cannot climb out of a stripped prefix: 400 before anything is called', async () => {
    for (const target of ['/orders/../admin', '/orders/%2e%2e/admin', '/orders/a%2F..%2Fadmin', '/orders/a%5C..%5Cb']) {
      const res = await send(g, 'POST', target, ['host: api.example.com', AUTH()], '{}');
      expect(res.status, target).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
    // One segment that merely spells the prefix with an encoded slash matches no route at all.
    expect((await send(g, 'POST', '/orders%2F..%2Fadmin', ['host: api.example.com', AUTH()], '{}')).status).toBe(404);
    expect(orders.seen.length + legacy.seen.length).toBe(0);
  });
});

describe('defaultService and the gateway paths', () => {
  let g: TestGateway;
  beforeAll(async () => {
    g = await startTestGateway(routingConfig({ defaultService: 'legacy' }), { keyStages: true });
  });
  afterAll(async () => g.close());

  it('requests that match no route go to defaultService, labelled (default)', async () => {
    const res = await send(g, 'DELETE', '/anything/at/all?z=1', [AUTH()]);
    expect(res.status).toBe(200);
    expect(legacy.seen.map((s) => `${s.method} ${s.url}`)).toEqual(['DELETE /anything/at/all?z=1']);
    const text = (await send(g, 'GET', '/metrics', [])).body.toString();
    expect(text).toContain('tollgate_http_requests_total{route="(default)",method="DELETE",status="200"} 1');
  });

  it("/healthz, /readyz, /metrics and the quota endpoint stay the gateway's own, whatever defaultService says", async () => {
    expect((await send(g, 'GET', '/healthz', [])).json()).toEqual({ status: 'ok' });
    expect((await send(g, 'GET', '/HEALTHZ', [])).status).toBe(200);
    expect((await send(g, 'GET', '/metrics', [])).body.toString()).toContain('tollgate_http_requests_total');
    expect((await send(g, 'GET', '/ratelimit', [AUTH()])).json()).toMatchObject({ plan: 'pro' });
    // A method the quota endpoint does not answer is a 404 of the gateway's, never the backend's.
    expect((await send(g, 'POST', '/ratelimit', [AUTH()], '{}')).status).toBe(404);
    expect(legacy.seen).toHaveLength(0);
  });

  it('an absolute-form target naming another host reaches only the configured target', async () => {
    const res = await send(g, 'GET', 'http://evil.example:9/steal?x=1', ['host: evil.example', AUTH()]);
    expect(res.status).toBe(200);
    expect(legacy.seen.map((s) => s.url)).toEqual(['/steal?x=1']);
    expect(legacy.seen[0]!.headers.host).toBe(`127.0.0.1:${legacy.port}`);
  });
});

describe('upstream.url with services', () => {
  it('the upstream section stays a service: /v1 and routes without a service go to it, next to the services', async () => {
    const g = await startTestGateway(
      testConfig({
        upstream: { url: legacy.url },
        services: { catalog: { targets: [catalog.url] } },
        routes: [
          { path: '/v1/old', deprecation: '2026-01-01T00:00:00Z' },
          { path: '/shop/*', service: 'catalog', stripPrefix: '/shop' },
        ],
      }),
    );
    try {
      expect((await send(g, 'GET', '/v1/old')).headers.deprecation).toBe('@1767225600'); // 2026-01-01T00:00:00Z
      expect((await send(g, 'GET', '/v1/new/1')).status).toBe(200);
      expect((await send(g, 'GET', '/shop/item')).status).toBe(200);
      expect((await send(g, 'GET', '/elsewhere')).status).toBe(404);
      expect(legacy.seen.map((s) => s.url)).toEqual(['/v1/old', '/v1/new/1']);
      expect(catalog.seen.map((s) => s.url)).toEqual(['/item']);
    } finally {
      await g.close();
    }
  });
});
