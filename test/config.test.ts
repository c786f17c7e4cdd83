// The configuration loader (docs: "Configuration reference"): defaults, unknown keys, every error at once with its path,
// environment overrides, cross-field rules, file and YAML failures, and a frozen result.
// Each failure mode has a fixture in test/fixtures/config/ whose "# expect:" comment lines are the exact errors.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG_PATH, EMPTY_DOCUMENT_ERROR, loadConfigFile, parseConfigText, resolveConfigPath, validateConfig } from '../src/config/load.js';
import type { Config } from '../src/config/schema.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/config/', import.meta.url));
const REPO_CONFIG = fileURLToPath(new URL('../config/gateway.yaml', import.meta.url));

const fixtures = readdirSync(FIXTURES)
  .filter((f) => f.endsWith('.yaml'))
  .sort()
  .map((file) => {
    const text = readFileSync(join(FIXTURES, file), 'utf8');
    const expected = [...text.matchAll(/^# expect: (.*)$/gm)].map((m) => m[1]!);
    return { file, text, expected };
  });

function ok(text: string, env: NodeJS.ProcessEnv = {}): Config {
  const r = parseConfigText(text, env);
  if (!r.ok) throw new Error(`expected a valid config, got:\n${r.errors.join('\n')}`);
  return r.config;
}

function errors(text: string, env: NodeJS.ProcessEnv = {}): string[] {
  const r = parseConfigText(text, env);
  if (r.ok) throw new Error('expected an invalid config');
  return r.errors;
}

const HEX = (c: string) => c.repeat(64);

describe('defaults', () => {
  it('`{}` is a complete config with every documented default', () => {
    const expected = {
      server: {
        host: '127.0.0.1',
        port: 8080,
        trustProxy: false,
        maxBodyBytes: 1_048_576,
        workers: 1,
        heapGrowthPercent: 35,
        drainTimeoutMs: 10_000,
        headersTimeoutMs: 10_000,
        requestTimeoutMs: 30_000,
        keepAliveTimeoutMs: 5_000,
        responseIdleTimeoutMs: 30_000,
        watchConfig: false,
        via: true,
      },
      upstream: { url: 'http://127.0.0.1:8081', timeoutMs: 10_000, hideCredentials: true, healthPath: '/healthz', maxSockets: 256 },
      log: { level: 'info', maxBufferBytes: 16_777_216 },
      plans: {
        free: { perMinute: 60, perDay: 1_000 },
        pro: { perMinute: 300, perDay: 10_000 },
        business: { perMinute: 1_000, perDay: 100_000 },
        enterprise: { perMinute: 10_000, perDay: 10_000_000 },
      },
      limits: { mode: 'enforce' },
      anonymous: { perMinute: 30 },
      ban: { enabled: true, mode: 'enforce', scope: 'key', threshold: 10, windowSeconds: 60, durationsSeconds: [60, 600, 3600], resetAfterSeconds: 86_400 },
      consumers: { forwardMetadata: [] },
      portal: { webhooks: false, host: '127.0.0.1', sessionHours: 8, signInsPerMinute: 10 },
      routes: [],
      methodOverride: 'match',
      keys: [],
      admin: { host: '127.0.0.1', port: 8079, tokens: [], maxFailuresPerMinute: 10 },
      selfService: { enabled: true, path: '/ratelimit' },
      usage: { enabled: true, retentionDays: 35, flushIntervalMs: 5000, reportMemoryMb: 128 },
      tracing: { serviceName: 'tollgate', exportIntervalMs: 1000 },
      auth: { sources: ['bearer'], foreignKeys: false, issuedPrefix: 'tg_' },
    };
    expect(ok('{}')).toEqual(expected);
    expect(ok('server: {}\nupstream: {}\n')).toEqual(expected);
    // No redis section means the in-memory store.
    expect(ok('{}').redis).toBeUndefined();
  });

  it('an empty document (nothing, only comments, or null) is an error, never a config of defaults', () => {
    for (const text of ['', '\n\n', '# nothing but a comment\n', 'null\n', '~\n', '---\n'])
      expect(errors(text), JSON.stringify(text)).toEqual([EMPTY_DOCUMENT_ERROR]);
  });

  it('fills defaults inside a partly given section', () => {
    const c = ok('server:\n  port: 9090\nredis:\n  url: redis://127.0.0.1:6390/2\nroutes:\n  - path: /v1/pets/:petId\n');
    expect(c.server).toMatchObject({ port: 9090, host: '127.0.0.1', maxBodyBytes: 1_048_576 });
    expect(c.redis).toEqual({
      url: 'redis://127.0.0.1:6390/2',
      prefix: 'tollgate:',
      failMode: 'open',
      commandTimeoutMs: 100,
      adminCommandTimeoutMs: 5000,
      allowEviction: false,
    });
    expect(c.routes[0]).toEqual({ path: '/v1/pets/:petId', method: '*', afterSunset: 'pass', cost: 1 });
  });

  it('plans given in the file replace the default plans', () => {
    const c = ok('plans:\n  gold: { perMinute: 5, perDay: 50 }\n');
    expect(c.plans).toEqual({ gold: { perMinute: 5, perDay: 50 } });
  });

  it('accepts every documented trustProxy form and upper-cases route methods', () => {
    for (const [yaml, value] of [
      ['true', true],
      ['2', 2],
      ['loopback', 'loopback'],
      ['[loopback, 10.0.0.0/8]', ['loopback', '10.0.0.0/8']],
    ] as const) {
      expect(ok(`server:\n  trustProxy: ${yaml}\n`).server.trustProxy).toEqual(value);
    }
    expect(ok('routes:\n  - { path: /v1/x, method: get }\n').routes[0]!.method).toBe('GET');
  });

  it('the shipped config/gateway.yaml is valid and says what the contract shows', async () => {
    const r = await loadConfigFile(REPO_CONFIG, {});
    if (!r.ok) throw new Error(r.errors.join('\n'));
    expect(r.path).toBe(REPO_CONFIG);
    expect(r.config.server).toMatchObject({ host: '127.0.0.1', port: 8080, trustProxy: false, maxBodyBytes: 1_048_576 });
    expect(r.config.upstream).toMatchObject({ url: 'http://127.0.0.1:8081', timeoutMs: 10_000, hideCredentials: true });
    expect(r.config.redis).toEqual({
      url: 'redis://127.0.0.1:6379/0',
      prefix: 'tollgate:',
      failMode: 'open',
      commandTimeoutMs: 100,
      adminCommandTimeoutMs: 5000,
      allowEviction: false,
    });
    expect(r.config.plans.free).toEqual({ perMinute: 60, perDay: 1000 });
    // The routes are the pet store's OpenAPI document's (docs/petstore.openapi.yaml), concrete paths first.
    expect(r.config.routes.map((x) => `${x.method} ${x.path} ${x.operationId}`)).toEqual([
      'GET /v1/categories listCategories',
      'POST /v1/categories createCategory',
      'GET /v1/store/orders listOrders',
      'GET /v1/categories/:id getCategory',
      'GET /v1/pets/:petId getPet',
    ]);
    // They are the upstream's (upstream.openapi): routes without a service, so UPSTREAM_URL moves them with the rest of /v1.
    expect(r.config.services).toBeUndefined();
    expect(r.config.openapi!.routes.every((d) => d?.operation.service === 'upstream')).toBe(true);
    expect(r.config.routes.find((x) => x.operationId === 'getPet')).toEqual({
      method: 'GET',
      path: '/v1/pets/:petId',
      operationId: 'getPet',
      deprecated: true,
      deprecation: '2026-06-01T00:00:00.000Z',
      sunset: '2027-06-01T00:00:00.000Z',
      link: 'https://example.com/docs/migrate-pets',
      successor: 'https://example.com/docs/pets-v2',
      afterSunset: 'gone',
      cost: 1,
    });
  });
});

describe('invalid files (test/fixtures/config)', () => {
  it('has a fixture for every failure mode, each with its expected errors', () => {
    // A bound: fixtures are added as failure modes are.
    expect(fixtures.length).toBeGreaterThanOrEqual(15);
    for (const f of fixtures) expect(f.expected.length, f.file).toBeGreaterThan(0);
  });

  it.each(fixtures.map((f) => [f.file, f] as const))('%s: reports exactly the expected errors, all at once', async (_name, f) => {
    const result = await loadConfigFile(join(FIXTURES, f.file), {});
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.path).toBe(join(FIXTURES, f.file));
    expect([...result.errors].sort()).toEqual([...f.expected].sort());
    for (const e of result.errors) {
      // One problem per line, each starting with where it is.
      expect(e).not.toContain('\n');
      expect(e).toMatch(/^(YAML|\(root\)|[A-Za-z][\w-]*(\.[\w-]+|\[\d+\])*): \S/);
    }
  });

  it('reports several errors at once, each with its path', () => {
    const errs = errors('server:\n  port: "x"\n  bogus: 1\nplans:\n  free: { perMinute: sixty, perDay: 1 }\nfoo: 1\n');
    expect(errs).toHaveLength(4);
    expect(errs).toContain('server.port: expected number, got "x"');
    expect(errs).toContain('server.bogus: unknown field');
    expect(errs).toContain('plans.free.perMinute: expected number, got "sixty"');
    expect(errs).toContain('foo: unknown field');
  });

  it('unknown keys are errors at every depth', () => {
    expect(errors('extra: 1\n')).toEqual(['extra: unknown field']);
    expect(errors('log:\n  level: info\n  format: json\n')).toEqual(['log.format: unknown field']);
    expect(errors('ban:\n  durationSeconds: [1]\n')).toEqual(['ban.durationSeconds: unknown field; did you mean durationsSeconds?']);
    expect(errors('routes:\n  - { path: /v1/x, sunst: "2027-01-01T00:00:00Z" }\n')).toEqual(['routes[0].sunst: unknown field; did you mean sunset?']);
  });

  it('validateConfig checks an object the same way', () => {
    const r = validateConfig({ server: { port: 'eighty' }, nope: true });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors.sort()).toEqual(['nope: unknown field', 'server.port: expected number, got "eighty"']);
  });
});

