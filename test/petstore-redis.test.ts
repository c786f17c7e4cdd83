// Integration tests for the petstore on a private redis-server: unique ids across instances and
// restarts, ordering, key layout, and 503 (not 500, no hang) when Redis dies.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import request from 'supertest';
import { TestRedis } from './helpers/redis-server.js';
import { connectRedis } from '../src/storage/redis.js';
import { createLogger } from '../src/observability/logger.js';
import { buildPetstoreApp } from '../src/petstore/app.js';
import { RedisCategoryStore, type Category } from '../src/petstore/store.js';
import { startPetstore } from '../src/petstore/server.js';

const PREFIX = 'ptest:';
let redis: TestRedis;
const stores: RedisCategoryStore[] = [];

function newStore(): RedisCategoryStore {
  const store = new RedisCategoryStore(connectRedis({ url: redis.url, commandTimeoutMs: 2000, purpose: 'petstore' }), PREFIX);
  stores.push(store);
  return store;
}

beforeAll(async () => {
  redis = await TestRedis.start();
});

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await redis?.stop();
});

describe('RedisCategoryStore', () => {
  beforeEach(async () => {
    await redis.flush();
  });

  it('gives every category a unique id when two instances create concurrently', async () => {
    const a = buildPetstoreApp({ store: newStore() });
    const b = buildPetstoreApp({ store: newStore() });
    const posts = [];
    for (let i = 0; i < 50; i++) {
      posts.push(
        request(a)
          .post('/v1/categories')
          .send({ name: `a${i}` }),
      );
      posts.push(
        request(b)
          .post('/v1/categories')
          .send({ name: `b${i}` }),
      );
    }
    const results = await Promise.all(posts);
    for (const r of results) expect(r.status).toBe(201);
    const ids = results.map((r) => r.body.id as number);
    expect(new Set(ids).size).toBe(100);
    for (const r of results) expect(r.headers.location).toBe(`/v1/categories/${r.body.id}`);

    const listA = await request(a).get('/v1/categories');
    const listB = await request(b).get('/v1/categories');
    expect(listA.status).toBe(200);
    expect(listA.body).toHaveLength(100);
    expect(listB.body).toEqual(listA.body);
    const listed = (listA.body as Category[]).map((c) => c.id);
    expect(listed).toEqual([...ids].sort((x, y) => x - y));
    // Every created category is listed exactly as it was returned.
    const byId = new Map((listA.body as Category[]).map((c) => [c.id, c]));
    for (const r of results) expect(byId.get(r.body.id)).toEqual(r.body);
  });

  it('never reuses an id after a restart', async () => {
    const first = newStore();
    const before = [await first.create({ name: 'Dog' }), await first.create({ name: 'Cat', description: 'meow' })];
    await first.close();

    const second = newStore();
    const after = await second.create({ name: 'Rabbit' });
    expect(after.id).toBeGreaterThan(Math.max(...before.map((c) => c.id)));
    expect(await second.list()).toEqual([...before, after]);
    expect(await second.get(before[1]!.id)).toEqual({ id: before[1]!.id, name: 'Cat', description: 'meow' });
    expect(await second.get(9999)).toBeUndefined();
  });

  it('lists in id order, not insertion or name order, and trims names', async () => {
    const app = buildPetstoreApp({ store: newStore() });
    for (const name of ['  Zebra ', 'Ant', 'Mole']) {
      expect((await request(app).post('/v1/categories').send({ name })).status).toBe(201);
    }
    const res = await request(app).get('/v1/categories');
    expect(res.body.map((c: Category) => c.name)).toEqual(['Zebra', 'Ant', 'Mole']);
    const ids = res.body.map((c: Category) => c.id);
    expect(ids).toEqual([...ids].sort((x: number, y: number) => x - y));
  });

  it('keeps every key under the prefix', async () => {
    const store = newStore();
    await store.create({ name: 'Dog' });
    const c = redis.client();
    const keys = await c.keys('*');
    c.disconnect();
    expect(keys.length).toBeGreaterThan(0);
    for (const k of keys) expect(k.startsWith(`${PREFIX}petstore:`)).toBe(true);
  });

  it('readyz is ok while Redis answers', async () => {
    const res = await request(buildPetstoreApp({ store: newStore() })).get('/readyz');
    expect(res.status).toBe(200);
  });
});

