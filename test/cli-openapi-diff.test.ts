// `tollgate openapi diff` on the built CLI: what a new version of a service's document would change (added, removed,
// newly deprecated, sunset moved, brownouts added, moved or dropped, stability, access), as text and --json, exit 0 for no change and 3 for changes; a
// new document that cannot load is one error line (exit 1) and nothing is compared; a config with several documents
// needs --service (exit 2). Hostile operationIds are printed escaped, on one line.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, runCli, tempDir } from './helpers/cli.js';

const V1 = `openapi: 3.1.0
info: { title: catalog, version: "1" }
servers: [{ url: /v1 }]
security: [{ bearer: [] }]
components:
  securitySchemes:
    bearer: { type: http, scheme: bearer }
paths:
  /items:
    get: { operationId: listItems, responses: { "200": { description: ok } } }
    post: { operationId: createItem, x-stability: beta, responses: { "201": { description: ok } } }
  /items/{id}:
    parameters: [{ name: id, in: path, required: true, schema: { type: string } }]
    get:
      operationId: getItem
      deprecated: true
      x-deprecated-at: "2026-06-01T00:00:00Z"
      x-sunset: "2027-06-01T00:00:00Z"
      responses: { "200": { description: ok } }
    delete: { operationId: deleteItem, responses: { "204": { description: ok } } }
  /status:
    get: { operationId: status, responses: { "200": { description: ok } } }
`;

// listItems: newly deprecated; createItem: beta -> stable; getItem: sunset moved earlier; deleteItem: removed;
// status: now public; exportItems: added. Lines follow the new document's routes in the order the gateway tries
// them (concrete paths before templated ones), removed operations last.
const V2 = `openapi: 3.1.0
info: { title: catalog, version: "2" }
servers: [{ url: /v1 }]
security: [{ bearer: [] }]
components:
  securitySchemes:
    bearer: { type: http, scheme: bearer }
paths:
  /items:
    get:
      operationId: listItems
      deprecated: true
      x-deprecated-at: "2026-12-01T00:00:00Z"
      x-sunset: "2027-12-01"
      responses: { "200": { description: ok } }
    post: { operationId: createItem, x-stability: stable, responses: { "201": { description: ok } } }
  /items/{id}:
    parameters: [{ name: id, in: path, required: true, schema: { type: string } }]
    get:
      operationId: getItem
      deprecated: true
      x-deprecated-at: "2026-06-01T00:00:00Z"
      x-sunset: "2027-03-01T00:00:00Z"
      responses: { "200": { description: ok } }
  /items/export:
    get: { operationId: exportItems, responses: { "200": { description: ok } } }
  /status:
    get: { operationId: status, security: [], responses: { "200": { description: ok } } }
`;

const tmp = tempDir();
let config: string;

beforeAll(() => {
  assertBuilt();
  tmp.write('catalog.yaml', V1);
  tmp.write('catalog-v2.yaml', V2);
  tmp.write('catalog-same.yaml', V1.replace('version: "1"', 'version: "1.0.1"').replace('"2027-06-01T00:00:00Z"', '"2027-06-01"'));
  tmp.write('broken.yaml', V2.replace('openapi: 3.1.0', 'openapi: 9.9.9'));
  // getItem's brownouts: V1 with one (an hour in February), V1 with it spelled otherwise (an end instead of a
  // duration, another offset), and V1 with it moved and a second added.
  const withBrownouts = (list: string) => V1.replace('x-sunset: "2027-06-01T00:00:00Z"', `x-sunset: "2027-06-01T00:00:00Z"\n      x-brownouts: [${list}]`);
  tmp.write('brownout-1.yaml', withBrownouts('"2027-02-01T14:00:00Z/PT1H"'));
  tmp.write('brownout-1-respelt.yaml', withBrownouts('"2027-02-01T15:00:00+01:00/2027-02-01T15:00:00Z"'));
  tmp.write('brownout-2.yaml', withBrownouts('"2027-03-01T14:00:00Z/PT1H", "2027-02-08T14:00:00Z/PT2H"'));
  tmp.write('hostile.yaml', V1.replace('operationId: status', 'operationId: "st\\u001b[31matus"'));
  config = tmp.write('gateway.yaml', {
    services: { catalog: { targets: ['http://127.0.0.1:9'], openapi: { file: 'catalog.yaml' } } },
    routes: [{ operationId: 'createItem', cost: 5 }],
  });
});
afterAll(() => tmp.remove());

