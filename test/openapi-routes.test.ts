// A service's OpenAPI document as its routes (services.<name>.openapi, src/openapi/), end to end with the built CLI:
// a real gateway process (`tollgate serve`, static keys, in-memory store) in front of a real upstream on loopback.
// A 3.0 JSON document and a 3.1 YAML one whose request body is a $ref to a file beside it; routes[].operationId
// adding a cost; hand-written routes first; a public operation; keys read from an apiKey header and an apiKey query
// parameter, never forwarded; deprecation from the document; every config error at once with its file and pointer;
// a $ref loop; a 10,000-operation document; reload (SIGHUP with a broken document, --watch-config on a document
// change); and real third-party documents from @readme/oas-examples.
import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { loadConfigFile } from '../src/config/load.js';
import { generateKey, hashKey } from '../src/keys/format.js';
import { CliProcess, assertBuilt, runCli, startServe, tempDir } from './helpers/cli.js';
import { startTestGateway } from './helpers/gateway.js';
import { TestUpstream } from './helpers/upstream.js';
import { waitFor } from './helpers/wait.js';

const KEY = generateKey();
const examples = (file: string): string => createRequire(import.meta.url).resolve(`@readme/oas-examples/${file}`);

const ok200 = { '200': { description: 'ok' } };
const idParam = (name: string) => ({ name, in: 'path', required: true, schema: { type: 'string' } });

/** OpenAPI 3.0, JSON: its base path from servers[0].url; keyed by an apiKey header, one operation by a query key. */
const catalog = {
  openapi: '3.0.3',
  info: { title: 'catalog', version: '1' },
  servers: [{ url: 'https://api.example.com/cat' }],
  security: [{ catKey: [] }],
  paths: {
    '/items': { get: { operationId: 'listItems', security: [], responses: ok200 } },
    '/items/{itemId}': {
      parameters: [idParam('itemId')],
      get: { operationId: 'getItem', responses: ok200 },
      delete: { operationId: 'deleteItem', responses: ok200 },
    },
    '/search': { get: { operationId: 'search', security: [{ queryKey: [] }], responses: ok200 } },
    '/legacy': { get: { operationId: 'legacy', security: [{ oauth: ['read'] }], responses: ok200 } },
  },
  components: {
    securitySchemes: {
      catKey: { type: 'apiKey', in: 'header', name: 'X-Cat-Key' },
      queryKey: { type: 'apiKey', in: 'query', name: 'api_key' },
      oauth: { type: 'oauth2', flows: { clientCredentials: { tokenUrl: 'https://auth.example.com/token', scopes: { read: 'read' } } } },
    },
  },
};

/** OpenAPI 3.1, YAML: bearer keys, a request body in a file beside it, a deprecated operation with its dates. */
const pets = `openapi: 3.1.0
info: { title: pets, version: '1' }
servers: [{ url: /ignored }]
security: [{ bearer: [] }]
paths:
  /pets:
    post:
      operationId: createPet
      requestBody:
        content:
          application/json:
            schema: { $ref: 'schemas.yaml#/Pet' }
      responses: { '200': { description: ok } }
  /pets/{petId}:
    get:
      operationId: getPet
      deprecated: true
      x-deprecated-at: 2026-01-15
      x-sunset: '2099-06-01T00:00:00Z'
      x-successor: listPets
      externalDocs: { url: 'https://docs.example.com/pets' }
      parameters: [{ name: petId, in: path, required: true, schema: { type: integer } }]
      responses: { '200': { description: ok } }
  /pets/all:
    get:
      operationId: listPets
      x-stability: beta
      responses: { '200': { description: ok } }
components:
  securitySchemes:
    bearer: { type: http, scheme: bearer }
`;
const schemas = `Pet:
  type: object
  properties:
    name: { type: string }
    children: { type: array, items: { $ref: '#/Pet' } }
`;

let up: TestUpstream;
let dir: ReturnType<typeof tempDir>;
let config: Record<string, unknown>;
let gw: { proc: CliProcess; url: string };

