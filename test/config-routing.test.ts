// The services and routes config (docs/routing.md): what a valid file yields, every cross-field rule with the path it
// names, and `tollgate config check` on the built CLI refusing a routing mistake with one line per problem.
import { describe, expect, it } from 'vitest';
import { parseConfigText, validateConfig } from '../src/config/load.js';
import { matchRoute, withUpstreamCatchAll } from '../src/routing/routes.js';
import type { Config } from '../src/config/schema.js';
import { assertBuilt, runCli, startServe, tempDir } from './helpers/cli.js';
import { generateKey, hashKey } from '../src/keys/format.js';
import { TestUpstream } from './helpers/upstream.js';

function ok(text: string): Config {
  const r = parseConfigText(text);
  if (!r.ok) throw new Error(`expected a valid config, got:\n${r.errors.join('\n')}`);
  return r.config;
}

function errors(text: string): string[] {
  const r = parseConfigText(text);
  if (r.ok) throw new Error('expected an invalid config');
  return r.errors;
}

const FULL = `
services:
  catalog:
    targets:
      - http://10.0.0.11:8081
      - { url: http://10.0.0.12:8081, weight: 2 }
    balance: round-robin
    timeoutMs: 10000
    connectTimeoutMs: 2000
    retries: 1
    retryOn: [502, 503]
    healthCheck: { path: /healthz, intervalMs: 5000, timeoutMs: 1000, unhealthyAfter: 3, healthyAfter: 2 }
    eject: { consecutiveFailures: 5, forMs: 30000 }
  orders:
    targets: [http://orders.internal:9000/api]
routes:
  - path: /v1/categories
    service: catalog
  - path: /orders/*
    method: post
    host: API.Example.com
    service: orders
    stripPrefix: /orders
  - path: /status
    service: catalog
    auth: none
  - method: GET
    path: /v1/pets/:petId
    service: catalog
    deprecation: "2026-06-01T00:00:00Z"
    sunset: "2027-06-01T00:00:00Z"
defaultService: catalog
`;

describe('a valid services and routes config', () => {
  it('the documented example parses, with targets normalised and defaults filled in', () => {
    const c = ok(FULL);
    expect(c.services!.catalog!.targets).toEqual([
      { url: 'http://10.0.0.11:8081', weight: 1 },
      { url: 'http://10.0.0.12:8081', weight: 2 },
    ]);
    expect(c.services!.orders).toEqual({
      targets: [{ url: 'http://orders.internal:9000/api', weight: 1 }],
      balance: 'round-robin',
      timeoutMs: 10_000,
      connectTimeoutMs: 2000,
      retries: 1,
      retryOn: [],
      eject: { consecutiveFailures: 5, forMs: 30_000, maxPercent: 50, on: ['connect', 'reset', 'timeout', 502, 503, 504] },
    });
    expect(c.routes[1]).toMatchObject({ method: 'POST', host: 'api.example.com', service: 'orders', stripPrefix: '/orders' });
    expect(c.routes[2]!.auth).toBe('none');
    expect(c.defaultService).toBe('catalog');
    // Services without an upstream section: upstream.url is no service (its defaults are still filled in).
    expect(c.upstreamIsService).toBe(false);
    expect(c.upstream.url).toBe('http://127.0.0.1:8081');
  });

  it('upstream.url alone stays the one-service shorthand; with services, an upstream section is a service too', () => {
    const shorthand = ok('upstream: { url: "http://127.0.0.1:9000" }\nroutes:\n  - path: /v1/old\n    deprecation: "2026-01-01T00:00:00Z"\n');
    expect(shorthand.services).toBeUndefined();
    expect(shorthand.upstreamIsService).toBeUndefined();
    const both = ok(
      'upstream: { url: "http://127.0.0.1:9000" }\nservices:\n  web: { targets: [http://127.0.0.1:9001] }\nroutes:\n  - path: /v1/old\n  - path: /web/*\n    service: web\n',
    );
    expect(both.upstreamIsService).toBe(true);
  });

  it('an upstream section without url beside services holds settings for every service, and is no service', () => {
    const settings = ok(
      'upstream: { hideCredentials: false, maxSockets: 64 }\nservices:\n  web: { targets: [http://127.0.0.1:9001] }\nroutes:\n  - path: /web/*\n    service: web\n',
    );
    expect(settings.upstreamIsService).toBe(false);
    expect(settings.upstream.hideCredentials).toBe(false);
    expect(settings.upstream.maxSockets).toBe(64);
    // No /v1/* catch-all to a service at 127.0.0.1:8081.
    expect(withUpstreamCatchAll([], settings)).toEqual([]);
    // What only a service means there, and a route that would need it as one, is refused, naming the field.
    const refused = errors(
      'upstream: { hideCredentials: false, timeoutMs: 5000, healthPath: /up }\nservices:\n  web: { targets: [http://127.0.0.1:9001] }\nroutes:\n  - path: /v1/things\n',
    );
    expect(refused).toEqual([
      expect.stringMatching(/^upstream\.timeoutMs: an upstream section without url beside services is no service .*services\.<name>\.timeoutMs/),
      expect.stringMatching(/^upstream\.healthPath: an upstream section without url beside services is no service/),
      'routes[0].service: the route names no service, and the upstream section, without url, is no service beside services; name one of the services',
    ]);
    // UPSTREAM_URL gives it a url: the shorthand is a service again.
    const fromEnv = parseConfigText('upstream: { hideCredentials: false }\nservices:\n  web: { targets: [http://127.0.0.1:9001] }\n', {
      UPSTREAM_URL: 'http://127.0.0.1:9000',
    });
    expect(fromEnv.ok && fromEnv.config.upstreamIsService).toBe(true);
  });

  it('routes may live outside /v1 when they name a service; the gateway paths move with selfService and ops', () => {
    ok('services:\n  web: { targets: [http://127.0.0.1:9001] }\nroutes:\n  - path: /api/*\n    service: web\n  - path: /pets/:id\n    service: web\n');
    // With an ops listener, /readyz and /metrics on the gateway port are free to route; a moved quota path frees /ratelimit.
    ok(
      'ops: { port: 9102 }\nselfService: { path: /quota }\nservices:\n  web: { targets: [http://127.0.0.1:9001] }\nroutes:\n  - path: /metrics\n    service: web\n  - path: /ratelimit\n    service: web\n',
    );
  });
});

