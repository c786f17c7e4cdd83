// What a validation answer says, for documents and requests a red team would write: a failed anyOf/oneOf explained
// by the alternative the client nearly matched (not every alternative's complaints), a 2,000-alternative anyOf
// answered quickly, and a client's 500,000-character property name not echoed back whole.
import { describe, expect, it } from 'vitest';
import type { IncomingHttpHeaders } from 'node:http';
import type { OpenApiOperation } from '../src/openapi/operations.js';
import { compileRequestValidator, duplicateKey, MAX_QUOTED_MESSAGE, MAX_QUOTED_POINTER, type RequestInput } from '../src/validation/validator.js';

/** One operation `POST /t` of an inline 3.1 document, with this body schema and these parameters. */
function operation(body: object | undefined, parameters: object[] = [], components: object = {}): OpenApiOperation {
  const document = {
    openapi: '3.1.0',
    info: { title: 't', version: '1' },
    components,
    paths: { '/t': { post: { parameters, ...(body ? { requestBody: { content: { 'application/json': { schema: body } } } } : {}) } } },
  };
  return {
    service: 's',
    file: 't.yaml',
    pointer: '/paths/~1t/post',
    operationId: 't',
    method: 'POST',
    pathTemplate: '/t',
    document,
    parameters,
    requestBody: body ? document.paths['/t'].post.requestBody : undefined,
    openapiVersion: '3.1',
    validate: 'enforce',
  };
}

function input(o: { text?: string; query?: string; headers?: IncomingHttpHeaders }): RequestInput {
  const headers: IncomingHttpHeaders = { ...(o.headers ?? {}) };
  const rawBody = o.text === undefined ? undefined : Buffer.from(o.text);
  if (rawBody) {
    headers['content-length'] = String(rawBody.length);
    headers['content-type'] = 'application/json';
  }
  return { path: {}, query: o.query ?? '', headers, ...(rawBody ? { rawBody } : {}) };
}

const card = {
  type: 'object',
  required: ['type', 'number', 'expMonth', 'expYear', 'cvc'],
  additionalProperties: false,
  properties: {
    type: { const: 'card' },
    number: { type: 'string', pattern: '^[0-9]{12,19}$' },
    expMonth: { type: 'integer', minimum: 1, maximum: 12 },
    expYear: { type: 'integer' },
    cvc: { type: 'string', pattern: '^[0-9]{3,4}$' },
  },
};
const bank = {
  type: 'object',
  required: ['type', 'iban', 'holder'],
  additionalProperties: false,
  properties: { type: { const: 'sepa' }, iban: { type: 'string' }, holder: { type: 'string' } },
};
const wallet = {
  type: 'object',
  required: ['type', 'wallet', 'token'],
  additionalProperties: false,
  properties: { type: { const: 'wallet' }, wallet: { enum: ['apple', 'google'] }, token: { type: 'string' } },
};

