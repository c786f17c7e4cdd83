// A route's stability (docs: "Routing", Stability): X-API-Stability on every answer of the route once matched (its
// 200s, 401s and 429s too), and services.<name>.openapi.stability's plans: a key of a plan not listed for the route's
// stability gets 403 plan_not_allowed before any quota is taken (its windows and strikes in Redis exactly as they
// were, the backend never called); a listed plan passes, and so does any plan on a stability the map does not list.
// On real Redis, with keys issued in it, through the gateway composeGateway builds.
import { describe, expect, it } from 'vitest';
import type { Config } from '../src/config/schema.js';
import { validateConfig } from '../src/config/load.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { assertBuilt, runCli, tempDir } from './helpers/cli.js';
import { testConfig } from './helpers/gateway.js';
import { startLimitsGateway, type LimitsGateway } from './helpers/limits.js';
import { useStack, type Stack } from './helpers/stack.js';
import { echo } from './helpers/upstream.js';
import { keySubject } from '../src/limits/subject.js';

const PREFIX = 'stab:';
const ks = new Keyspace(PREFIX);

function rawConfig(
  stack: Stack<never>,
  stability: Record<string, string[]> = { experimental: ['business'], beta: ['pro', 'business'] },
): Record<string, unknown> {
  return {
    redis: { url: stack.redis.url, prefix: PREFIX, commandTimeoutMs: 1000 },
    plans: { free: { perMinute: 2, perDay: 100 }, pro: { perMinute: 50, perDay: 1000 }, business: { perMinute: 50, perDay: 1000 } },
    anonymous: { perMinute: 50 },
    ban: { threshold: 3, windowSeconds: 60, durationsSeconds: [300], resetAfterSeconds: 3600 },
    services: { catalog: { targets: [stack.up.url], openapi: { stability } } },
    routes: [
      { path: '/exp', service: 'catalog', stability: 'experimental' },
      { path: '/beta', service: 'catalog', stability: 'beta' },
      { path: '/stable', service: 'catalog', stability: 'stable' },
      { path: '/public-exp', service: 'catalog', auth: 'none', stability: 'experimental' },
      { path: '/plain', service: 'catalog' },
    ],
  };
}

const stack = useStack({
  redis: true,
  client: true,
  gateway: async (s): Promise<LimitsGateway> => startLimitsGateway(testConfig(rawConfig(s))),
});