describe('routing mistakes are config errors naming the path', () => {
  it('a route that would take the quota endpoint moved elsewhere, or /readyz on the gateway port', () => {
    expect(
      errors(
        'selfService: { path: /quota }\nservices:\n  web: { targets: [http://127.0.0.1:9001] }\nroutes:\n  - path: /quota\n    service: web\n  - path: /readyz\n    service: web\n',
      ),
    ).toEqual([
      'routes[0].path: route /quota would take the gateway\'s own /quota; those are never routed, got "/quota"',
      'routes[1].path: route /readyz would take the gateway\'s own /readyz; those are never routed, got "/readyz"',
    ]);
  });

  it('a prefix that covers a gateway path, spelled in another case, is caught too', () => {
    expect(errors('services:\n  web: { targets: [http://127.0.0.1:9001] }\nroutes:\n  - path: /HEALTHZ\n    service: web\n')).toEqual([
      'routes[0].path: route /HEALTHZ would take the gateway\'s own /healthz; those are never routed, got "/HEALTHZ"',
    ]);
  });

  it('stripPrefix on a route without a service, and a service named "upstream" next to the upstream section', () => {
    expect(errors('routes:\n  - path: /v1/x/*\n    stripPrefix: /v1\n')).toEqual([
      'routes[0].stripPrefix: route /v1/x/*: stripPrefix needs a service (the upstream gets /v1 paths whole), got "/v1"',
    ]);
    expect(errors('upstream: { url: "http://127.0.0.1:9000" }\nservices:\n  upstream: { targets: [http://127.0.0.1:9001] }\n')).toEqual([
      'services.upstream: the name "upstream" is taken by the upstream section (its service); rename one, got "upstream"',
    ]);
  });

  it('an unknown service with no services at all says so', () => {
    expect(errors('routes:\n  - path: /v1/x\n    service: web\ndefaultService: web\n')).toEqual([
      'routes[0].service: route /v1/x: unknown service; no services are configured, got "web"',
      'defaultService: unknown service; no services are configured, got "web"',
    ]);
  });

  it('bad service fields: strings where numbers go, negative retries, a health check without a path, unknown fields', () => {
    expect(
      errors(
        'services:\n  web:\n    targets: [http://127.0.0.1:9001]\n    retries: -1\n    timeoutMs: soon\n    healthCheck: { intervalMs: 10 }\n    sticky: true\n  "bad name": { targets: [http://127.0.0.1:9002] }\n',
      ),
    ).toEqual([
      'services.web.timeoutMs: expected number, got "soon"',
      'services.web.retries: Too small: expected number to be >=0, got -1',
      'services.web.healthCheck.path: expected string, got nothing',
      'services.web.healthCheck.intervalMs: Too small: expected number to be >=100, got 10',
      'services.web.sticky: unknown field',
      'services.bad name: service names are 1-64 characters of A-Z a-z 0-9 _ . -, got "bad name"',
    ]);
  });
});