describe('cross-field rules', () => {
  const route = (fields: string) => `routes:\n  - { method: GET, path: /v1/pets/:petId, ${fields} }\n`;

  it('sunset must not be earlier than deprecation; equal is fine', () => {
    expect(errors(route('deprecation: "2027-01-01T00:00:00Z", sunset: "2026-12-31T23:59:59Z"'))).toEqual([
      'routes[0].sunset: sunset must not be earlier than deprecation (RFC 8594), got "2026-12-31T23:59:59Z"',
    ]);
    ok(route('deprecation: "2027-01-01T00:00:00Z", sunset: "2027-01-01T00:00:00Z"'));
    // Offsets are compared as instants: 01:00+02:00 is 23:00 the day before, after the deprecation.
    ok(route('deprecation: "2026-12-31T22:00:00Z", sunset: "2027-01-01T01:00:00+02:00"'));
  });

  it('afterSunset gone needs a sunset; pass does not', () => {
    expect(errors(route('afterSunset: gone'))).toEqual(['routes[0].afterSunset: afterSunset: gone needs a sunset date, got "gone"']);
    ok(route('afterSunset: pass, deprecation: "2026-01-01T00:00:00Z"'));
    ok(route('afterSunset: gone, sunset: "2027-01-01T00:00:00Z"'));
  });

  it('a static key must name a plan of this file', () => {
    expect(errors(`keys:\n  - { id: k1, plan: platinum, sha256: "${HEX('a')}" }\n`)).toEqual([
      'keys[0].plan: unknown plan; expected one of free, pro, business, enterprise, got "platinum"',
    ]);
    ok(`keys:\n  - { id: k1, plan: enterprise, sha256: "${HEX('a')}", perMinute: 5, perDay: 10, expiresAt: "2030-01-01T00:00:00Z" }\n`);
  });

  it('static key ids are unique', () => {
    expect(errors(`keys:\n  - { id: k1, plan: free, sha256: "${HEX('a')}" }\n  - { id: k1, plan: pro, sha256: "${HEX('b')}" }\n`)).toEqual([
      'keys[1].id: duplicate key id, got "k1"',
    ]);
  });

  it('route patterns must compile and live under /v1', () => {
    const errs = errors('routes:\n  - path: "/v1/pets/:"\n  - path: /pets/:petId\n');
    expect(errs).toHaveLength(2);
    expect(errs[0]).toMatch(/^routes\[0\]\.path: not a valid route pattern \(.+\), got "\/v1\/pets\/:"$/);
    expect(errs[1]).toBe('routes[1].path: expected a path under /v1/, such as /v1/pets/:petId, got "/pets/:petId"');
    ok('routes:\n  - path: /v1\n  - path: /v1/legacy/*rest\n  - path: /v1/pets/:petId/photos{/:photoId}\n');
  });

  it('reports field errors and cross-field errors together', () => {
    const errs = errors(`server:\n  port: -1\nroutes:\n  - { path: /v1/a, afterSunset: gone }\nkeys:\n  - { id: k, plan: nope, sha256: "${HEX('c')}" }\n`);
    expect(errs).toContain('routes[0].afterSunset: afterSunset: gone needs a sunset date, got "gone"');
    expect(errs).toContain('keys[0].plan: unknown plan; expected one of free, pro, business, enterprise, got "nope"');
    expect(errs.some((e) => e.startsWith('server.port: '))).toBe(true);
  });
});