async function call(path: string, key?: string): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
  const res = await fetch(`${stack.gw.url}${path}`, { headers: key ? { authorization: `Bearer ${key}` } : {}, signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text.startsWith('{') ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** Every Redis key of one API key's limits, with its value: what a refusal before the limits must leave as it was. */
async function limitState(id: string): Promise<unknown[]> {
  const keys = [ks.minuteWindow(keySubject(id)), ks.dayWindow(keySubject(id)), ks.ban(keySubject(id)), ks.strikes(keySubject(id))];
  return Promise.all(keys.map(async (k) => [k, await stack.client.type(k), await stack.client.dump(k)]));
}

describe('X-API-Stability', () => {
  it('is on the 200, the 401 and the 429 of a route with a stability, and on no other route', async () => {
    const ok = await call('/stable', (await stack.gw.createKey({ plan: 'pro' })).key);
    expect([ok.status, ok.headers.get('x-api-stability')]).toEqual([200, 'stable']);
    const noKey = await call('/exp');
    expect([noKey.status, noKey.body.code, noKey.headers.get('x-api-stability')]).toEqual([401, 'missing_api_key', 'experimental']);
    const { key } = await stack.gw.createKey({ plan: 'free' });
    expect((await call('/beta-not-a-route')).headers.get('x-api-stability')).toBeNull();
    for (let i = 0; i < 2; i++) expect((await call('/stable', key)).status).toBe(200);
    const refused = await call('/stable', key);
    expect([refused.status, refused.body.code, refused.headers.get('x-api-stability')]).toEqual([429, 'rate_limit_exceeded', 'stable']);
    expect((await call('/plain', (await stack.gw.createKey({ plan: 'pro' })).key)).headers.get('x-api-stability')).toBeNull();
  });

  it("wins over the backend's own X-API-Stability", async () => {
    stack.up.behaviour = (_req, res) => {
      res.setHeader('x-api-stability', 'stable');
      res.end('{}');
    };
    try {
      const r = await call('/beta', (await stack.gw.createKey({ plan: 'pro' })).key);
      expect([r.status, r.headers.get('x-api-stability')]).toEqual([200, 'beta']);
    } finally {
      stack.up.behaviour = echo;
    }
  });
});

describe('403 plan_not_allowed', () => {
  it('refuses an unlisted plan before the limits: windows, strikes and quota untouched, backend not called', async () => {
    const { id, key } = await stack.gw.createKey({ plan: 'free' });
    // One admitted request first, so that the key has windows in Redis to compare.
    expect((await call('/plain', key)).status).toBe(200);
    const before = await limitState(id);
    const quotaBefore = await call('/ratelimit', key);
    const seen = stack.up.seen.length;
    // More than the plan's 2 per minute: any of them counted would have made a 429 and a ban strike.
    for (let i = 0; i < 5; i++) {
      const r = await call('/exp', key);
      expect(r.status).toBe(403);
      expect(r.body).toEqual({
        code: 'plan_not_allowed',
        status: 403,
        message: 'This route is experimental: plan free is not allowed to call it (open to business).',
      });
      expect(r.headers.get('x-api-stability')).toBe('experimental');
      expect(r.headers.get('retry-after')).toBeNull();
    }
    expect((await call('/beta', key)).body.message).toBe('This route is beta: plan free is not allowed to call it (open to pro, business).');
    expect(await limitState(id)).toEqual(before);
    const remaining = (q: { body: Record<string, unknown> }) =>
      (q.body.windows as Array<{ name: string; remaining: number }>).map((w) => [w.name, w.remaining]);
    expect(remaining(await call('/ratelimit', key))).toEqual(remaining(quotaBefore));
    expect(remaining(quotaBefore)).toEqual([
      ['minute', 1],
      ['day', 99],
    ]);
    expect(stack.up.seen.length).toBe(seen);
    // Still one request of the minute left: nothing above spent it.
    expect((await call('/plain', key)).status).toBe(200);
  });

  it('a listed plan passes and is counted; a stability the map does not list is open to every plan', async () => {
    const business = await stack.gw.createKey({ plan: 'business' });
    const r = await call('/exp', business.key);
    expect([r.status, r.headers.get('x-api-stability')]).toEqual([200, 'experimental']);
    expect(await stack.client.exists(ks.minuteWindow(keySubject(business.id)))).toBe(1);
    expect((await call('/beta', (await stack.gw.createKey({ plan: 'pro' })).key)).status).toBe(200);
    expect((await call('/stable', (await stack.gw.createKey({ plan: 'free' })).key)).status).toBe(200);
  });

  it('a public route: no key passes with the header; a valid key of an unlisted plan is refused, a listed one passes', async () => {
    const anon = await call('/public-exp');
    expect([anon.status, anon.headers.get('x-api-stability')]).toEqual([200, 'experimental']);
    const free = await stack.gw.createKey({ plan: 'free' });
    const refused = await call('/public-exp', free.key);
    expect([refused.status, refused.body.code]).toEqual([403, 'plan_not_allowed']);
    expect(await stack.client.exists(ks.minuteWindow(keySubject(free.id)))).toBe(0);
    expect((await call('/public-exp', (await stack.gw.createKey({ plan: 'business' })).key)).status).toBe(200);
  });

  it('follows a key whose plan changes, and a reload that changes the plans of a stability', async () => {
    const { id, key } = await stack.gw.createKey({ plan: 'free' });
    expect((await call('/exp', key)).status).toBe(403);
    await stack.gw.gateway.admin.lifecycle.update(id, { plan: 'business' });
    expect((await call('/exp', key)).status).toBe(200);
    await stack.gw.gateway.admin.lifecycle.update(id, { plan: 'pro' });
    expect((await call('/exp', key)).status).toBe(403);

    const reloaded: Config = testConfig(rawConfig(stack as unknown as Stack<never>, { experimental: ['pro'] }));
    stack.gw.runtime.apply(reloaded);
    try {
      expect((await call('/exp', key)).status).toBe(200);
      // beta is no longer in the map: open to every plan.
      expect((await call('/beta', (await stack.gw.createKey({ plan: 'free' })).key)).status).toBe(200);
    } finally {
      stack.gw.runtime.apply(testConfig(rawConfig(stack as unknown as Stack<never>)));
    }
    expect((await call('/exp', key)).status).toBe(403);
  });
});

describe('stability in the config', () => {
  const base = (route: Record<string, unknown>, stability: Record<string, unknown> = {}) => ({
    plans: { free: { perMinute: 1, perDay: 1 }, pro: { perMinute: 1, perDay: 1 } },
    services: { catalog: { targets: ['http://127.0.0.1:9'], openapi: { stability } } },
    routes: [
      { path: '/ok', service: 'catalog' },
      { path: '/x', service: 'catalog', ...route },
    ],
  });
  const errorsOf = (raw: Record<string, unknown>): string => {
    const r = validateConfig(raw);
    return r.ok ? '' : r.errors.join('\n');
  };

  it('refuses a stability that is not a token: CR/LF, spaces, empty, too long, header syntax', () => {
    for (const stability of ['beta\r\nX-Injected: 1', 'beta\n', 'public beta', ' beta', '', '-beta', 'beta;q=1', 'béta', 'x'.repeat(65)]) {
      const errors = errorsOf(base({ stability }));
      expect(errors, JSON.stringify(stability)).toMatch(/^routes\[1\]\.stability: expected a stability token/m);
    }
    expect(errorsOf(base({ stability: 'Beta-2' }))).toBe('');
  });

  it('refuses unknown plans and non-token values in the map, naming the path', () => {
    expect(errorsOf(base({ stability: 'beta' }, { beta: ['pro', 'gold'], experimental: ['nope'] }))).toMatch(
      /^services\.catalog\.openapi\.stability\.beta\[1\]: unknown plan; expected one of free, pro, got "gold"\nservices\.catalog\.openapi\.stability\.experimental\[0\]: unknown plan/m,
    );
    expect(errorsOf(base({ stability: 'beta' }, { 'not ok': ['pro'] }))).toMatch(/^services\.catalog\.openapi\.stability\.not ok: expected a stability token/m);
    expect(errorsOf(base({ stability: 'beta' }, { beta: 'pro' }))).toMatch(/^services\.catalog\.openapi\.stability\.beta: /m);
  });

  it('accepts openapi with only stability (no document), and openapi: {} alike', () => {
    expect(errorsOf(base({ stability: 'beta' }, { beta: ['pro'] }))).toBe('');
    expect(validateConfig({ services: { catalog: { targets: ['http://127.0.0.1:9'], openapi: {} } }, defaultService: 'catalog' }).ok).toBe(true);
  });

  it('config check warns about a stability no route of the service has, and accepts the file', async () => {
    assertBuilt();
    const dir = tempDir();
    try {
      const file = dir.write('gateway.yaml', base({ stability: 'beta' }, { beta: ['pro'], Beta: ['pro'], experimental: ['free'] }));
      const r = await runCli(['config', 'check', '--config', file]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain(
        'warning: services.catalog.openapi.stability.Beta: no route of service catalog has stability Beta, so these plans limit nothing (its routes carry beta)\n',
      );
      expect(r.stderr).toContain('warning: services.catalog.openapi.stability.experimental: no route of service catalog has stability experimental');
      expect(r.stderr).not.toContain('stability.beta:');
    } finally {
      dir.remove();
    }
  });

  it('config check warns about a gated stability on a public route (a request without a key passes the gate), one line naming its routes', async () => {
    assertBuilt();
    const dir = tempDir();
    try {
      const raw = base({ stability: 'experimental', auth: 'none' }, { experimental: ['pro'], beta: ['pro'] });
      raw.routes.push(
        { path: '/y', service: 'catalog', stability: 'experimental', auth: 'none' } as (typeof raw.routes)[number],
        {
          path: '/z',
          service: 'catalog',
          stability: 'beta',
        } as (typeof raw.routes)[number],
      );
      const r = await runCli(['config', 'check', '--config', dir.write('gateway.yaml', raw)]);
      expect(r.code, r.stderr).toBe(0);
      const lines = r.stderr.split('\n').filter((l) => l.includes('public (auth: none)'));
      expect(lines).toEqual([
        "warning: services.catalog.openapi.stability.experimental: 2 routes * /x, * /y are public (auth: none), and the gate judges a key's plan: a request without a key passes it. Make the operation keyed (its security) to hold it for the plans listed",
      ]);
    } finally {
      dir.remove();
    }
  });
});