describe('tollgate config check (built CLI)', () => {
  it('accepts the documented example and refuses a route onto /healthz and an unknown service, one line each, exit 1', async () => {
    assertBuilt();
    const tmp = tempDir();
    try {
      const good = tmp.write('routing.yaml', FULL);
      const r = await runCli(['config', 'check', '--config', good]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(': OK (');
      const bad = tmp.write(
        'bad.yaml',
        'services:\n  web: { targets: [http://127.0.0.1:9001] }\nroutes:\n  - path: /healthz\n    service: web\n  - path: /x\n    service: webb\n',
      );
      const b = await runCli(['config', 'check', '--config', bad]);
      expect(b.code).toBe(1);
      expect(b.stdout).toBe('');
      expect(b.stderr).toContain('invalid configuration (2 problems)');
      expect(b.stderr).toContain('  routes[0].path: route /healthz would take the gateway\'s own /healthz; those are never routed, got "/healthz"\n');
      expect(b.stderr).toContain('  routes[1].service: route /x: unknown service; expected one of web, got "webb"\n');
      expect(b.stderr).not.toMatch(/\n\s+at /);
    } finally {
      tmp.remove();
    }
  });
});

describe('tollgate serve with a gateway-wide upstream setting beside services (built CLI)', () => {
  it('routes nothing to a phantom upstream service, applies the setting to every service, and names the services routed to', async () => {
    assertBuilt();
    const up = await TestUpstream.start();
    const dir = tempDir();
    const key = generateKey();
    const file = dir.write('gateway.yaml', {
      server: { host: '127.0.0.1', port: 0 },
      upstream: { hideCredentials: false },
      services: { web: { targets: [up.url] } },
      routes: [{ path: '/web/*', service: 'web' }],
      plans: { free: { perMinute: 100, perDay: 1000 } },
      keys: [{ id: 'k1', plan: 'free', sha256: hashKey(key) }],
    });
    const serve = await startServe(file);
    try {
      const line = serve.proc.logs.find((l) => l.msg === 'tollgate gateway listening')!;
      expect(line.services).toEqual({ web: [up.url] });
      expect(line).not.toHaveProperty('upstream');
      const phantom = await fetch(`${serve.url}/v1/things`, { headers: { authorization: `Bearer ${key}` } });
      expect(phantom.status).toBe(404);
      expect(((await phantom.json()) as { code: string }).code).toBe('not_found');
      const readyz = (await (await fetch(`${serve.url}/readyz`)).text()).toLowerCase();
      expect(readyz).not.toContain('8081');
      // hideCredentials: false applies to the service: its key reaches it.
      expect((await fetch(`${serve.url}/web/a`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
      expect(up.seen.map((s) => [s.url, s.headers.authorization])).toEqual([['/web/a', `Bearer ${key}`]]);
    } finally {
      await serve.proc.stop();
      await up.close();
      dir.remove();
    }
  }, 60_000);
});

describe('"under /v1": one rule (isUnderUpstreamPrefix) for the config and the route table', () => {
  const errorsOf = (raw: Record<string, unknown>) => {
    const r = validateConfig(raw);
    return r.ok ? [] : r.errors;
  };
  it('a route that names no service is under /v1 in any case, as a request is; /v1x is not', () => {
    expect(errorsOf({ routes: [{ path: '/V1/pets' }] })).toEqual([]);
    expect(errorsOf({ routes: [{ path: '/v1x/pets' }] })).toEqual(['routes[0].path: expected a path under /v1/, such as /v1/pets/:petId, got "/v1x/pets"']);
    expect(errorsOf({ selfService: { path: '/V1/quota' } })).toEqual([
      'selfService.path: must not be under /v1 (those requests go to the upstream), got "/V1/quota"',
    ]);
    const catchAll = withUpstreamCatchAll([], {});
    expect(matchRoute(catchAll, 'GET', '/V1/pets')?.service).toBe('upstream');
    expect(matchRoute(catchAll, 'GET', '/v1x')).toBeUndefined();
  });
});