describe('tollgate openapi diff', () => {
  it('lists every change, one line each, and exits 3', async () => {
    const r = await runCli(['openapi', 'diff', '--config', config, `${tmp.dir}/catalog-v2.yaml`]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(3);
    expect(r.stdout.split('\n')).toEqual([
      `service catalog: catalog.yaml -> ${tmp.dir}/catalog-v2.yaml`,
      '~ GET /v1/items (listItems): newly deprecated (since 2026-12-01T00:00:00Z), sunset 2027-12-01T00:00:00Z',
      '~ POST /v1/items (createItem): stability beta -> stable',
      '+ GET /v1/items/export (exportItems)',
      '~ GET /v1/status (status): now public (no key needed)',
      '~ GET /v1/items/{id} (getItem): sunset 2027-06-01T00:00:00Z -> 2027-03-01T00:00:00Z (earlier)',
      '- DELETE /v1/items/{id} (deleteItem)',
      '6 changes',
      '',
    ]);
  });

  it('--json gives the same changes as data', async () => {
    const r = await runCli(['openapi', 'diff', '--config', config, '--json', `${tmp.dir}/catalog-v2.yaml`]);
    expect(r.code).toBe(3);
    const body = JSON.parse(r.stdout) as { service: string; changes: Array<Record<string, unknown>> };
    expect(body.service).toBe('catalog');
    expect(body.changes.map((c) => `${c.kind} ${c.operationId as string}`)).toEqual([
      'deprecated listItems',
      'stability createItem',
      'added exportItems',
      'access status',
      'sunset getItem',
      'removed deleteItem',
    ]);
    expect(body.changes.find((c) => c.kind === 'stability')).toEqual({
      kind: 'stability',
      method: 'POST',
      path: '/v1/items',
      operationId: 'createItem',
      from: 'beta',
      to: 'stable',
    });
  });

  it('the same document (another version string, a date spelled otherwise) changes nothing: exit 0', async () => {
    const same = await runCli(['openapi', 'diff', '--config', config, `${tmp.dir}/catalog-same.yaml`]);
    expect([same.code, same.stdout.split('\n').slice(1)]).toEqual([0, ['no changes', '']]);
    const itself = await runCli(['openapi', 'diff', '--config', config, `${tmp.dir}/catalog.yaml`]);
    expect(itself.code).toBe(0);
  });

  it('a new document that cannot load is one error line naming it, exit 1; nothing on stdout', async () => {
    const broken = await runCli(['openapi', 'diff', '--config', config, `${tmp.dir}/broken.yaml`]);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toBe('');
    expect(broken.stderr.trim().split('\n')).toHaveLength(1);
    expect(broken.stderr).toContain(`${tmp.dir}/broken.yaml: cannot be loaded as service catalog's document`);
    const missing = await runCli(['openapi', 'diff', '--config', config, `${tmp.dir}/nope.yaml`]);
    expect([missing.code, missing.stderr]).toEqual([1, expect.stringContaining('file not found')]);
  });

  it('an unknown service is a usage error (exit 2); a config without documents says so (exit 1)', async () => {
    const unknown = await runCli(['openapi', 'diff', '--config', config, '--service', 'orders', `${tmp.dir}/catalog-v2.yaml`]);
    expect([unknown.code, unknown.stderr.trim()]).toEqual([2, 'error: service "orders" has no OpenAPI document (services with one: catalog)']);
    const plain = tmp.write('plain.yaml', { services: { catalog: { targets: ['http://127.0.0.1:9'] } }, routes: [{ path: '/x', service: 'catalog' }] });
    const none = await runCli(['openapi', 'diff', '--config', plain, `${tmp.dir}/catalog-v2.yaml`]);
    expect([none.code, none.stderr.trim()]).toEqual([
      1,
      'error: no service of this config has an OpenAPI document (services.<name>.openapi.file, upstream.openapi.file)',
    ]);
  });

  it('brownouts (x-brownouts) added, moved or dropped are a change; the same hour spelt otherwise is none', async () => {
    const diff = async (from: string, to: string) => {
      const cfg = tmp.write(`gateway-${from}`, { services: { catalog: { targets: ['http://127.0.0.1:9'], openapi: { file: from } } } });
      const r = await runCli(['openapi', 'diff', '--config', cfg, `${tmp.dir}/${to}`]);
      expect(r.stderr).toBe('');
      return { code: r.code, lines: r.stdout.trimEnd().split('\n').slice(1) };
    };
    expect(await diff('catalog.yaml', 'brownout-1.yaml')).toEqual({
      code: 3,
      lines: ['~ GET /v1/items/{id} (getItem): brownouts (none) -> 2027-02-01T14:00:00Z/2027-02-01T15:00:00Z', '1 change'],
    });
    expect(await diff('brownout-1.yaml', 'brownout-2.yaml')).toEqual({
      code: 3,
      lines: [
        '~ GET /v1/items/{id} (getItem): brownouts 2027-02-01T14:00:00Z/2027-02-01T15:00:00Z -> 2027-02-08T14:00:00Z/2027-02-08T16:00:00Z, 2027-03-01T14:00:00Z/2027-03-01T15:00:00Z',
        '1 change',
      ],
    });
    expect(await diff('brownout-2.yaml', 'catalog.yaml')).toEqual({
      code: 3,
      lines: [
        '~ GET /v1/items/{id} (getItem): brownouts 2027-02-08T14:00:00Z/2027-02-08T16:00:00Z, 2027-03-01T14:00:00Z/2027-03-01T15:00:00Z -> (none)',
        '1 change',
      ],
    });
    expect(await diff('brownout-1.yaml', 'brownout-1-respelt.yaml')).toEqual({ code: 0, lines: ['no changes'] });
    const cfg = tmp.write('gateway-json.yaml', { services: { catalog: { targets: ['http://127.0.0.1:9'], openapi: { file: 'catalog.yaml' } } } });
    const json = JSON.parse((await runCli(['openapi', 'diff', '--config', cfg, '--json', `${tmp.dir}/brownout-1.yaml`])).stdout) as { changes: unknown[] };
    expect(json.changes).toEqual([
      { kind: 'brownouts', method: 'GET', path: '/v1/items/{id}', operationId: 'getItem', from: null, to: '2027-02-01T14:00:00Z/2027-02-01T15:00:00Z' },
    ]);
  });

  it('an operationId with terminal escapes is printed escaped, on its one line', async () => {
    const r = await runCli(['openapi', 'diff', '--config', config, `${tmp.dir}/hostile.yaml`]);
    expect(r.stdout).not.toContain('\u001b');
    expect(r.code).toBe(3);
    expect(r.stdout.split('\n')[1]).toBe('~ GET /v1/status: operationId status -> st\\x1b[31matus');
  });
});