describe('startPetstore', () => {
  it('listens on port 0, serves from Redis, and closes cleanly', async () => {
    await redis.flush();
    const running = await startPetstore({
      host: '127.0.0.1',
      port: 0,
      redis: { url: redis.url },
      prefix: PREFIX,
      logger: createLogger('silent'),
    });
    try {
      expect(running.port).toBeGreaterThan(0);
      expect(running.url).toBe(`http://127.0.0.1:${running.port}`);
      const created = await request(running.url).post('/v1/categories').send({ name: 'Dog' });
      expect(created.status).toBe(201);
      const list = await request(running.url).get('/v1/categories');
      expect(list.body).toEqual([created.body]);
    } finally {
      await running.close();
    }
    await expect(request(running.url).get('/healthz')).rejects.toThrow();
  });

  it('uses the memory store without a Redis URL', async () => {
    const running = await startPetstore({ host: '127.0.0.1', port: 0, logger: createLogger('silent') });
    try {
      expect((await request(running.url).post('/v1/categories').send({ name: 'Dog' })).body).toEqual({ id: 1, name: 'Dog' });
      expect((await request(running.url).get('/readyz')).status).toBe(200);
    } finally {
      await running.close();
    }
  });
});

describe('when Redis hangs', () => {
  it('answers 503 after the command timeout instead of waiting for ever', async () => {
    const app = buildPetstoreApp({ store: newStore(), logger: createLogger('silent') });
    expect((await request(app).get('/readyz')).status).toBe(200);
    redis.pause();
    try {
      const started = Date.now();
      const [list, ready] = await Promise.all([request(app).get('/v1/categories'), request(app).get('/readyz')]);
      expect(Date.now() - started).toBeLessThan(4000);
      expect(list.status).toBe(503);
      expect(list.body.code).toBe('service_unavailable');
      expect(ready.status).toBe(503);
    } finally {
      redis.resume();
    }
    expect((await request(app).get('/v1/categories')).status).toBe(200);
  });
});

// Last: it kills the private Redis.
describe('when Redis dies', () => {
  it('answers 503 service_unavailable within a few seconds, never 500, and recovers', async () => {
    await redis.flush();
    const app = buildPetstoreApp({ store: newStore(), logger: createLogger('silent') });
    expect((await request(app).post('/v1/categories').send({ name: 'Dog' })).status).toBe(201);

    await redis.kill();
    const started = Date.now();
    const answers = await Promise.all([
      request(app).get('/v1/categories'),
      request(app).get('/v1/categories/1'),
      request(app).post('/v1/categories').send({ name: 'Cat' }),
      request(app).get('/readyz'),
    ]);
    expect(Date.now() - started).toBeLessThan(5000);
    for (const res of answers) {
      expect(res.status).toBe(503);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body).toEqual({ code: 'service_unavailable', message: expect.any(String), status: 503 });
      expect(res.text).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|\.ts:\d+/);
    }
    // Liveness does not depend on Redis.
    expect((await request(app).get('/healthz')).status).toBe(200);
    // Validation errors are still 400: they never reach the store.
    expect((await request(app).post('/v1/categories').send({})).status).toBe(400);

    await redis.startProcess();
    const deadline = Date.now() + 5000;
    let ready = 0;
    while (Date.now() < deadline) {
      ready = (await request(app).get('/readyz')).status;
      if (ready === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(ready).toBe(200);
    expect((await request(app).post('/v1/categories').send({ name: 'Cat' })).status).toBe(201);
  });
});