describe('a failed anyOf/oneOf is explained by the alternative the client nearly matched', () => {
  it.each(['anyOf', 'oneOf'])("%s: one wrong cvc type gives the cvc problem and a summary, not every alternative's complaints", (keyword) => {
    const v = compileRequestValidator(
      operation(
        {
          type: 'object',
          required: ['payment'],
          properties: { payment: { [keyword]: [{ $ref: '#/components/schemas/Bank' }, { $ref: '#/components/schemas/Card' }, wallet] } },
        },
        [],
        { schemas: { Card: card, Bank: bank } },
      ),
    );
    const problems = v.validate(
      input({ text: JSON.stringify({ payment: { type: 'card', number: '4242424242424242', expMonth: 12, expYear: 2030, cvc: 123 } }) }),
    );
    expect(problems).toEqual([
      { pointer: '/body/payment/cvc', message: 'must be string' },
      { pointer: '/body/payment', message: `matches none of its 3 alternatives (${keyword}); the problems listed are those of the closest, alternative 2` },
    ]);
  });

  it('nested alternatives are narrowed at each level; a match still passes', () => {
    const inner = {
      anyOf: [
        { type: 'integer', minimum: 10 },
        { type: 'string', maxLength: 2 },
      ],
    };
    const v = compileRequestValidator(operation({ anyOf: [{ type: 'object', required: ['a'], properties: { a: inner } }, { type: 'array' }] }));
    expect(v.validate(input({ text: '{"a":"long"}' }))).toEqual([
      { pointer: '/body/a', message: 'must NOT have more than 2 characters' },
      { pointer: '/body/a', message: 'matches none of its 2 alternatives (anyOf); the problems listed are those of the closest, alternative 2' },
      { pointer: '/body', message: 'matches none of its 2 alternatives (anyOf); the problems listed are those of the closest, alternative 1' },
    ]);
    expect(v.validate(input({ text: '{"a":12}' }))).toEqual([]);
  });

  it('query parameters (coerced from text) are narrowed too', () => {
    const v = compileRequestValidator(
      operation(undefined, [{ name: 'size', in: 'query', schema: { anyOf: [{ type: 'integer', minimum: 1, maximum: 100 }, { enum: ['small', 'large'] }] } }]),
    );
    expect(v.validate(input({ query: 'size=500' }))).toEqual([
      { pointer: '/query/size', message: 'must be <= 100' },
      { pointer: '/query/size', message: 'matches none of its 2 alternatives (anyOf); the problems listed are those of the closest, alternative 1' },
    ]);
  });

  it('a 2,000-alternative anyOf (compiled on its first request) answers a failing one within a second, its problems capped', { timeout: 120_000 }, () => {
    const alternatives = Array.from({ length: 2_000 }, (_, i) => ({
      type: 'object',
      required: [`field${i}`],
      properties: { [`field${i}`]: { type: 'string', pattern: `^v${i}-[a-z]+$` } },
    }));
    const v = compileRequestValidator(operation({ anyOf: alternatives }));
    v.validate(input({ text: '{"field0":"v0-ok"}' }));
    const started = performance.now();
    const problems = v.validate(input({ text: JSON.stringify({ field7: 'v7-' + 'a'.repeat(5_000) + '!' }) }));
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(problems.length).toBeLessThanOrEqual(21);
  });
});

describe('what an answer quotes is clipped', () => {
  it("a 500,000-character property name is not echoed back whole, nor a document's long pattern", () => {
    const v = compileRequestValidator(
      operation({ type: 'object', additionalProperties: false, properties: { code: { type: 'string', pattern: `^(${'x|'.repeat(300)}y)$` } } }),
    );
    const name = 'n'.repeat(500_000);
    const problems = v.validate(input({ text: JSON.stringify({ [name]: 1, code: 'z' }) }));
    expect(problems).toHaveLength(2);
    for (const p of problems) {
      expect(p.pointer.length).toBeLessThanOrEqual(MAX_QUOTED_POINTER + 40);
      expect(p.message.length).toBeLessThanOrEqual(MAX_QUOTED_MESSAGE + 40);
    }
    expect(problems[0]!.pointer).toMatch(/^\/body\/nnnn.*\.\.\. \(500006 characters\)$/);
    expect(JSON.stringify(problems).length).toBeLessThan(2_000);
  });
});

