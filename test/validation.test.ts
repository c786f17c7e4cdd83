// Request validation's validator (src/validation/) over a realistic OpenAPI 3.0 document and a 3.1 one: parameters in
// every place and style, JSON bodies, formats, enums, the 3.0 dialect (nullable, boolean exclusive bounds), recursive
// schemas, a $ref loop, and hostile input (deep nesting, huge arrays, prototype keys, huge numbers), which must come
// back as problems, never as an exception or a polluted Object.prototype.
import { describe, expect, it } from 'vitest';
import type { IncomingHttpHeaders } from 'node:http';
import { checkOperation, compileRequestValidator, DescriptionError, MAX_PROBLEMS, type RequestInput } from '../src/validation/validator.js';
import { fixtureOperation } from './helpers/openapi-operations.js';

const V30 = 'orders-3.0.yaml';
const V31 = 'catalog-3.1.yaml';

function input(o: Partial<RequestInput> & { json?: unknown; type?: string }): RequestInput {
  const headers: IncomingHttpHeaders = { ...(o.headers ?? {}) };
  let rawBody = o.rawBody;
  if (o.json !== undefined) rawBody = Buffer.from(typeof o.json === 'string' ? o.json : JSON.stringify(o.json));
  if (rawBody) {
    headers['content-length'] = String(rawBody.length);
    headers['content-type'] ??= o.type ?? 'application/json';
  }
  return { path: o.path ?? {}, query: o.query ?? '', headers, ...(rawBody ? { rawBody } : {}) };
}

const pointers = (problems: ReadonlyArray<{ pointer: string }>): string[] => problems.map((p) => p.pointer);

const goodOrder = {
  customer: { email: 'ada@example.com', name: 'Ada' },
  lines: [{ sku: 'AB-12', quantity: 2 }],
  total: 19.5,
  note: null,
  priority: null,
  deliverOn: '2026-03-01',
};

describe('OpenAPI 3.0: parameters', () => {
  const list = compileRequestValidator(fixtureOperation(V30, 'listOrders'));
  const get = compileRequestValidator(fixtureOperation(V30, 'getOrder'));

  it('passes a request that matches, with query values coerced from text', () => {
    const q = 'limit=20&status=open&tag=a&tag=b&ids=1,2,3&since=2026-01-02T03:04:05Z&filter[minTotal]=10.5&filter[currency]=EUR&archived=false&other=x';
    expect(list.validate(input({ query: q }))).toEqual([]);
    expect(list.validate(input({ query: '' }))).toEqual([]);
  });

  it('lists every query problem with its pointer', () => {
    const q =
      'limit=0&status=lost&tag=a&tag=b&tag=c&tag=d&tag=e&tag=f&ids=1,x&since=yesterday&filter[minTotal]=-1&filter[currency]=GBP&filter[extra]=1&archived=maybe';
    const problems = list.validate(input({ query: q }));
    expect(pointers(problems).sort()).toEqual(
      [
        '/query/archived',
        '/query/filter/currency',
        '/query/filter/extra',
        '/query/filter/minTotal',
        '/query/ids/1',
        '/query/limit',
        '/query/since',
        '/query/status',
        '/query/tag',
      ].sort(),
    );
    const byPointer = Object.fromEntries(problems.map((p) => [p.pointer, p.message]));
    expect(byPointer['/query/limit']).toBe('must be >= 1');
    expect(byPointer['/query/status']).toBe('must be one of "open", "paid", "shipped"');
    expect(byPointer['/query/since']).toBe('must be a valid date-time');
    expect(byPointer['/query/ids/1']).toBe('must be integer');
    expect(byPointer['/query/filter/extra']).toBe('is not a property this operation takes');
  });

  it('refuses a single-valued parameter given twice, and a non-integer', () => {
    expect(list.validate(input({ query: 'limit=1&limit=2' }))).toEqual([{ pointer: '/query/limit', message: 'is given 2 times; it takes one value' }]);
    expect(pointers(list.validate(input({ query: 'limit=2.5' })))).toEqual(['/query/limit']);
    expect(pointers(list.validate(input({ query: 'limit=99999999999999999999999' })))).toEqual(['/query/limit']);
  });

  it('reads path and header parameters (headers by any case of their name, path-level $ref parameters included)', () => {
    const op = fixtureOperation(V30, 'getOrder');
    expect(get.pathParams('/shop/orders/42')).toEqual({ orderId: '42' });
    expect(get.pathParams('/shop/orders/a%20b')).toEqual({ orderId: 'a b' });
    expect(op.parameters.some((p) => '$ref' in p)).toBe(false);
    const ok = input({ path: { orderId: '42' }, query: 'fields=id,total', headers: { 'x-client-version': '2.1' } });
    expect(get.validate(ok)).toEqual([]);
    const bad = get.validate(input({ path: { orderId: 'abc' }, query: 'fields=id,bogus' }));
    expect(bad).toEqual([
      { pointer: '/path/orderId', message: 'must be integer' },
      { pointer: '/query/fields/1', message: 'must be one of "id", "total", "lines"' },
      { pointer: '/headers/x-client-version', message: 'is required' },
    ]);
    expect(pointers(get.validate(input({ path: { orderId: '0' }, headers: { 'x-client-version': 'v2' } })))).toEqual([
      '/path/orderId',
      '/headers/x-client-version',
    ]);
    // The path-level X-Trace ($ref to components.parameters), a uuid.
    expect(list.validate(input({ headers: { 'x-trace': 'not-a-uuid' } }))).toEqual([{ pointer: '/headers/x-trace', message: 'must be a valid uuid' }]);
    expect(list.validate(input({ headers: { 'x-trace': '0b7c6d2e-5f7a-4e0b-9a51-3a3c1b2d4e5f' } }))).toEqual([]);
  });
});

