// The diagnostics_channel catalogue (src/observability/catalogue.ts): a subscriber sees each fact with its fields, from
// the place that knows it: the key limits' decision, consumer administration, the deprecated route's policy stage. An
// in-process gateway on the in-memory store in front of a loopback upstream.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import request from 'supertest';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { CHANNELS, type ChannelName, type ConsumerChangedMessage, type DecidedMessage, type DeprecatedCalledMessage } from '../src/observability/catalogue.js';
import { deprecatedMessage } from '../src/pipeline/stages/policy.js';
import { compileRoutes } from '../src/routing/routes.js';
import { useStack } from './helpers/stack.js';
import { testConfig } from './helpers/gateway.js';
import { startLimitsGateway, type LimitsGateway } from './helpers/limits.js';

const stack = useStack({ upstream: true });
let gw: LimitsGateway;
const listeners: Array<[ChannelName, (m: unknown) => void]> = [];

function listen<T>(name: ChannelName): T[] {
  const seen: T[] = [];
  const fn = (m: unknown) => seen.push(m as T);
  subscribe(name, fn);
  listeners.push([name, fn]);
  return seen;
}

beforeAll(async () => {
  gw = await startLimitsGateway(
    testConfig({
      upstream: { url: stack.up.url },
      plans: { tiny: { perMinute: 3, perDay: 100 } },
      routes: [
        {
          method: 'GET',
          path: '/v1/old',
          deprecation: '2026-01-01T00:00:00Z',
          sunset: '2099-01-01T00:00:00Z',
          successor: 'https://example.com/v2/new',
        },
        { method: 'GET', path: '/v1/costly', cost: 2 },
      ],
    }),
  );
});
afterAll(async () => gw?.close());
afterEach(() => {
  for (const [name, fn] of listeners.splice(0)) unsubscribe(name, fn);
});

describe('limits.decided', () => {
  it('each keyed decision, with the windows as they stand after it and the request cost', async () => {
    const seen = listen<DecidedMessage>(CHANNELS.decided);
    const k = await gw.createKey({ plan: 'tiny' });
    const statuses: number[] = [];
    statuses.push((await request(gw.url).get('/v1/costly').set('authorization', `Bearer ${k.key}`)).status);
    statuses.push((await request(gw.url).get('/v1/costly').set('authorization', `Bearer ${k.key}`)).status);
    expect(statuses).toEqual([200, 429]);
    expect(seen).toHaveLength(2);
    const [first, second] = seen as [DecidedMessage, DecidedMessage];
    expect(first).toMatchObject({ keyId: k.id, plan: 'tiny', outcome: 'admitted', cost: 2, short: 0, banLevel: 0, shared: false, candidates: [] });
    expect(first.consumer).toBeUndefined();
    expect(first.windows.map((w) => [w.name, w.limit, w.used, w.mode, w.lengthMs])).toEqual([
      ['minute', 3, 2, 'enforce', 60_000],
      ['day', 100, 2, 'enforce', 86_400_000],
    ]);
    expect(first.windows[1]!.resetMs).toBeGreaterThan(86_000_000);
    expect(Math.abs(first.at - Date.now())).toBeLessThan(10_000);
    expect(second).toMatchObject({ outcome: 'limited', cost: 2, short: 1 });
    expect(second.retryMs).toBeGreaterThan(0);
  });

  it('a request with no subscriber publishes nothing (the channel has none)', async () => {
    const { channel } = await import('node:diagnostics_channel');
    expect(channel(CHANNELS.decided).hasSubscribers).toBe(false);
    const k = await gw.createKey({ plan: 'tiny' });
    expect((await request(gw.url).get('/v1/x').set('authorization', `Bearer ${k.key}`)).status).toBe(200);
  });
});

describe('consumer.changed', () => {
  it('suspended, active again, deleted; a suspension of a suspended consumer says nothing', async () => {
    const seen = listen<ConsumerChangedMessage>(CHANNELS.consumerChanged);
    const { consumer } = await gw.gateway.consumerAdmin.create({ id: 'acme', name: 'Acme', plan: 'tiny' });
    await gw.gateway.consumerAdmin.suspend(consumer.id);
    await gw.gateway.consumerAdmin.suspend(consumer.id);
    await gw.gateway.consumerAdmin.resume(consumer.id);
    await gw.gateway.consumerAdmin.delete(consumer.id);
    expect(seen.map((m) => [m.consumer, m.status])).toEqual([
      ['acme', 'suspended'],
      ['acme', 'active'],
      ['acme', 'deleted'],
    ]);
    for (const m of seen) expect(typeof m.at).toBe('number');
  });
});

describe('deprecated.called', () => {
  it('a keyed call of a deprecated route: "METHOD /pattern", its sunset and successor', async () => {
    const seen = listen<DeprecatedCalledMessage>(CHANNELS.deprecatedCalled);
    const k = await gw.createKey({ plan: 'tiny' });
    const res = await request(gw.url).get('/v1/old').set('authorization', `Bearer ${k.key}`);
    expect(res.status).toBe(200);
    expect(res.headers.deprecation).toBeDefined();
    expect((await request(gw.url).get('/v1/other').set('authorization', `Bearer ${k.key}`)).status).toBe(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      keyId: k.id,
      operation: 'GET /v1/old',
      route: 'GET /v1/old',
      sunset: '2099-01-01T00:00:00.000Z',
      successor: 'https://example.com/v2/new',
    });
    expect(seen[0]!.consumer).toBeUndefined();
  });

  it('an operation with an operationId is named by it', () => {
    const [route] = compileRoutes([{ method: 'GET', path: '/v1/pets', operationId: 'listPets', deprecated: true, afterSunset: 'pass', cost: 1 }]);
    expect(deprecatedMessage(route!, 'GET /v1/pets', 'k1', 'acme', 5)).toEqual({
      keyId: 'k1',
      consumer: 'acme',
      operation: 'listPets',
      route: 'GET /v1/pets',
      at: 5,
    });
  });
});