describe('values a backend reads differently are refused', () => {
  const v = compileRequestValidator(
    operation(
      {
        type: 'object',
        properties: { qty: { type: 'integer' }, price: { type: 'number' }, item: { type: 'object', properties: { n: { type: 'integer' } } } },
      },
      [
        { name: 'limit', in: 'query', schema: { type: 'integer', maximum: 100 } },
        { name: 'ratio', in: 'query', schema: { type: 'number' } },
        { name: 'ids', in: 'query', schema: { type: 'array', items: { type: 'integer' } }, explode: false },
        { name: 'tag', in: 'query', schema: { type: 'array', items: { type: 'string', enum: ['a', 'b'] } } },
        { name: 'x-page', in: 'header', schema: { type: 'integer' } },
      ],
    ),
  );

  it.each(['Infinity', '-Infinity', '0x1', '1.', '-1e400', '1e2', ' 1', '+1', '0b1', '1_000'])('an integer query parameter written %j', (text) => {
    const problems = v.validate(input({ query: `limit=${encodeURIComponent(text)}` }));
    expect(problems.map((p) => p.pointer)).toEqual(['/query/limit']);
  });

  it('integers in an array parameter and a header, and numbers, are read as a backend reads them', () => {
    expect(v.validate(input({ query: 'ids=1,0x2,3.&ratio=1.5e3&limit=-7', headers: { 'x-page': '0x10' } })).map((p) => p.pointer)).toEqual([
      '/query/ids/1',
      '/query/ids/2',
      '/headers/x-page',
    ]);
    expect(v.validate(input({ query: 'ratio=.5' })).map((p) => p.pointer)).toEqual(['/query/ratio']);
    expect(v.validate(input({ query: 'ratio=Infinity' })).map((p) => p.pointer)).toEqual(['/query/ratio']);
    expect(v.validate(input({ query: 'limit=007&ratio=-0.25&ids=1,2', headers: { 'x-page': '3' } }))).toEqual([]);
  });

  it('a JSON body with a non-finite number (1e400, -1e400) is refused', () => {
    expect(v.validate(input({ text: '{"qty":-1e400}' })).map((p) => p.pointer)).toEqual(['/body/qty']);
    expect(v.validate(input({ text: '{"price":1e400}' })).map((p) => p.pointer)).toEqual(['/body/price']);
    expect(v.validate(input({ text: '{"qty":3,"price":2.5}' }))).toEqual([]);
  });

  it.each(['tag[]=c', 'tag[]=a', 'tag[0]=a', 'tag%5B%5D=a', 'limit[]=500', 'limit[x]=1', 'tag=a&tag[]=zzz'])(
    'a bracket spelling of a documented query parameter (%s) is refused',
    (query) => {
      const problems = v.validate(input({ query }));
      expect(problems.length).toBeGreaterThan(0);
      expect(problems[0]!.message).toMatch(/is written ".*\[.*\]": a backend may read brackets as (tag|limit)/);
    },
  );

  it("an undocumented bracketed parameter is none of the gateway's business", () => {
    expect(v.validate(input({ query: 'other[]=1&tag=a' }))).toEqual([]);
  });

  it('a JSON body with a key given twice in one object is refused with its pointer; equal keys spelled differently too', () => {
    expect(v.validate(input({ text: '{"qty":1,"qty":"x"}' }))).toEqual([
      { pointer: '/body/qty', message: 'has a key given twice in one object: a backend may read either value' },
    ]);
    expect(v.validate(input({ text: '{"item":{"n":1,"\\u006e":2}}' })).map((p) => p.pointer)).toEqual(['/body/item/n']);
    expect(v.validate(input({ text: '{"a":[{"k":1},{"k":2,"s":"\\"k\\"","k":3}]}' })).map((p) => p.pointer)).toEqual(['/body/a/1/k']);
    // The same key in different objects is fine.
    expect(v.validate(input({ text: '{"item":{"n":1},"other":{"n":1},"list":[{"n":1},{"n":2}]}' }))).toEqual([]);
  });

  it('the duplicate-key check of a large body is one pass, of the order of parsing it', () => {
    const big = JSON.stringify({ list: Array.from({ length: 50_000 }, (_, i) => ({ id: i, name: `n${i}`, tags: ['a', 'b'] })) });
    expect(duplicateKey(big.replace('"name":"n49999"', '"name":"n49999","id":1'))).toBe('/list/49999/id');
    // Judged against JSON.parse of the same text in the same run (best of three each), not against the clock.
    const best = (f: () => unknown): number =>
      Math.min(
        ...[0, 1, 2].map(() => {
          const started = performance.now();
          f();
          return performance.now() - started;
        }),
      );
    const scan = best(() => expect(duplicateKey(big)).toBeUndefined());
    const parse = best(() => JSON.parse(big));
    expect(scan, `scan ${scan} ms, JSON.parse ${parse} ms`).toBeLessThan(parse * 5);
  });
});
