// The upstream section's own OpenAPI document (upstream.openapi), end to end with the built CLI: its operations are
// routes to the upstream service, so UPSTREAM_URL (what the container image is run with) moves every one of them with
// the rest of /v1, and a decoy listening at the config's upstream.url sees nothing. Key sources from the document's
// security scheme, deprecation and sunset, request validation and the stability gate (upstream.openapi.stability) work
// as for a service's document; a reload applies a new stability map and --watch-config a changed document. A document
// whose operations are not under /v1 is refused naming file#pointer; `openapi diff --service upstream` compares one.
// `tollgate dev` takes the pet store's document as the upstream's, getPet's sunset pushed ahead.
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { loadConfigFile } from '../src/config/load.js';
import { generateKey, hashKey } from '../src/keys/format.js';
import { CliProcess, assertBuilt, runCli, tempDir } from './helpers/cli.js';
import { freePort } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';

const FREE = generateKey();
const PRO = generateKey();
const ok200 = { '200': { description: 'ok' } };

/** Under /v1 by servers[0].url; keys in X-Thing-Key; a deprecated operation, a sunset one, an experimental one. */
const things = (extraPaths: Record<string, unknown> = {}, servers = [{ url: 'https://api.example.com/v1' }]) => ({
  openapi: '3.1.0',
  info: { title: 'things', version: '1' },
  servers,
  security: [{ thingKey: [] }],
  paths: {
    '/things': {
      get: { operationId: 'listThings', responses: ok200 },
      post: {
        operationId: 'createThing',
        'x-stability': 'experimental',
        requestBody: {
          required: true,
          content: { 'application/json': { schema: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } } } },
        },
        responses: ok200,
      },
    },
    '/things/{id}': {
      get: {
        operationId: 'getThing',
        deprecated: true,
        'x-deprecated-at': '2026-01-15',
        'x-sunset': '2099-06-01T00:00:00Z',
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'integer' } }],
        responses: ok200,
      },
    },
    '/old': { get: { operationId: 'oldThing', 'x-sunset': '2020-01-01T00:00:00Z', responses: ok200 } },
    ...extraPaths,
  },
  components: { securitySchemes: { thingKey: { type: 'apiKey', in: 'header', name: 'X-Thing-Key' } } },
});

const configOf = (upstreamUrl: string, stability: Record<string, string[]> = { experimental: ['pro'] }) => ({
  server: { port: 0 },
  log: { level: 'info' },
  plans: { free: { perMinute: 1000, perDay: 10000 }, pro: { perMinute: 1000, perDay: 10000 } },
  keys: [
    { id: 'kfree', plan: 'free', sha256: hashKey(FREE) },
    { id: 'kpro', plan: 'pro', sha256: hashKey(PRO) },
  ],
  upstream: { url: upstreamUrl, openapi: { file: 'things.json', validate: 'enforce', stability } },
  routes: [{ operationId: 'listThings', cost: 2 }],
});

let real: TestUpstream;
let decoy: TestUpstream;
let dir: ReturnType<typeof tempDir>;
let configFile: string;
let docFile: string;
let proc: CliProcess;
let url: string;