describe('environment overrides', () => {
  const FILE = 'server:\n  host: 127.0.0.1\n  port: 8080\nupstream:\n  url: http://127.0.0.1:8081\nlog:\n  level: info\n';

  it('PORT, HOST, UPSTREAM_URL, REDIS_URL and LOG_LEVEL override the file', () => {
    const c = ok(FILE, {
      PORT: '9999',
      HOST: '::1',
      UPSTREAM_URL: 'https://backend.internal:8443/base',
      REDIS_URL: 'redis://127.0.0.1:6391/3',
      LOG_LEVEL: 'debug',
    });
    expect(c.server.port).toBe(9999);
    expect(c.server.host).toBe('::1');
    expect(c.upstream.url).toBe('https://backend.internal:8443/base');
    expect(c.redis).toEqual({
      url: 'redis://127.0.0.1:6391/3',
      prefix: 'tollgate:',
      failMode: 'open',
      commandTimeoutMs: 100,
      adminCommandTimeoutMs: 5000,
      allowEviction: false,
    });
    expect(c.log.level).toBe('debug');
    // Fields of the same section that the environment does not name keep the file's values and defaults.
    expect(c.upstream.timeoutMs).toBe(10_000);
  });

  it('REDIS_URL replaces only the url of a redis section the file has', () => {
    const c = ok('redis:\n  url: redis://127.0.0.1:6379/0\n  prefix: "acme:"\n  failMode: closed\n', { REDIS_URL: 'redis://127.0.0.1:6392/1' });
    expect(c.redis).toEqual({
      url: 'redis://127.0.0.1:6392/1',
      prefix: 'acme:',
      failMode: 'closed',
      commandTimeoutMs: 100,
      adminCommandTimeoutMs: 5000,
      allowEviction: false,
    });
  });

  it('empty or unset variables do not override', () => {
    const c = ok(FILE, { PORT: '', HOST: '', UPSTREAM_URL: '', REDIS_URL: '', LOG_LEVEL: '' });
    expect(c.server.port).toBe(8080);
    expect(c.redis).toBeUndefined();
    expect(c.log.level).toBe('info');
  });

  it('a bad value from the environment names the variable', () => {
    expect(errors(FILE, { PORT: 'eighty' })).toEqual(['server.port: expected number, got "eighty" (from PORT)']);
    expect(errors(FILE, { PORT: '70000' })).toEqual(['server.port: Too big: expected number to be <=65535, got 70000 (from PORT)']);
    expect(errors(FILE, { PORT: '80.5' })).toEqual(['server.port: expected number, got "80.5" (from PORT)']);
    expect(errors(FILE, { UPSTREAM_URL: 'backend:8081' })).toEqual([
      'upstream.url: expected an http:// or https:// URL, got "backend:8081" (from UPSTREAM_URL)',
    ]);
    expect(errors(FILE, { REDIS_URL: 'mysql://x' })).toEqual(['redis.url: expected a redis:// or rediss:// URL, got "mysql://x" (from REDIS_URL)']);
    expect(errors(FILE, { LOG_LEVEL: 'verbose' })).toEqual([
      'log.level: expected one of "fatal", "error", "warn", "info", "debug", "trace", "silent", got "verbose" (from LOG_LEVEL)',
    ]);
  });

  it('a bad value in the file does not blame the environment', () => {
    expect(errors('server:\n  port: eighty\n', {})).toEqual(['server.port: expected number, got "eighty"']);
    // ...and a good PORT fixes a bad file value.
    expect(ok('server:\n  port: eighty\n', { PORT: '8081' }).server.port).toBe(8081);
  });

  it('loadConfigFile applies the environment it is given', async () => {
    const r = await loadConfigFile(REPO_CONFIG, { PORT: '0', LOG_LEVEL: 'warn' });
    expect(r.ok && r.config.server.port).toBe(0);
    expect(r.ok && r.config.log.level).toBe('warn');
  });
});