describe('OpenAPI 3.0: bodies', () => {
  const create = compileRequestValidator(fixtureOperation(V30, 'createOrder'));

  it('knows which requests need their body read', () => {
    expect(create.needsBody).toBe(true);
    expect(create.wantsBody({ 'content-type': 'application/json; charset=utf-8', 'content-length': '10' })).toBe(true);
    expect(create.wantsBody({ 'content-type': 'application/vnd.orders+json', 'transfer-encoding': 'chunked' })).toBe(true);
    expect(create.wantsBody({ 'content-type': 'text/plain', 'content-length': '10' })).toBe(false);
    expect(create.wantsBody({ 'content-type': 'application/json', 'content-length': '0' })).toBe(false);
    expect(compileRequestValidator(fixtureOperation(V30, 'getOrder')).needsBody).toBe(false);
  });

  it('passes a body that matches (nullable fields null, a +json media type, a listed non-JSON type unchecked)', () => {
    expect(create.validate(input({ json: goodOrder }))).toEqual([]);
    expect(create.validate(input({ json: goodOrder, type: 'application/vnd.orders+json' }))).toEqual([]);
    expect(create.validate(input({ rawBody: Buffer.from('anything'), type: 'text/plain' }))).toEqual([]);
  });

  it('lists every body problem: types, required, formats, enums, patterns, unknown properties, 3.0 bounds', () => {
    const problems = create.validate(
      input({
        json: {
          customer: { email: 'not-an-email', name: '' },
          lines: [{ sku: 'ab', quantity: 0 }, { quantity: '3' }],
          total: 0,
          note: 5,
          priority: 'urgent',
          deliverOn: '2026-02-30',
          extra: true,
        },
      }),
    );
    expect(problems).toEqual(
      expect.arrayContaining([
        { pointer: '/body/extra', message: 'is not a property this operation takes' },
        { pointer: '/body/customer/email', message: 'must be a valid email' },
        { pointer: '/body/customer/name', message: 'must NOT have fewer than 1 characters' },
        { pointer: '/body/lines/0/sku', message: 'must match pattern "^[A-Z]{2}-[0-9]+$"' },
        { pointer: '/body/lines/0/quantity', message: 'must be >= 1' },
        { pointer: '/body/lines/1/sku', message: 'is required' },
        { pointer: '/body/lines/1/quantity', message: 'must be integer' },
        { pointer: '/body/total', message: 'must be > 0' },
        { pointer: '/body/note', message: 'must be string or null' },
        { pointer: '/body/priority', message: 'must be one of "low", "high", null' },
        { pointer: '/body/deliverOn', message: 'must be a valid date' },
      ]),
    );
    expect(problems).toHaveLength(11);
  });

  it('answers a missing, unlisted or broken body as problems', () => {
    expect(create.validate(input({}))).toEqual([{ pointer: '/body', message: 'is required (application/json, application/vnd.orders+json, text/plain)' }]);
    expect(create.validate(input({ json: goodOrder, type: 'application/xml' }))).toEqual([
      { pointer: '/headers/content-type', message: "must be one of application/json, application/vnd.orders+json, text/plain for this operation's body" },
    ]);
    expect(create.validate(input({ json: '{"customer": ', type: 'application/json' }))).toEqual([{ pointer: '/body', message: 'is not valid JSON' }]);
    expect(create.validate(input({ rawBody: Buffer.from([0x7b, 0xff, 0x7d]) }))).toEqual([{ pointer: '/body', message: 'is not valid UTF-8 text' }]);
    expect(create.validate(input({ json: '[1, 2]' }))).toEqual([{ pointer: '/body', message: 'must be object' }]);
    // A body sent to an operation that describes none.
    const del = compileRequestValidator(fixtureOperation(V30, 'deleteOrder'));
    expect(del.validate(input({ path: { orderId: '1' }, json: {} }))).toEqual([{ pointer: '/body', message: 'this operation takes no request body' }]);
  });

  it(`lists at most ${MAX_PROBLEMS} problems and says how many more there were`, () => {
    const lines = Array.from({ length: 30 }, () => ({ sku: 'bad', quantity: 1 }));
    const problems = create.validate(input({ json: { ...goodOrder, lines } }));
    expect(problems).toHaveLength(MAX_PROBLEMS + 1);
    expect(problems[MAX_PROBLEMS]).toEqual({ pointer: '', message: `and 10 more problems (only the first ${MAX_PROBLEMS} are listed)` });
  });

  it('follows a recursive schema through $ref', () => {
    const put = compileRequestValidator(fixtureOperation(V30, 'replaceCategories'));
    const tree = { name: 'root', children: [{ name: 'a', children: [{ name: 'b', children: [] }] }] };
    expect(put.validate(input({ json: tree }))).toEqual([]);
    const broken = { name: 'root', children: [{ name: 'a', children: [{ children: [{ name: 7 }] }] }] };
    expect(put.validate(input({ json: broken }))).toEqual([
      { pointer: '/body/children/0/children/0/name', message: 'is required' },
      { pointer: '/body/children/0/children/0/children/0/name', message: 'must be string' },
    ]);
  });

  it('refuses a $ref loop as a fault of the description, naming the file and operation', () => {
    const op = fixtureOperation(V30, 'postLoop');
    const loop = compileRequestValidator(op);
    expect(() => loop.validate(input({ json: {} }))).toThrow(DescriptionError);
    expect(() => loop.validate(input({ json: {} }))).toThrow(/orders-3\.0\.yaml#\/paths\/~1loop\/post: a schema refers to itself with nothing in between/);
    expect(checkOperation(op)).toMatch(/LoopA.*LoopB.*LoopA/);
    expect(checkOperation(fixtureOperation(V30, 'createOrder'))).toBeUndefined();
  });

  it('compiles once per operation object, and a new document (a reload) gets its own', () => {
    const op = fixtureOperation(V30, 'createOrder');
    expect(compileRequestValidator(op)).toBe(compileRequestValidator(op));
    expect(compileRequestValidator(fixtureOperation(V30, 'createOrder'))).not.toBe(compileRequestValidator(op));
  });
});

describe('OpenAPI 3.1', () => {
  const patch = compileRequestValidator(fixtureOperation(V31, 'patchItem'));
  const search = compileRequestValidator(fixtureOperation(V31, 'searchItems'));
  const headers = { 'if-match': '"v1"' };

  it('validates a merge-patch body with 2020-12 keywords', () => {
    expect(patch.pathParams('/v2/items/lamp-1')).toEqual({ sku: 'lamp-1' });
    const ok = { title: 'Lamp', price: null, tags: ['a', 'b'], dimensions: [1, 2], node: { value: 1, next: { value: 2 } } };
    expect(patch.validate(input({ path: { sku: 'lamp-1' }, headers, json: ok, type: 'application/merge-patch+json' }))).toEqual([]);
    const bad = { price: 0, tags: ['a', 'a'], dimensions: [1, 2, 3], node: { next: { value: 'x' } }, bogus: 1 };
    expect(patch.validate(input({ path: { sku: 'lamp-1' }, headers, json: bad, type: 'application/merge-patch+json' }))).toEqual(
      expect.arrayContaining([
        { pointer: '/body/price', message: 'must be > 0' },
        { pointer: '/body/tags', message: 'must NOT have duplicate items (items ## 1 and 0 are identical)' },
        { pointer: '/body/dimensions', message: 'must NOT have more than 2 items' },
        { pointer: '/body/node/next/value', message: 'must be integer' },
        { pointer: '/body/bogus', message: 'is not a property this operation takes' },
      ]),
    );
    expect(pointers(patch.validate(input({ path: { sku: 'lamp-1' }, headers, json: {}, type: 'application/merge-patch+json' })))).toEqual(['/body']);
    // application/json is not what this operation takes.
    expect(pointers(patch.validate(input({ path: { sku: 'lamp-1' }, headers, json: ok })))).toEqual(['/headers/content-type']);
  });

  it('reads pipe-delimited arrays, required headers and path patterns', () => {
    const body = { json: { title: 'x' }, type: 'application/merge-patch+json' };
    expect(patch.validate(input({ path: { sku: 'lamp-1' }, headers, query: 'coords=1.5|2&dryRun=true', ...body }))).toEqual([]);
    expect(patch.validate(input({ path: { sku: 'LAMP' }, query: 'coords=1|x|3', ...body }))).toEqual([
      { pointer: '/path/sku', message: 'must match pattern "^[a-z0-9-]{3,20}$"' },
      { pointer: '/query/coords', message: 'must NOT have more than 2 items' },
      { pointer: '/query/coords/1', message: 'must be number' },
      { pointer: '/headers/if-match', message: 'is required' },
    ]);
  });

  it('reads a JSON-encoded query parameter (content), const, and 3.1 exclusive bounds', () => {
    expect(search.validate(input({ query: 'q=lamp&price=0.5&sort=price&filter=%7B%22brand%22%3A%22acme%22%7D' }))).toEqual([]);
    expect(search.validate(input({ query: 'price=0&sort=name&filter=%7B%22brand%22%3A1%7D' }))).toEqual([
      { pointer: '/query/q', message: 'is required' },
      { pointer: '/query/price', message: 'must be > 0' },
      { pointer: '/query/sort', message: 'must be "price"' },
      { pointer: '/query/filter/brand', message: 'must be string' },
    ]);
    expect(search.validate(input({ query: 'q=lamp&filter={oops' }))).toEqual([{ pointer: '/query/filter', message: 'is not valid JSON' }]);
  });
});

describe('hostile input', () => {
  const create = compileRequestValidator(fixtureOperation(V30, 'createOrder'));
  const put = compileRequestValidator(fixtureOperation(V30, 'replaceCategories'));
  const list = compileRequestValidator(fixtureOperation(V30, 'listOrders'));

  it('answers JSON nested 10,000 levels deep with one problem, also under a recursive schema', () => {
    const deep = '['.repeat(10_000) + ']'.repeat(10_000);
    expect(create.validate(input({ json: deep }))).toEqual([{ pointer: '/body', message: 'is nested more than 64 levels deep' }]);
    let tree = '{"name":"leaf"}';
    for (let i = 0; i < 10_000; i++) tree = `{"name":"n","children":[${tree}]}`;
    expect(put.validate(input({ json: tree }))).toEqual([{ pointer: '/body', message: 'is nested more than 64 levels deep' }]);
    // 30 levels are fine.
    let ok = '{"name":"leaf"}';
    for (let i = 0; i < 30; i++) ok = `{"name":"n","children":[${ok}]}`;
    expect(put.validate(input({ json: ok }))).toEqual([]);
  });

  it('answers a 100,000-element array of wrong items quickly, with the problems capped', () => {
    const lines = Array.from({ length: 100_000 }, (_, i) => (i % 2 ? 'x' : { sku: 1 }));
    const started = performance.now();
    const problems = create.validate(input({ json: { ...goodOrder, lines } }));
    const ms = performance.now() - started;
    expect(problems).toHaveLength(MAX_PROBLEMS + 1);
    expect(problems.slice(0, 2)).toEqual([
      { pointer: '/body/lines/0/quantity', message: 'is required' },
      { pointer: '/body/lines/0/sku', message: 'must be string' },
    ]);
    expect(problems[MAX_PROBLEMS]!.message).toMatch(/^and \d+ more problems/);
    expect(ms).toBeLessThan(2000);
    // Valid ones pass.
    const valid = Array.from({ length: 100_000 }, () => ({ sku: 'AB-1', quantity: 1 }));
    expect(create.validate(input({ json: { ...goodOrder, lines: valid } }))).toEqual([]);
  });

  it('takes __proto__, constructor and prototype keys as data: no pollution, clear problems', () => {
    const body =
      '{"customer":{"email":"a@b.co","__proto__":{"polluted":1}},"lines":[{"sku":"AB-1","quantity":1}],"total":1,"__proto__":{"polluted":1},"constructor":{"prototype":{"polluted":1}}}';
    const problems = create.validate(input({ json: body }));
    expect(problems).toEqual([
      { pointer: '/body/__proto__', message: 'is not a property this operation takes' },
      { pointer: '/body/constructor', message: 'is not a property this operation takes' },
    ]);
    const query = 'filter[__proto__]=1&filter[constructor]=2&filter[prototype]=3&__proto__[polluted]=1&constructor[prototype][polluted]=1&limit=1';
    expect(list.validate(input({ query }))).toEqual([
      { pointer: '/query/filter/__proto__', message: 'is not a property this operation takes' },
      { pointer: '/query/filter/constructor', message: 'is not a property this operation takes' },
      { pointer: '/query/filter/prototype', message: 'is not a property this operation takes' },
    ]);
    const get = compileRequestValidator(fixtureOperation(V30, 'getOrder'));
    expect(pointers(get.validate(input({ path: { __proto__: 'x' } as unknown as Record<string, string>, headers: { 'x-client-version': '1.0' } })))).toEqual([
      '/path/orderId',
    ]);
    expect(get.pathParams('/shop/orders/__proto__')).toEqual(Object.fromEntries([['orderId', '__proto__']]));
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('polluted');
  });

  it('answers huge numbers as problems, not exceptions', () => {
    expect(pointers(create.validate(input({ json: '{"customer":{"email":"a@b.co"},"lines":[{"sku":"AB-1","quantity":1e400}],"total":1e999}' })))).toEqual([
      '/body/lines/0/quantity',
      '/body/total',
    ]);
    expect(pointers(create.validate(input({ json: { ...goodOrder, total: 1.2345678901234568e29 } })))).toEqual(['/body/total']);
  });
});