const call = (path: string, key: string | undefined, init: { method?: string; body?: unknown } = {}): Promise<Response> =>
  fetch(`${url}${path}`, {
    method: init.method ?? 'GET',
    headers: { ...(key ? { 'X-Thing-Key': key } : {}), ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
    signal: AbortSignal.timeout(5000),
  });

beforeAll(async () => {
  assertBuilt();
  [real, decoy] = await Promise.all([TestUpstream.start(), TestUpstream.start()]);
  dir = tempDir();
  docFile = dir.write('things.json', JSON.stringify(things()));
  // The file names the decoy; the environment, as `docker run -e UPSTREAM_URL=...` does, the real upstream.
  configFile = dir.write('gateway.yaml', configOf(decoy.url));
  proc = CliProcess.start(['serve', '--config', configFile, '--watch-config'], { UPSTREAM_URL: real.url });
  url = String((await proc.waitForLog('tollgate gateway listening', { timeoutMs: 60_000 })).url);
}, 90_000);

afterAll(async () => {
  await proc?.stop();
  await Promise.all([real?.close(), decoy?.close()]);
  dir?.remove();
});

describe('upstream.openapi: the document routes to the upstream service', () => {
  it("loads as routes without a service whose operations are the upstream's", async () => {
    const r = await loadConfigFile(configFile, {});
    if (!r.ok) throw new Error(r.errors.join('\n'));
    expect(r.config.routes.map((x) => `${x.method} ${x.path} ${x.service ?? '-'}`)).toEqual([
      'GET /v1/things -',
      'POST /v1/things -',
      'GET /v1/old -',
      'GET /v1/things/:id -',
    ]);
    expect(r.config.openapi!.routes.map((d) => d?.operation.service)).toEqual(['upstream', 'upstream', 'upstream', 'upstream']);
    expect(r.config.routes[0]!.cost).toBe(2);
  });

  it('every document route follows UPSTREAM_URL; the upstream.url of the file is never contacted', async () => {
    real.seen.length = 0;
    const list = await call('/v1/things', FREE);
    expect(list.status).toBe(200);
    const one = await call('/v1/things/7', FREE);
    expect(one.status).toBe(200);
    expect(one.headers.get('deprecation')).toBe('@1768435200');
    expect(one.headers.get('sunset')).toBe('Mon, 01 Jun 2099 00:00:00 GMT');
    const created = await call('/v1/things', PRO, { method: 'POST', body: { name: 'a' } });
    expect(created.status).toBe(200);
    // A /v1 path the document does not describe reaches the upstream too (keys from auth.sources there: bearer).
    const other = await fetch(`${url}/v1/elsewhere`, { headers: { authorization: `Bearer ${FREE}` } });
    expect(other.status).toBe(200);
    expect(real.seen.map((s) => `${s.method} ${s.url}`)).toEqual(['GET /v1/things', 'GET /v1/things/7', 'POST /v1/things', 'GET /v1/elsewhere']);
    // The key came in the document's apiKey header, and was taken off before forwarding.
    for (const s of real.seen) expect(s.headers['x-thing-key']).toBeUndefined();
    expect(decoy.seen).toEqual([]);
  });

  it('the key source comes from the document: a bearer key on a document route is no key', async () => {
    const r = await fetch(`${url}/v1/things`, { headers: { authorization: `Bearer ${FREE}` } });
    expect(r.status).toBe(401);
  });

  it('after its sunset an operation answers 410 without calling the upstream', async () => {
    const before = real.seen.length;
    expect((await call('/v1/old', FREE)).status).toBe(410);
    expect(real.seen.length).toBe(before);
  });

  it('upstream.openapi.stability gates the experimental operation: free refused (403), pro passes; validate enforce answers 400', async () => {
    const before = real.seen.length;
    const refused = await call('/v1/things', FREE, { method: 'POST', body: { name: 'a' } });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { code: string }).code).toBe('plan_not_allowed');
    expect(refused.headers.get('x-api-stability')).toBe('experimental');
    const invalid = await call('/v1/things', PRO, { method: 'POST', body: { nom: 'a' } });
    expect(invalid.status).toBe(400);
    expect(((await invalid.json()) as { code: string }).code).toBe('invalid_request');
    expect(real.seen.length).toBe(before);
    expect((await call('/v1/things', PRO, { method: 'POST', body: { name: 'a' } })).status).toBe(200);
    expect(decoy.seen).toEqual([]);
  });

  it('--watch-config: a changed document and a new stability map both apply, with UPSTREAM_URL still in force', async () => {
    const mark = proc.logs.length;
    writeFileSync(docFile, JSON.stringify(things({ '/added': { get: { operationId: 'added', responses: ok200 } } })));
    await proc.waitForLog('config reloaded', { after: mark });
    expect((await call('/v1/added', FREE)).status).toBe(200);
    expect((await call('/v1/added', undefined)).status).toBe(401);

    const mark2 = proc.logs.length;
    writeFileSync(configFile, stringify(configOf(decoy.url, { experimental: ['free', 'pro'] })));
    const reloaded = await proc.waitForLog('config reloaded', { after: mark2 });
    // The openapi block reloads like a service's: it is no restart-only change of the upstream section.
    expect(reloaded.needsRestart).toBeUndefined();
    expect((await call('/v1/things', FREE, { method: 'POST', body: { name: 'b' } })).status).toBe(200);
    expect(real.seen.at(-1)!.url).toBe('/v1/things');
    expect(decoy.seen).toEqual([]);
  });
});

