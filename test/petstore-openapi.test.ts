// The pet store against its OpenAPI document (docs/petstore.openapi.yaml): every answer it gives is one the document
// lists, with a body and headers that match their schemas, and every status the document says the pet store itself
// answers is produced here at least once (401, 429 and 410 are the gateway's, tried in the gateway's own tests).
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import { buildPetstoreApp } from '../src/petstore/app.js';
import { MemoryCategoryStore } from '../src/petstore/store.js';
import { OpenApiDocument } from './helpers/openapi.js';

const doc = new OpenApiDocument(new URL('../docs/petstore.openapi.yaml', import.meta.url));
const GATEWAY_ONLY = new Set(['401', '429', '410']);

describe('the pet store conforms to docs/petstore.openapi.yaml', () => {
  it('every answer is documented and matches its schema; every documented pet store answer occurs', async () => {
    const app = buildPetstoreApp({ store: new MemoryCategoryStore() });
    const problems: string[] = [];
    const send = async (method: 'get' | 'post', path: string, body?: string, type = 'application/json') => {
      let req = request(app)[method](path);
      if (body !== undefined) req = req.set('content-type', type).send(body);
      const res = await req;
      problems.push(...doc.check(method.toUpperCase(), path, res.status, res.headers as Record<string, string>, res.text));
      return res;
    };

    expect((await send('get', '/v1/categories')).body).toEqual([]);
    const created = await send('post', '/v1/categories', JSON.stringify({ name: ' Dog ', description: 'Good boys' }));
    expect(created.status).toBe(201);
    await send('post', '/v1/categories', JSON.stringify({ name: 'Cat' }));
    expect((await send('get', '/v1/categories')).body).toHaveLength(2);
    await send('get', `/v1/categories/${created.body.id}`);
    await send('get', '/v1/categories/999');
    for (const bad of [
      {},
      { name: '' },
      { name: 'x'.repeat(101) },
      { name: 'Dog', color: 'brown' },
      { name: 7 },
      { name: 'Dog', description: 'd'.repeat(1001) },
    ]) {
      expect((await send('post', '/v1/categories', JSON.stringify(bad))).status).toBe(400);
    }
    expect((await send('post', '/v1/categories', '{"name":')).status).toBe(400);
    expect((await send('post', '/v1/categories', 'name=Dog', 'application/x-www-form-urlencoded')).status).toBe(415);
    expect((await send('post', '/v1/categories', JSON.stringify({ name: 'x', description: 'y'.repeat(70_000) }))).status).toBe(413);
    await send('get', '/v1/pets/1');
    await send('get', '/v1/pets/42');
    await send('get', '/v1/store/orders');

    expect(problems).toEqual([]);
    const untried = doc.operations().filter((o) => !doc.seen.has(o) && !GATEWAY_ONLY.has(o.split(' ')[1]!));
    expect(untried).toEqual([]);
  });

  it('the checker itself refuses what the document does not allow', () => {
    expect(doc.check('GET', '/v1/categories', 200, { 'content-type': 'application/json' }, '[{"id":0,"name":"x"}]')).toEqual([
      'GET /v1/categories -> 200 body: /0/id must be >= 1',
    ]);
    expect(doc.check('GET', '/v1/categories', 204, {}, '')).toEqual(['GET /v1/categories -> 204: status not documented for listCategories']);
    expect(doc.check('DELETE', '/v1/categories/1', 200, {}, '')).toEqual(['DELETE /v1/categories/1 -> 200: no such operation in the document']);
    expect(doc.check('POST', '/v1/categories', 201, { 'content-type': 'application/json', location: '/elsewhere' }, '{"id":1,"name":"x"}')).toEqual([
      'POST /v1/categories -> 201 header Location: (root) must match pattern "^/v1/categories/[1-9][0-9]*$"',
    ]);
  });
});