describe('reading the file', () => {
  it('a missing file is one clear error naming it', async () => {
    const path = join(FIXTURES, 'does-not-exist.yaml');
    expect(await loadConfigFile(path, {})).toEqual({ ok: false, errors: [`${path}: file not found`], path });
  });

  it('a directory is an error, not a crash', async () => {
    const r = await loadConfigFile(FIXTURES, {});
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors[0]!.startsWith(`${FIXTURES}: `)).toBe(true);
  });

  it('a YAML syntax error names its line', () => {
    const errs = errors('server:\n  port: [8080\n');
    expect(errs).toHaveLength(1);
    expect(errs[0]).toMatch(/^YAML: .*line \d+, column \d+$/);
  });

  it('a scalar or list document is refused', () => {
    expect(errors('just a string\n')).toEqual(['(root): expected a mapping of sections (server, upstream, ...), got "just a string"']);
    expect(errors('- a\n')).toEqual(['(root): expected a mapping of sections (server, upstream, ...), got a list']);
  });

  it('resolves the path: --config, else TOLLGATE_CONFIG, else config/gateway.yaml', () => {
    expect(resolveConfigPath('a.yaml', { TOLLGATE_CONFIG: 'b.yaml' })).toBe('a.yaml');
    expect(resolveConfigPath(undefined, { TOLLGATE_CONFIG: 'b.yaml' })).toBe('b.yaml');
    expect(resolveConfigPath(undefined, {})).toBe(DEFAULT_CONFIG_PATH);
    expect(DEFAULT_CONFIG_PATH).toBe('config/gateway.yaml');
  });
});

describe('the result', () => {
  it('is deeply frozen', () => {
    const c = ok(`routes:\n  - { path: /v1/x, deprecation: "2026-01-01T00:00:00Z" }\nkeys:\n  - { id: k, plan: free, sha256: "${HEX('d')}" }\n`);
    for (const part of [c, c.server, c.upstream, c.plans, c.plans.free, c.ban, c.ban.durationsSeconds, c.routes, c.routes[0], c.keys, c.keys[0]]) {
      expect(Object.isFrozen(part)).toBe(true);
    }
    expect(() => {
      (c.server as { port: number }).port = 1;
    }).toThrow(TypeError);
    expect(() => {
      (c.ban.durationsSeconds as number[]).push(1);
    }).toThrow(TypeError);
    expect(() => {
      (c.plans as Record<string, unknown>).extra = {};
    }).toThrow(TypeError);
    expect(c.server.port).toBe(8080);
  });

  it('shares nothing between two loads', () => {
    const a = ok('{}');
    const b = ok('{}', { PORT: '1' });
    expect(a.server.port).toBe(8080);
    expect(b.server.port).toBe(1);
    expect(a.plans).not.toBe(b.plans);
  });
});