describe('upstream.openapi in the config', () => {
  it('a document whose operations are not under /v1 is refused, naming each file#pointer', async () => {
    const d = tempDir();
    try {
      d.write('api.json', JSON.stringify(things({}, [{ url: '/api' }])));
      d.write('bare.json', JSON.stringify(things({}, [])));
      const atApi = await runCli(['config', 'check', '--config', d.write('a.yaml', { upstream: { openapi: { file: 'api.json' } } })]);
      expect(atApi.code).toBe(1);
      expect(atApi.stderr).toContain(
        "api.json#/paths/~1things/get: GET /api/things is not under /v1/, and the upstream section's routes are (set upstream.openapi.basePath, or give the document to a service of services)",
      );
      expect(atApi.stderr).toContain('api.json#/paths/~1things~1{id}/get: GET /api/things/{id} is not under /v1/');
      expect(atApi.stderr).toContain('api.json#/paths/~1old/get: GET /api/old is not under /v1/');
      // No servers: the paths as written, at the root.
      const bare = await runCli(['config', 'check', '--config', d.write('b.yaml', { upstream: { openapi: { file: 'bare.json' } } })]);
      expect(bare.code).toBe(1);
      expect(bare.stderr).toContain('bare.json#/paths/~1things/post: POST /things is not under /v1/');
      // basePath puts it right.
      const fixed = await runCli(['config', 'check', '--config', d.write('c.yaml', { upstream: { openapi: { file: 'bare.json', basePath: '/v1' } } })]);
      expect(fixed.code, fixed.stderr).toBe(0);
      expect(fixed.stdout).toContain('4 routes');
      // A basePath that only looks like /v1.
      const v10 = await runCli(['config', 'check', '--config', d.write('e.yaml', { upstream: { openapi: { file: 'bare.json', basePath: '/v10' } } })]);
      expect(v10.stderr).toContain('bare.json#/paths/~1things/get: GET /v10/things is not under /v1/');
    } finally {
      d.remove();
    }
  });

  it('a document that cannot be read is named under upstream.openapi; unknown plans in its stability map are refused', async () => {
    const d = tempDir();
    try {
      const missing = await runCli(['config', 'check', '--config', d.write('a.yaml', { upstream: { openapi: { file: 'nope.json' } } })]);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toMatch(/upstream\.openapi: nope\.json/);
      const plans = await runCli([
        'config',
        'check',
        '--config',
        d.write('b.yaml', { plans: { free: { perMinute: 1, perDay: 1 } }, upstream: { openapi: { stability: { beta: ['gold'] } } } }),
      ]);
      expect(plans.code).toBe(1);
      expect(plans.stderr).toContain('upstream.openapi.stability.beta[0]: unknown plan; expected one of free, got "gold"');
    } finally {
      d.remove();
    }
  });

  it('config check warns about a stability of the map no upstream route carries; a stability map alone gates hand-written upstream routes', async () => {
    const d = tempDir();
    try {
      d.write('things.json', JSON.stringify(things()));
      const r = await runCli([
        'config',
        'check',
        '--config',
        d.write('gateway.yaml', { upstream: { openapi: { file: 'things.json', stability: { experimental: ['pro'], Beta: ['pro'] } } } }),
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain(
        'warning: upstream.openapi.stability.Beta: no route of the upstream (upstream) has stability Beta, so these plans limit nothing (its routes carry experimental)\n',
      );
      expect(r.stderr).not.toContain('stability.experimental:');
      const loaded = await loadConfigFile(
        d.write('hand.yaml', { upstream: { openapi: { stability: { beta: ['pro'] } } }, routes: [{ path: '/v1/b', stability: 'beta' }] }),
        {},
      );
      if (!loaded.ok) throw new Error(loaded.errors.join('\n'));
      const { Runtime } = await import('../src/routing/runtime.js');
      const route = new Runtime(loaded.config).current.routes[0]!;
      expect([...(route.stabilityPlans ?? [])]).toEqual(['pro']);
    } finally {
      d.remove();
    }
  });
});

describe('tollgate openapi diff --service upstream', () => {
  it("compares a new version of the upstream's document, with or without --service", async () => {
    const d = tempDir();
    try {
      d.write('things.json', JSON.stringify(things()));
      const next = things({ '/added': { get: { operationId: 'added', responses: ok200 } } });
      (next.paths['/things/{id}'].get as Record<string, unknown>)['x-sunset'] = '2098-01-01T00:00:00Z';
      const newFile = d.write('things-v2.json', JSON.stringify(next));
      const config = d.write('gateway.yaml', {
        upstream: { url: 'http://127.0.0.1:9', openapi: { file: 'things.json' } },
        services: { other: { targets: ['http://127.0.0.1:9'] } },
        routes: [{ path: '/other', service: 'other' }],
      });
      const named = await runCli(['openapi', 'diff', '--config', config, '--service', 'upstream', newFile], { env: { UPSTREAM_URL: 'http://127.0.0.1:10' } });
      expect(named.stderr).toBe('');
      expect(named.code).toBe(3);
      expect(named.stdout.split('\n')).toEqual([
        `service upstream: things.json -> ${newFile}`,
        '+ GET /v1/added (added)',
        '~ GET /v1/things/{id} (getThing): sunset 2099-06-01T00:00:00Z -> 2098-01-01T00:00:00Z (earlier)',
        '2 changes',
        '',
      ]);
      const alone = await runCli(['openapi', 'diff', '--config', config, '--json', newFile]);
      expect(alone.code).toBe(3);
      expect((JSON.parse(alone.stdout) as { service: string }).service).toBe('upstream');
      const other = await runCli(['openapi', 'diff', '--config', config, '--service', 'other', newFile]);
      expect([other.code, other.stderr.trim()]).toEqual([2, 'error: service "other" has no OpenAPI document (services with one: upstream)']);
    } finally {
      d.remove();
    }
  });
});

describe('tollgate dev', () => {
  it("serves the pet store document's routes as the upstream's, with getPet's sunset ahead", async () => {
    const port = await freePort();
    const dev = CliProcess.start(['dev', '--port', String(port)]);
    try {
      await dev.waitForStdout(/Press Ctrl-C to stop/);
      const key = /^ {4}free\s+(tg_[0-9A-Za-z]+)$/m.exec(dev.stdout)![1]!;
      const get = (path: string) =>
        fetch(`http://127.0.0.1:${port}${path}`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(5000) });
      expect((await get('/v1/categories')).status).toBe(200);
      // A document route: experimental, sent as such.
      const created = await fetch(`http://127.0.0.1:${port}/v1/categories`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Dog' }),
        signal: AbortSignal.timeout(5000),
      });
      expect([created.status, created.headers.get('x-api-stability')]).toEqual([201, 'experimental']);
      const pet = await get('/v1/pets/1');
      expect(pet.status).toBe(200);
      expect(pet.headers.get('deprecation')).toBe('@1780272000');
      const sunset = Date.parse(pet.headers.get('sunset') ?? '');
      expect(sunset).toBeGreaterThanOrEqual(Math.max(Date.parse('2027-06-01T00:00:00Z'), Date.now() + 179 * 86_400_000));
    } finally {
      expect(await dev.stop()).toEqual({ code: 0, signal: null });
    }
  });
});
