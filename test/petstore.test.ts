// Unit tests for the reference petstore upstream, in process on the memory store:
// validation rules, status codes, error bodies and ordering.
import { describe, expect, it, beforeEach } from 'vitest';
import request from 'supertest';
import type { Express } from 'express';
import { buildPetstoreApp } from '../src/petstore/app.js';
import { MemoryCategoryStore, StoreUnavailableError, type CategoryStore } from '../src/petstore/store.js';

function expectError(res: request.Response, status: number, code: string, messagePart?: string | RegExp): void {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(res.body).toMatchObject({ code, status });
  expect(typeof res.body.message).toBe('string');
  if (typeof messagePart === 'string') expect(res.body.message).toContain(messagePart);
  else if (messagePart) expect(res.body.message).toMatch(messagePart);
  expect(res.text).not.toMatch(/\bat .*\.(ts|js):\d+/);
  expect(res.text).not.toMatch(/<html|<pre/i);
}

let app: Express;
beforeEach(() => {
  app = buildPetstoreApp({ store: new MemoryCategoryStore() });
});

const post = (body: unknown) =>
  request(app)
    .post('/v1/categories')
    .send(body as object);

describe('POST /v1/categories', () => {
  it('creates a category: 201, the category and Location', async () => {
    const res = await post({ name: 'Dog', description: 'Good boys' });
    expect(res.status).toBe(201);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual({ id: 1, name: 'Dog', description: 'Good boys' });
    expect(res.headers.location).toBe('/v1/categories/1');
  });

  it('omits description when not given', async () => {
    const res = await post({ name: 'Cat' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ id: 1, name: 'Cat' });
  });

  it('accepts application/json with a charset parameter', async () => {
    const res = await request(app)
      .post('/v1/categories')
      .set('Content-Type', 'application/json; charset=utf-8')
      .send(JSON.stringify({ name: 'Fish' }));
    expect(res.status).toBe(201);
  });

  it('trims the name before storing it', async () => {
    const res = await post({ name: '  Rabbit \t' });
    expect(res.status).toBe(201);
    expect(res.body.name).toBe('Rabbit');
  });

  it('hands out increasing ids', async () => {
    const ids: number[] = [];
    for (const name of ['a', 'b', 'c', 'd']) ids.push((await post({ name })).body.id);
    expect(ids).toEqual([1, 2, 3, 4]);
  });

  it('requires name', async () => {
    expectError(await post({}), 400, 'invalid_request', 'name: required');
    expectError(await post({ description: 'x' }), 400, 'invalid_request', 'name: required');
  });

  it('treats an empty JSON body as missing name', async () => {
    const res = await request(app).post('/v1/categories').set('Content-Type', 'application/json').send('');
    expectError(res, 400, 'invalid_request', 'name: required');
  });

  it('requires name to be a string', async () => {
    for (const name of [42, null, true, ['Dog'], { x: 1 }]) {
      expectError(await post({ name }), 400, 'invalid_request', 'name: must be a string');
    }
  });

  it('rejects an empty or blank name', async () => {
    expectError(await post({ name: '' }), 400, 'invalid_request', 'name: must not be empty');
    expectError(await post({ name: '   \n\t ' }), 400, 'invalid_request', 'name: must not be empty');
  });

  it('allows a 100-character name and refuses 101', async () => {
    expect((await post({ name: 'n'.repeat(100) })).status).toBe(201);
    expectError(await post({ name: 'n'.repeat(101) }), 400, 'invalid_request', 'name: must be at most 100 characters');
  });

  it('measures the name after trimming', async () => {
    const res = await post({ name: `  ${'n'.repeat(100)}  ` });
    expect(res.status).toBe(201);
    expect(res.body.name).toHaveLength(100);
  });

  it('counts characters, not UTF-16 units', async () => {
    expect((await post({ name: '🐶'.repeat(100) })).status).toBe(201);
    expectError(await post({ name: '🐶'.repeat(101) }), 400, 'invalid_request', 'name: must be at most 100 characters');
  });

  it('allows a 1000-character description and refuses 1001', async () => {
    expect((await post({ name: 'Dog', description: 'd'.repeat(1000) })).status).toBe(201);
    expectError(await post({ name: 'Dog', description: 'd'.repeat(1001) }), 400, 'invalid_request', 'description: must be at most 1000 characters');
  });

  it('requires description to be a string', async () => {
    for (const description of [1, null, false, ['x']]) {
      expectError(await post({ name: 'Dog', description }), 400, 'invalid_request', 'description: must be a string');
    }
  });

  it('refuses unknown fields, naming them', async () => {
    expectError(await post({ name: 'Dog', color: 'brown' }), 400, 'invalid_request', 'unknown field "color"');
    expectError(await post({ id: 7, name: 'Dog' }), 400, 'invalid_request', 'unknown field "id"');
  });

  it('refuses __proto__ as an unknown field', async () => {
    const res = await request(app).post('/v1/categories').set('Content-Type', 'application/json').send('{"name":"Dog","__proto__":{"admin":true}}');
    expectError(res, 400, 'invalid_request', 'unknown field "__proto__"');
  });

  it('names every problem at once', async () => {
    const res = await post({ name: '', description: 5, color: 'x' });
    expectError(res, 400, 'invalid_request');
    expect(res.body.message).toContain('name: must not be empty');
    expect(res.body.message).toContain('description: must be a string');
    expect(res.body.message).toContain('unknown field "color"');
  });

  it('requires a JSON object body', async () => {
    for (const body of ['[]', '[{"name":"Dog"}]', '"Dog"', '42', 'null', 'true']) {
      const res = await request(app).post('/v1/categories').set('Content-Type', 'application/json').send(body);
      expectError(res, 400, 'invalid_request', 'request body must be a JSON object');
    }
  });

  it('answers invalid_json for a malformed body', async () => {
    for (const body of ['{', '{"name":', "{'name':'Dog'}", '{"name":"Dog",}', 'name=Dog']) {
      const res = await request(app).post('/v1/categories').set('Content-Type', 'application/json').send(body);
      expectError(res, 400, 'invalid_json');
      expect(res.body.message).not.toContain(body);
    }
  });

  it('answers 415 for a body that is not application/json', async () => {
    const form = await request(app).post('/v1/categories').type('form').send('name=Dog');
    expectError(form, 415, 'unsupported_media_type');
    const text = await request(app).post('/v1/categories').set('Content-Type', 'text/plain').send('{"name":"Dog"}');
    expectError(text, 415, 'unsupported_media_type');
    const jsonish = await request(app).post('/v1/categories').set('Content-Type', 'application/json-patch+json').send('{"name":"Dog"}');
    expectError(jsonish, 415, 'unsupported_media_type');
  });

  it('answers 415 when Content-Type is missing', async () => {
    const res = await request(app).post('/v1/categories');
    expectError(res, 415, 'unsupported_media_type');
  });

  it('answers 415 for a non-UTF charset', async () => {
    const res = await request(app).post('/v1/categories').set('Content-Type', 'application/json; charset=latin1').send('{"name":"Dog"}');
    expectError(res, 415, 'unsupported_media_type');
  });

  it('accepts a body just under 64 KiB and refuses one over it with 413', async () => {
    const pad = (n: number) => JSON.stringify({ name: 'Dog', description: ' '.repeat(n) });
    // Over 1000 characters, so the small one is a 400, proving it was read rather than refused for size.
    const small = pad(60 * 1024);
    const smallRes = await request(app).post('/v1/categories').set('Content-Type', 'application/json').send(small);
    expectError(smallRes, 400, 'invalid_request', 'description');
    const big = pad(65 * 1024);
    const bigRes = await request(app).post('/v1/categories').set('Content-Type', 'application/json').send(big);
    expectError(bigRes, 413, 'payload_too_large');
  });
});