const get = (path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Response> =>
  fetch(`${gw.url}${path}`, { method, headers, signal: AbortSignal.timeout(5000) });

beforeAll(async () => {
  assertBuilt();
  up = await TestUpstream.start();
  dir = tempDir();
  dir.write('catalog.json', JSON.stringify(catalog));
  dir.write('pets.yaml', pets);
  dir.write('schemas.yaml', schemas);
  config = {
    server: { port: 0 },
    log: { level: 'info' },
    keys: [{ id: 'k1', plan: 'free', sha256: hashKey(KEY) }],
    services: {
      catalog: { targets: [up.url], openapi: { file: 'catalog.json' } },
      pets: { targets: [up.url], openapi: { file: 'pets.yaml', basePath: '/pets-api' } },
    },
    routes: [
      // Hand-written: keeps precedence over the document's keyed deleteItem.
      { method: 'DELETE', path: '/cat/items/:itemId', service: 'catalog', auth: 'none' },
      // Names an operation: adds its cost to that operation's route.
      { operationId: 'createPet', cost: 5 },
    ],
  };
  gw = await startServe(dir.write('gateway.yaml', config), 60_000);
}, 90_000);

afterAll(async () => {
  await gw?.proc.stop();
  await up?.close();
  dir?.remove();
});

describe('routes from OpenAPI documents', () => {
  it('config check accepts the documents, counting their routes, and warns about the unsupported scheme', async () => {
    const r = await runCli(['config', 'check', '--config', join(dir.dir, 'gateway.yaml')]);
    expect(r.stderr).toContain(
      'warning: catalog.json#/components/securitySchemes/oauth: oauth (oauth2) is no key the gateway reads, in 1 operation (GET /cat/legacy)',
    );
    expect(r.code).toBe(0);
    // 1 hand-written route + 5 catalog operations + 3 pets operations (createPet merged with its routes[] entry).
    expect(r.stdout).toMatch(/OK \(4 plans, 9 routes/);
  });

  it('a 3.0 JSON document: an apiKey header reads the key, which the upstream never sees', async () => {
    const before = up.seen.length;
    const res = await get('/cat/items/42', { 'x-cat-key': KEY });
    expect(res.status).toBe(200);
    const seen = up.seen.slice(before);
    expect(seen.map((s) => s.url)).toEqual(['/cat/items/42']);
    expect(seen[0]!.headers['x-cat-key']).toBeUndefined();
    expect(seen[0]!.headers['x-consumer-id']).toBe('k1');
    // The backend's own credential, beside the key: no key source of this operation reads Authorization, so it is
    // the backend's, and passes.
    const withUserToken = await get('/cat/items/42', { 'x-cat-key': KEY, authorization: 'Bearer user-token.of.a-backend-user' });
    expect(withUserToken.status).toBe(200);
    const passed = up.seen.at(-1)!;
    expect(passed.headers.authorization).toBe('Bearer user-token.of.a-backend-user');
    expect(passed.headers['x-cat-key']).toBeUndefined();
    // The key in the bearer header is not where this operation reads it.
    const wrongPlace = await get('/cat/items/42', { authorization: `Bearer ${KEY}` });
    expect(wrongPlace.status).toBe(401);
    expect(((await wrongPlace.json()) as { message: string }).message).toContain('"X-Cat-Key: <key>"');
  });

  it('an apiKey query parameter reads the key and is removed before forwarding', async () => {
    const before = up.seen.length;
    const res = await get(`/cat/search?q=cats&api_key=${KEY}`);
    expect(res.status).toBe(200);
    expect(up.seen.slice(before).map((s) => s.url)).toEqual(['/cat/search?q=cats']);
    // And the access log carries the parameter redacted, never the key.
    await waitFor(() => gw.proc.logs.some((l) => String(l.req && (l.req as { url?: string }).url).startsWith('/cat/search')), 'the access log line');
    expect(gw.proc.stdout).not.toContain(KEY);
  });

  it('security: [] makes a public operation; an oauth2-only one stays keyed with auth.sources', async () => {
    expect((await get('/cat/items')).status).toBe(200);
    expect((await get('/cat/legacy')).status).toBe(401);
    expect((await get('/cat/legacy', { authorization: `Bearer ${KEY}` })).status).toBe(200);
  });

  it('hand-written routes come first: the public DELETE route wins over the keyed operation', async () => {
    expect((await get('/cat/items/7', {}, 'DELETE')).status).toBe(200);
    expect((await get('/cat/items/7')).status).toBe(401);
  });

  it('a 3.1 YAML document with an external $ref: routes under basePath; operationId override counts cost 5', async () => {
    const auth = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
    const res = await fetch(`${gw.url}/pets-api/pets`, { method: 'POST', headers: auth, body: '{"name":"Rex"}', signal: AbortSignal.timeout(5000) });
    expect(res.status).toBe(200);
    const first = Number(res.headers.get('x-ratelimit-remaining'));
    const again = await fetch(`${gw.url}/pets-api/pets`, { method: 'POST', headers: auth, body: '{}', signal: AbortSignal.timeout(5000) });
    expect(first - Number(again.headers.get('x-ratelimit-remaining'))).toBe(5);
    // Not under servers[0].url's /ignored: basePath wins.
    expect((await get('/ignored/pets/all', { authorization: `Bearer ${KEY}` })).status).toBe(404);
  });

  it('concrete paths before templated ones, and deprecation, sunset and link from the document', async () => {
    const all = await get('/pets-api/pets/all', { authorization: `Bearer ${KEY}` });
    expect(all.status).toBe(200);
    expect(all.headers.get('deprecation')).toBeNull();
    const pet = await get('/pets-api/pets/1', { authorization: `Bearer ${KEY}` });
    expect(pet.status).toBe(200);
    expect(pet.headers.get('deprecation')).toBe(`@${Date.parse('2026-01-15T00:00:00Z') / 1000}`);
    expect(pet.headers.get('sunset')).toBe(new Date('2099-06-01T00:00:00Z').toUTCString());
    expect(pet.headers.get('link')).toContain('<https://docs.example.com/pets>; rel="deprecation"');
  });

  it('the loaded config carries each operation, and x-successor by operationId resolves to its path under basePath', async () => {
    const r = await loadConfigFile(join(dir.dir, 'gateway.yaml'), {});
    if (!r.ok) throw new Error(r.errors.join('\n'));
    const i = r.config.routes.findIndex((x) => x.operationId === 'getPet');
    expect(r.config.routes[i]).toMatchObject({ successor: '/pets-api/pets/all', afterSunset: 'gone', deprecated: true });
    expect(r.config.routes.find((x) => x.operationId === 'listPets')?.stability).toBe('beta');
    const op = r.config.openapi!.routes[i]!.operation;
    expect(op).toMatchObject({
      service: 'pets',
      file: 'pets.yaml',
      pointer: '/paths/~1pets~1{petId}/get',
      method: 'GET',
      pathTemplate: '/pets-api/pets/{petId}',
      openapiVersion: '3.1',
      validate: 'off',
    });
    const create = r.config.openapi!.routes[r.config.routes.findIndex((x) => x.operationId === 'createPet')]!.operation;
    // The external file is bundled in; the recursive schema keeps its internal $ref.
    expect(JSON.stringify(create.document)).not.toContain('schemas.yaml');
    expect(JSON.stringify(create.document)).toMatch(/"\$ref":"#\/[^"]*"/);
    expect(r.config.openapi!.files.map((f) => f.slice(dir.dir.length + 1))).toEqual(['catalog.json', 'pets.yaml', 'schemas.yaml']);
  });
});

describe('config errors, all at once, each naming file and JSON pointer', () => {
  it('config check exits 1 listing every problem', async () => {
    const d = tempDir();
    try {
      d.write('notopenapi.yaml', 'openapi: 3.0.3\ninfo: { title: x }\npaths: { /a: { get: { responses: {} } } }\n');
      d.write('swagger.yaml', 'swagger: "2.0"\ninfo: { title: x, version: "1" }\npaths: {}\n');
      for (const v of ['a', 'b'])
        d.write(
          `dup${v.toUpperCase()}.yaml`,
          stringify({
            openapi: '3.1.0',
            info: { title: v, version: '1' },
            paths: { [`/same/{${v}}`]: { get: { parameters: [idParam(v)], responses: ok200 } } },
          }),
        );
      d.write(
        'dates.yaml',
        'openapi: 3.1.0\ninfo: { title: d, version: "1" }\npaths: { /d: { get: { x-deprecated-at: "2026-02-30", x-sunset: "soon", responses: { "200": { description: ok } } } } }\n',
      );
      d.write(
        'refs.yaml',
        "openapi: 3.1.0\ninfo: { title: r, version: '1' }\npaths:\n  /r:\n    get:\n      responses:\n        '200': { $ref: 'gone.yaml#/x' }\n        '201': { $ref: '#/components/responses/Nope' }\n",
      );
      d.write(
        'loop.yaml',
        "openapi: 3.1.0\ninfo: { title: l, version: '1' }\npaths: {}\ncomponents:\n  schemas:\n    A: { $ref: '#/components/schemas/B' }\n    B: { $ref: '#/components/schemas/A' }\n",
      );
      const svc = (file: string) => ({ targets: ['http://127.0.0.1:9'], openapi: { file } });
      const file = d.write('gateway.yaml', {
        services: {
          a: svc('notopenapi.yaml'),
          b: svc('swagger.yaml'),
          c: svc('dupA.yaml'),
          e: svc('dupB.yaml'),
          f: svc('dates.yaml'),
          g: svc('refs.yaml'),
          h: svc('loop.yaml'),
          i: svc('missing.yaml'),
        },
        routes: [{ operationId: 'noSuchOperation', cost: 2 }],
      });
      const r = await runCli(['config', 'check', '--config', file]);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      const lines = r.stderr.split('\n').filter((l) => l.startsWith('  '));
      const has = (re: RegExp): void =>
        expect(
          lines.some((l) => re.test(l)),
          `${re} in\n${r.stderr}`,
        ).toBe(true);
      has(/services\.a\.openapi: notopenapi\.yaml#\/info: not a valid OpenAPI 3\.0 document: must have required property 'version'/);
      has(/services\.a\.openapi: notopenapi\.yaml#\/paths\/~1a\/get\/responses: not a valid OpenAPI 3\.0 document/);
      has(/services\.b\.openapi: swagger\.yaml#\/openapi: expected an OpenAPI 3\.0 or 3\.1 document .*found swagger 2\.0/);
      has(/dupB\.yaml#\/paths\/~1same~1\{b\}\/get: GET \/same\/\{b\} is already the route of dupA\.yaml#\/paths\/~1same~1\{a\}\/get/);
      has(/dates\.yaml#\/paths\/~1d\/get\/x-deprecated-at: expected a date/);
      has(/dates\.yaml#\/paths\/~1d\/get\/x-sunset: expected a date .*got "soon"/);
      has(/services\.g\.openapi: refs\.yaml#\/paths\/~1r\/get\/responses\/200: \$ref names a file that cannot be read/);
      has(/services\.g\.openapi: refs\.yaml#\/paths\/~1r\/get\/responses\/201: \$ref points at nothing/);
      has(/services\.h\.openapi: loop\.yaml#\/components\/schemas\/[AB]: \$ref loop: /);
      has(/services\.i\.openapi: missing\.yaml: file not found/);
      has(/routes\[0\]\.operationId: unknown operationId "noSuchOperation"/);
      expect(r.stderr).toMatch(/invalid configuration \(1[0-9] problems\)/);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    } finally {
      d.remove();
    }
  });

  it('a route naming an operationId takes no path of its own; a document route breaking a route rule is named by its pointer', async () => {
    const d = tempDir();
    try {
      d.write(
        'doc.yaml',
        stringify({ openapi: '3.1.0', info: { title: 'x', version: '1' }, paths: { '/healthz': { get: { operationId: 'h', responses: ok200 } } } }),
      );
      const file = d.write('gateway.yaml', {
        services: { s: { targets: ['http://127.0.0.1:9'], openapi: { file: 'doc.yaml' } } },
        routes: [{ operationId: 'h', path: '/x' }],
      });
      const r = await runCli(['config', 'check', '--config', file]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('routes[0].path: a route naming operationId takes its method and path from the document; leave path out');
      const file2 = d.write('gateway2.yaml', { services: { s: { targets: ['http://127.0.0.1:9'], openapi: { file: 'doc.yaml' } } } });
      const r2 = await runCli(['config', 'check', '--config', file2]);
      expect(r2.code).toBe(1);
      expect(r2.stderr).toContain("doc.yaml#/paths/~1healthz/get.path: route GET /healthz would take the gateway's own /healthz");
    } finally {
      d.remove();
    }
  });
});

describe('a large document', () => {
  it('10,000 operations load in bounded time and route correctly', async () => {
    const d = tempDir();
    try {
      const paths: Record<string, unknown> = {};
      for (let i = 0; i < 10_000; i++) paths[`/r${i}/{id}`] = { get: { operationId: `op${i}`, parameters: [idParam('id')], responses: ok200 } };
      d.write('big.json', JSON.stringify({ openapi: '3.1.0', info: { title: 'big', version: '1' }, security: [], paths }));
      const file = d.write('gateway.yaml', { services: { big: { targets: [up.url], openapi: { file: 'big.json' } } } });
      // Bounded: judged against a tenth of the document loaded in the same run (a loaded machine slows both alike),
      // so a load that grows faster than the operations (quadratic in them) fails, however fast the machine.
      const tenthPaths = Object.fromEntries(Object.entries(paths).slice(0, 1_000));
      d.write('tenth.json', JSON.stringify({ openapi: '3.1.0', info: { title: 'tenth', version: '1' }, security: [], paths: tenthPaths }));
      const tenthFile = d.write('tenth.yaml', { services: { big: { targets: [up.url], openapi: { file: 'tenth.json' } } } });
      let started = performance.now();
      const tenth = await loadConfigFile(tenthFile, {});
      const tenthMs = performance.now() - started;
      if (!tenth.ok) throw new Error(tenth.errors.slice(0, 3).join('\n'));
      started = performance.now();
      const r = await loadConfigFile(file, {});
      const ms = performance.now() - started;
      if (!r.ok) throw new Error(r.errors.slice(0, 3).join('\n'));
      expect(r.config.routes).toHaveLength(10_000);
      expect(ms).toBeLessThan(Math.max(5000, 30 * tenthMs));
      const small = await startTestGateway(r.config);
      try {
        const before = up.seen.length;
        for (const i of [0, 5000, 9999]) expect((await fetch(`${small.url}/r${i}/x`)).status).toBe(200);
        expect((await fetch(`${small.url}/r10000/x`)).status).toBe(404);
        expect(up.seen.slice(before).map((s) => s.url)).toEqual(['/r0/x', '/r5000/x', '/r9999/x']);
      } finally {
        await small.close();
      }
    } finally {
      d.remove();
    }
  });
});

describe('third-party documents (@readme/oas-examples)', () => {
  it.each([
    ['3.0/json/petstore.json', 20, '/v2/pet/{petId}'],
    ['3.1/yaml/petstore.yaml', 20, '/v2/pet/{petId}'],
    ['3.1/json/train-travel.json', 7, '/bookings/{bookingId}'],
  ])('%s loads with its %i operations', async (name, count, template) => {
    const d = tempDir();
    try {
      const file = d.write('gateway.yaml', { services: { ext: { targets: [up.url], openapi: { file: examples(name) } } } });
      const r = await loadConfigFile(file, {});
      if (!r.ok) throw new Error(r.errors.join('\n'));
      expect(r.config.routes).toHaveLength(count);
      expect(r.config.openapi!.routes.map((x) => x!.operation.pathTemplate)).toContain(template);
    } finally {
      d.remove();
    }
  });
});

describe('security schemes the gateway reads no key from', () => {
  it('one warning per scheme, naming its operations, not one per operation (the petstore: oauth2 on 7 operations)', async () => {
    const d = tempDir();
    try {
      const file = d.write('gateway.yaml', { services: { ext: { targets: [up.url], openapi: { file: examples('3.0/json/petstore.json') } } } });
      const r = await loadConfigFile(file, {});
      if (!r.ok) throw new Error(r.errors.join('\n'));
      const about = r.warnings.filter((w) => w.includes('petstore_auth'));
      expect(about).toHaveLength(1);
      expect(about[0]).toMatch(/#\/components\/securitySchemes\/petstore_auth: petstore_auth \(oauth2\) is no key the gateway reads, in \d+ operations \(/);
      expect(about[0]).toContain('POST /v2/pet');
      expect(about[0]).toMatch(/and \d+ more\)/);
      expect(r.warnings.filter((w) => w.includes('oauth2'))).toHaveLength(1);
    } finally {
      d.remove();
    }
  });
});

describe('reload', () => {
  const doc = (extra: Record<string, unknown> = {}) =>
    JSON.stringify({ openapi: '3.1.0', info: { title: 'r', version: '1' }, security: [], paths: { '/first': { get: { responses: ok200 } }, ...extra } });

  it('SIGHUP with a broken document keeps the old routes; a good one applies', async () => {
    const d = tempDir();
    const docFile = d.write('doc.json', doc());
    const s = await startServe(d.write('gateway.yaml', { server: { port: 0 }, services: { r: { targets: [up.url], openapi: { file: 'doc.json' } } } }), 60_000);
    try {
      expect((await fetch(`${s.url}/first`)).status).toBe(200);
      writeFileSync(docFile, '{"openapi": "3.1.0", "paths": {"/first": 5}}');
      const mark = s.proc.logs.length;
      s.proc.signal('SIGHUP');
      const rejected = await s.proc.waitForLog('config reload rejected; the old config stays in force', { after: mark });
      expect(JSON.stringify(rejected.errors)).toContain('doc.json#');
      expect((await fetch(`${s.url}/first`)).status).toBe(200);
      writeFileSync(docFile, doc({ '/second': { get: { responses: ok200 } } }));
      const mark2 = s.proc.logs.length;
      s.proc.signal('SIGHUP');
      await s.proc.waitForLog('config reloaded', { after: mark2 });
      expect((await fetch(`${s.url}/second`)).status).toBe(200);
    } finally {
      await s.proc.stop();
      d.remove();
    }
  });

  it('--watch-config reloads when the document itself changes', async () => {
    const d = tempDir();
    const docFile = d.write('doc.json', doc());
    const configFile = d.write('gateway.yaml', { server: { port: 0 }, services: { r: { targets: [up.url], openapi: { file: 'doc.json' } } } });
    const proc = CliProcess.start(['serve', '--config', configFile, '--watch-config']);
    try {
      const line = await proc.waitForLog('tollgate gateway listening', { timeoutMs: 60_000 });
      const url = String(line.url);
      expect((await fetch(`${url}/added`)).status).toBe(404);
      const mark = proc.logs.length;
      writeFileSync(docFile, doc({ '/added': { get: { responses: ok200 } } }));
      await proc.waitForLog('config reloaded', { after: mark });
      expect((await fetch(`${url}/added`)).status).toBe(200);
    } finally {
      await proc.stop();
      d.remove();
    }
  });
});