describe('GET /v1/categories', () => {
  it('starts empty', async () => {
    const res = await request(app).get('/v1/categories');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual([]);
  });

  it('lists every category ordered by id', async () => {
    for (const name of ['Zebra', 'Ant', 'Mole']) await post({ name });
    const res = await request(app).get('/v1/categories');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { id: 1, name: 'Zebra' },
      { id: 2, name: 'Ant' },
      { id: 3, name: 'Mole' },
    ]);
  });

  it('does not list a refused category', async () => {
    await post({ name: '' });
    expect((await request(app).get('/v1/categories')).body).toEqual([]);
  });
});

describe('GET /v1/categories/:id', () => {
  it('returns the category at its Location', async () => {
    const created = await post({ name: 'Dog', description: 'woof' });
    const res = await request(app).get(created.headers.location as string);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(created.body);
  });

  it('answers not_found for unknown, non-numeric and absurd ids', async () => {
    for (const id of ['1', '0', '-1', 'abc', '1.5', '01', '99999999999999999999', '%E0%A4%A']) {
      expectError(await request(app).get(`/v1/categories/${id}`), 404, 'not_found');
    }
  });
});

describe('other routes', () => {
  it('GET /v1/pets/:petId returns a demo pet or not_found', async () => {
    const rex = await request(app).get('/v1/pets/1');
    expect(rex.status).toBe(200);
    expect(rex.body).toMatchObject({ id: 1, name: expect.any(String), categoryId: expect.any(Number) });
    for (const id of ['999', '0', 'abc', '-2']) {
      expectError(await request(app).get(`/v1/pets/${id}`), 404, 'not_found', 'pet');
    }
  });

  it('GET /v1/store/orders returns []', async () => {
    const res = await request(app).get('/v1/store/orders');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([]);
  });

  it('GET /healthz is ok', async () => {
    const res = await request(app).get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  it('GET /readyz is ok on the memory store', async () => {
    const res = await request(app).get('/readyz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  it('answers not_found JSON for unknown routes and methods', async () => {
    expectError(await request(app).get('/'), 404, 'not_found');
    expectError(await request(app).get('/v1/nope'), 404, 'not_found');
    expectError(await request(app).get('/v2/categories'), 404, 'not_found');
    expectError(await request(app).delete('/v1/categories'), 404, 'not_found');
    expectError(await request(app).put('/v1/categories/1').send({ name: 'x' }), 404, 'not_found');
    expectError(await request(app).post('/v1/store/orders').send({}), 404, 'not_found');
  });

  it('never sends X-Powered-By', async () => {
    for (const res of [await request(app).get('/v1/categories'), await request(app).get('/nope'), await post({ name: '' })]) {
      expect(res.headers['x-powered-by']).toBeUndefined();
    }
  });
});

describe('store failures', () => {
  const failing: CategoryStore = {
    list: () => Promise.reject(new StoreUnavailableError(new Error('connect ECONNREFUSED 10.0.0.5:6379'))),
    get: () => Promise.reject(new StoreUnavailableError(new Error('connect ECONNREFUSED 10.0.0.5:6379'))),
    create: () => Promise.reject(new StoreUnavailableError(new Error('connect ECONNREFUSED 10.0.0.5:6379'))),
    ping: () => Promise.reject(new StoreUnavailableError(new Error('Command timed out'))),
    close: () => Promise.resolve(),
  };

  it('answers 503 service_unavailable without internal details', async () => {
    const down = buildPetstoreApp({ store: failing });
    for (const res of [
      await request(down).get('/v1/categories'),
      await request(down).get('/v1/categories/1'),
      await request(down).post('/v1/categories').send({ name: 'Dog' }),
      await request(down).get('/readyz'),
    ]) {
      expectError(res, 503, 'service_unavailable');
      expect(res.text).not.toContain('10.0.0.5');
      expect(res.text).not.toContain('ECONNREFUSED');
    }
  });

  it('still validates before touching the store', async () => {
    const down = buildPetstoreApp({ store: failing });
    expectError(await request(down).post('/v1/categories').send({}), 400, 'invalid_request', 'name: required');
  });

  it('answers 500 internal_error, with no stack, for an unexpected error', async () => {
    const broken = buildPetstoreApp({ store: { ...failing, list: () => Promise.reject(new Error('secret detail')) } });
    const res = await request(broken).get('/v1/categories');
    expectError(res, 500, 'internal_error');
    expect(res.text).not.toContain('secret detail');
  });
});
