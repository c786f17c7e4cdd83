// Webhook delivery end to end (src/events/dispatcher.ts, attempt.ts, endpoint-queue.ts): outbox entries written to a
// redis-server of this file's own, a dispatcher with short retry delays, and receivers listening on loopback that
// check every delivery's signature with the standardwebhooks package itself (never Tollgate's code). Every wait is
// bounded (waitFor), every receiver and dispatcher stopped after its test.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  configuredEndpoint,
  endpointTakes,
  registeredEndpoint,
  Dispatcher,
  recordDeliveryCounts,
  type DeliveryCounts,
  type DeliveryEndpoint,
  type DispatcherOptions,
} from '../src/events/dispatcher.js';
import { EndpointRegistry, RedisEndpointStore } from '../src/events/endpoints.js';
import { RedisOutbox } from '../src/events/outbox.js';
import { Metrics } from '../src/observability/metrics.js';
import { AddressGuard } from '../src/outbound/address-guard.js';
import { OutboundClient } from '../src/outbound/client.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { connectRedis, type RedisConnection } from '../src/storage/redis.js';
import { freePort, TestRedis } from './helpers/redis-server.js';
import { waitFor } from './helpers/wait.js';

let redis: TestRedis;
let connection: RedisConnection;
let client: OutboundClient;
let run = 0;
const stops: Array<() => Promise<void>> = [];

beforeAll(async () => {
  redis = await TestRedis.start();
  connection = connectRedis({ url: redis.url, commandTimeoutMs: 5000, purpose: 'cli' });
  await connection.waitForReady(10_000);
  client = new OutboundClient();
});

afterEach(async () => {
  // Dispatchers first (their attempts end), then the receivers.
  for (const stop of stops.splice(0).reverse()) await stop();
});

afterAll(async () => {
  await client?.close();
  await connection?.close();
  await redis?.stop();
});

const secret = (): string => `whsec_${randomBytes(32).toString('base64')}`;

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
  path: string;
}

/** A webhook receiver on loopback; `answer` decides each response (204 by default). */
class Receiver {
  readonly received: Received[] = [];
  answer: (req: IncomingMessage, res: ServerResponse, body: string) => void = (_req, res) => res.writeHead(204).end();
  private server: Server | undefined;
  private constructor(readonly port: number) {}

  static async start(port?: number, listen = true): Promise<Receiver> {
    const r = new Receiver(port ?? (await freePort()));
    stops.push(() => r.close());
    if (listen) await r.listen();
    return r;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  async listen(): Promise<void> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        this.received.push({ headers: req.headers, body, at: Date.now(), path: req.url ?? '' });
        this.answer(req, res, body);
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    expect((server.address() as AddressInfo).port).toBe(this.port);
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  /** The events received whose signature one of these secrets verifies (each alone), by CloudEvent id. */
  verifiedIds(secretToUse: string): string[] {
    return this.received.map((r) => (new Webhook(secretToUse).verify(r.body, r.headers as Record<string, string>) as { id: string }).id);
  }
}

interface Setup {
  ks: Keyspace;
  counts: DeliveryCounts[];
  dispatcher: (over?: Partial<DispatcherOptions>) => Dispatcher;
  publish: (e: { id: string; type?: string; consumer?: string; key?: string; plan?: string; percent?: number }) => Promise<string>;
}

/** A keyspace of its own (a new prefix per test), its outbox writer, and dispatchers on it. */
function setup(endpoints: DeliveryEndpoint[]): Setup {
  const ks = new Keyspace(`dl${++run}:`);
  const counts: DeliveryCounts[] = [];
  let instance = 0;
  const dispatcher = (over: Partial<DispatcherOptions> = {}): Dispatcher => {
    const d = new Dispatcher({
      redis: connection.client,
      keyspace: ks,
      endpoints,
      poster: client,
      consumerName: `test-${++instance}`,
      schedule: { delaysMs: [300, 300, 300, 300, 300], minSpanMs: 0 },
      pollMs: 100,
      countsEveryMs: 100,
      attemptTimeoutMs: 3000,
      onCounts: (c) => counts.push(...c),
      ...over,
    });
    d.start();
    stops.push(() => d.stop());
    return d;
  };
  const publish: Setup['publish'] = async (e) => {
    const type = e.type ?? 'quota.threshold';
    const ce = {
      specversion: '1.0',
      id: e.id,
      source: 'urn:tollgate:test',
      type,
      subject: e.consumer ? `consumer:${e.consumer}` : `key:${e.key ?? 'k1'}`,
      time: new Date().toISOString(),
      datacontenttype: 'application/json',
      data: { percent: e.percent ?? 80 },
    };
    // The producer's own outbox writer: the stream entry exactly as the gateway writes it.
    const added = await new RedisOutbox(connection.client, ks).publish({
      id: e.id,
      type,
      consumer: e.consumer ?? '',
      key: e.key ?? 'k1',
      plan: e.plan ?? 'pro',
      ce: JSON.stringify(ce),
      ...(type === 'quota.threshold' ? { percent: String(e.percent ?? 80) } : {}),
    });
    if (!added) throw new Error(`${e.id} was published before`);
    return added;
  };
  return { ks, counts, dispatcher, publish };
}

const total = (counts: DeliveryCounts[], endpoint: string, what: 'delivered' | 'failed' | 'dropped'): number =>
  counts.filter((c) => c.endpoint === endpoint).reduce((n, c) => n + c[what], 0);

describe('webhook delivery', () => {
  it('delivers signed CloudEvents to every endpoint whose types and filter match, and counts them', async () => {
    const a = await Receiver.start();
    const b = await Receiver.start();
    const mine = await Receiver.start();
    const sa = secret();
    const sb = secret();
    const sm = secret();
    const epA = configuredEndpoint({ id: 'all', url: a.url, secret: sa });
    const epB = configuredEndpoint({ id: 'acme-banned', url: b.url, secrets: [sb], types: ['key.banned'], filter: { consumers: ['acme'], plans: ['pro'] } });
    const s = setup([epA, epB]);
    // A consumer's registered endpoint: only its own events, only its own thresholds, through the address guard.
    const c = redis.client();
    await c.hset(s.ks.eventEndpoints(), 'reg-1', JSON.stringify({ consumer: 'globex', url: mine.url, secrets: [sm], thresholds: [100] }));
    c.disconnect();
    const metrics = new Metrics();
    s.dispatcher({
      guard: new AddressGuard({ allow: ['127.0.0.0/8'] }),
      onCounts: (counts) => (s.counts.push(...counts), recordDeliveryCounts(metrics, counts)),
    });

    await s.publish({ id: 'e1', type: 'quota.threshold', consumer: 'acme', percent: 80 });
    await s.publish({ id: 'e2', type: 'key.banned', consumer: 'acme', plan: 'pro' });
    await s.publish({ id: 'e3', type: 'key.banned', consumer: 'acme', plan: 'free' });
    await s.publish({ id: 'e4', type: 'quota.threshold', consumer: 'globex', percent: 80 });
    await s.publish({ id: 'e5', type: 'quota.threshold', consumer: 'globex', percent: 100 });
    await waitFor(() => a.received.length === 5 && b.received.length === 1 && mine.received.length === 1, 'every delivery', 15_000);

    expect(a.verifiedIds(sa).sort()).toEqual(['e1', 'e2', 'e3', 'e4', 'e5']);
    expect(b.verifiedIds(sb)).toEqual(['e2']);
    expect(mine.verifiedIds(sm)).toEqual(['e5']);
    for (const r of a.received) {
      expect(r.headers['content-type']).toBe('application/cloudevents+json');
      expect(r.headers['webhook-id']).toBe((JSON.parse(r.body) as { id: string }).id);
      expect(Math.abs(Number(r.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(30);
    }
    expect(() => new Webhook(sb).verify(a.received[0]!.body, a.received[0]!.headers as Record<string, string>)).toThrow();
    // Counts are reported every countsEveryMs; the queue length as each endpoint's next claim sees it.
    const expected = [
      'delivered_total{endpoint="all"} 5',
      'delivered_total{endpoint="acme-banned"} 1',
      'delivered_total{endpoint="reg-1"} 1',
      'queued{endpoint="all"} 0',
    ];
    await waitFor(
      async () => {
        const text = await metrics.registry.metrics();
        return expected.every((line) => text.includes(`tollgate_events_${line}`));
      },
      'the metrics',
      5_000,
    );
  });

  it('refuses a registered endpoint outside allowTargets, says so, and keeps the event for later', async () => {
    const r = await Receiver.start();
    const s = setup([]);
    const c = redis.client();
    await c.hset(s.ks.eventEndpoints(), 'reg-2', JSON.stringify({ consumer: 'acme', url: r.url, secret: secret() }));
    c.disconnect();
    const d = s.dispatcher({ guard: new AddressGuard({ allow: [] }) });
    await s.publish({ id: 'x1', consumer: 'acme' });
    await waitFor(async () => ((await d.queueOf('reg-2').stats()).lastError ?? '').includes('address refused'), 'the refusal recorded', 10_000);
    const stats = await d.queueOf('reg-2').stats();
    expect(stats.lastError).toMatch(/address refused: .*loopback.*retried, as the address may change/);
    expect(stats.queued).toBe(1);
    expect(r.received).toEqual([]);
  });

  it('delivers again once a receiver that was down is back, and across a dispatcher restart', async () => {
    const r = await Receiver.start(undefined, false);
    const key = secret();
    const s = setup([configuredEndpoint({ id: 'flaky', url: r.url, secret: key })]);
    const first = s.dispatcher({ schedule: { delaysMs: [200, 400, 800, 1_000, 1_000, 1_000, 1_000, 1_000, 1_000], minSpanMs: 0 } });
    await s.publish({ id: 'r1' });
    await waitFor(async () => ((await first.queueOf('flaky').stats()).lastError ?? '').startsWith('connect'), 'a refused connection recorded', 10_000);
    // The first dispatcher stops with r1 still queued; r2 is written while no dispatcher runs.
    await first.stop();
    await s.publish({ id: 'r2' });
    await r.listen();
    s.dispatcher({ schedule: { delaysMs: [200, 400, 800, 1_000, 1_000, 1_000, 1_000, 1_000, 1_000], minSpanMs: 0 } });
    await waitFor(() => r.received.length >= 2, 'both delivered by the new dispatcher', 20_000);
    expect(r.verifiedIds(key).sort()).toEqual(['r1', 'r2']);
    const c = redis.client();
    try {
      // Every outbox entry acknowledged: nothing pending in the group.
      const pending = (await c.xpending(s.ks.eventsOutbox(), 'dispatch')) as [number, ...unknown[]];
      expect(pending[0]).toBe(0);
    } finally {
      c.disconnect();
    }
  });

  it('sends an event again once the lease of an instance stopped mid-attempt ends, and ignores the late outcome of that attempt', async () => {
    const r = await Receiver.start();
    // The first attempt gets no answer at all; later ones are accepted.
    r.answer = (_req, res) => (r.received.length === 1 ? undefined : res.writeHead(204).end());
    const key = secret();
    const s = setup([configuredEndpoint({ id: 'leased', url: r.url, secret: key })]);
    const a = s.dispatcher({ leaseMs: 2_000, attemptTimeoutMs: 5_000, stopTimeoutMs: 50 });
    await s.publish({ id: 'l1' });
    await waitFor(() => r.received.length === 1, 'the first attempt under way', 10_000);
    // The instance stops without waiting for its attempt: the event stays leased to it for 2 s from its claim.
    await a.stop();
    const b = s.dispatcher({ leaseMs: 2_000 });
    await waitFor(() => r.received.length === 2, 'sent again by the other instance', 10_000);
    // The claim came a little before the request arrived: the lease's 2 s less that.
    expect(r.received[1]!.at - r.received[0]!.at).toBeGreaterThanOrEqual(1_500);
    expect(r.verifiedIds(key)).toEqual(['l1', 'l1']);
    await waitFor(async () => (await b.queueOf('leased').stats()).delivered === 1, 'delivered', 5_000);
    // The first attempt times out (5 s) after its lease was taken over: its retry is not recorded.
    await new Promise((res) => setTimeout(res, 5_000 - (Date.now() - r.received[0]!.at) + 300));
    expect(await b.queueOf('leased').stats()).toMatchObject({ queued: 0, delivered: 1 });
    expect(r.received).toHaveLength(2);
  });

  it('takes over an outbox entry another instance read and never acknowledged', async () => {
    const r = await Receiver.start();
    const key = secret();
    const s = setup([configuredEndpoint({ id: 'takeover', url: r.url, secret: key })]);
    const id = await s.publish({ id: 't1' });
    const c = redis.client();
    try {
      // A dead instance's read: in the group's pending list under its name, never acknowledged.
      await c.xgroup('CREATE', s.ks.eventsOutbox(), 'dispatch', '0');
      await c.xreadgroup('GROUP', 'dispatch', 'dead-instance', 'COUNT', 10, 'STREAMS', s.ks.eventsOutbox(), '>');
      s.dispatcher({ claimIdleMs: 500 });
      await waitFor(() => r.received.length === 1, 'the entry taken over and delivered', 15_000);
      expect(r.verifiedIds(key)).toEqual(['t1']);
      await waitFor(async () => ((await c.xpending(s.ks.eventsOutbox(), 'dispatch')) as [number])[0] === 0, 'acknowledged', 5_000);
      expect(id).toMatch(/^\d+-\d+$/);
    } finally {
      c.disconnect();
    }
  });

  it('disables an endpoint that answers 410, sends it nothing more, and delivers once enabled', async () => {
    const r = await Receiver.start();
    r.answer = (_req, res) => res.writeHead(410).end();
    const key = secret();
    const s = setup([configuredEndpoint({ id: 'gone', url: r.url, secret: key })]);
    const d = s.dispatcher();
    await s.publish({ id: 'g1' });
    await waitFor(async () => (await d.queueOf('gone').stats()).disabled, 'disabled', 10_000);
    await s.publish({ id: 'g2' });
    await waitFor(async () => (await d.queueOf('gone').stats()).queued === 2, 'g2 queued', 5_000);
    await new Promise((res) => setTimeout(res, 800));
    expect(r.received.length).toBe(1);
    const stats = await d.queueOf('gone').stats();
    expect(stats).toMatchObject({ disabled: true, disabledReason: 'the receiver answered 410 Gone', lastStatus: 410 });
    expect(stats.lastError).toMatch(/410/);
    r.answer = (_req, res) => res.writeHead(200).end('ok');
    await d.queueOf('gone').enable();
    await waitFor(() => r.received.length === 3, 'both delivered after enable', 10_000);
    expect(r.verifiedIds(key).slice(1).sort()).toEqual(['g1', 'g2']);
  });

  it('treats a 302 as a failure and never requests its Location', async () => {
    const elsewhere = await Receiver.start();
    const r = await Receiver.start();
    r.answer = (_req, res) => res.writeHead(302, { location: elsewhere.url }).end();
    const s = setup([configuredEndpoint({ id: 'moved', url: r.url, secret: secret() })]);
    const d = s.dispatcher({ schedule: { delaysMs: [200], minSpanMs: 0 } });
    await s.publish({ id: 'm1' });
    await waitFor(async () => (await d.queueOf('moved').stats()).dead === 1, 'given up after its attempts', 10_000);
    expect(r.received.length).toBe(2);
    expect(elsewhere.received).toEqual([]);
    const stats = await d.queueOf('moved').stats(5);
    expect(stats.lastError).toBe(`HTTP 302: redirects are not followed (Location: ${elsewhere.url})`);
    expect(stats.recentDead[0]).toMatchObject({ id: 'm1', attempts: 2, lastStatus: 302 });
    await waitFor(() => total(s.counts, 'moved', 'failed') === 1, 'counted failed', 5_000);
  });

  it('waits as long as a 429 Retry-After asks', async () => {
    const r = await Receiver.start();
    r.answer = (_req, res) => (r.received.length === 1 ? res.writeHead(429, { 'retry-after': '2' }).end() : res.writeHead(204).end());
    const s = setup([configuredEndpoint({ id: 'busy', url: r.url, secret: secret() })]);
    // The schedule's own delay would be 200 ms: the receiver's 2 s is what counts.
    s.dispatcher({ schedule: { delaysMs: [200, 200], minSpanMs: 0 } });
    await s.publish({ id: 'b1' });
    await waitFor(() => r.received.length === 2, 'the second attempt', 15_000);
    const gap = r.received[1]!.at - r.received[0]!.at;
    expect(gap).toBeGreaterThanOrEqual(1_900);
    expect(gap).toBeLessThan(4_000);
  });

  it('keeps delivering to one endpoint while another hangs', async () => {
    const hang = await Receiver.start();
    hang.answer = () => {}; // never answers
    const fine = await Receiver.start();
    const key = secret();
    const s = setup([configuredEndpoint({ id: 'hangs', url: hang.url, secret: secret() }), configuredEndpoint({ id: 'fine', url: fine.url, secret: key })]);
    // Its attempts end at attemptTimeoutMs (3 s here): the other endpoint's events must not wait for that.
    const d = s.dispatcher();
    const started = Date.now();
    for (let i = 0; i < 8; i++) await s.publish({ id: `h${i}` });
    await waitFor(() => fine.received.length === 8, 'every event at the endpoint that answers', 5_000);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(fine.verifiedIds(key)).toHaveLength(8);
    // The hanging endpoint holds 4 attempts at most, each ended at attemptTimeoutMs.
    expect(hang.received.length).toBeLessThanOrEqual(4);
    await waitFor(async () => ((await d.queueOf('hangs').stats()).lastError ?? '').startsWith('timeout'), 'the timeouts recorded', 10_000);
    expect((await d.queueOf('hangs').stats()).lastError).toBe('timeout: no complete answer within 3 s');
  });

  it('rests an endpoint whose attempts all fail, tries one event at a time, and delivers everything once it answers', async () => {
    const r = await Receiver.start();
    r.answer = (_req, res) => res.writeHead(500).end();
    const key = secret();
    const s = setup([configuredEndpoint({ id: 'down', url: r.url, secret: key })]);
    // Each event would be tried every 100 ms, 30 times: without the rest, 40 events make hundreds of attempts a second.
    const d = s.dispatcher({ schedule: { delaysMs: Array<number>(30).fill(100), minSpanMs: 0 }, backoffMs: 400, maxBackoffMs: 800 });
    await d.queueOf('down').disable('filled first', Date.now());
    for (let i = 0; i < 40; i++) await s.publish({ id: `b${i}` });
    await waitFor(async () => (await d.queueOf('down').stats()).enqueued === 40, 'all forty queued', 10_000);
    await d.queueOf('down').enable();
    await waitFor(() => r.received.length >= 4, 'the first attempts', 5_000);
    await sleep(2_000);
    // 4 failures in a row (each failure frees a place that is filled again until the 4th, so up to 3 more are in flight
    // then), then one event after 400 ms and after every 800 ms: 7 + 3 at most in these 2 s, against hundreds.
    expect(r.received.length).toBeGreaterThanOrEqual(5);
    expect(r.received.length).toBeLessThanOrEqual(7 + 4);
    expect(await d.queueOf('down').stats()).toMatchObject({ queued: 40, failed: 0 });
    r.answer = (_req, res) => res.writeHead(204).end();
    // The next probe is delivered; then the endpoint is sent its events 4 at a time again.
    await waitFor(async () => (await d.queueOf('down').stats()).delivered === 40, 'every event delivered once the endpoint answers', 10_000);
    expect(new Set(r.verifiedIds(key)).size).toBe(40);
    expect(await d.queueOf('down').stats()).toMatchObject({ queued: 0, failed: 0 });
  });

  it('retries a delivery whose connection was reset', async () => {
    const r = await Receiver.start();
    r.answer = (req, res) => (r.received.length === 1 ? req.socket.destroy() : res.writeHead(204).end());
    const key = secret();
    const s = setup([configuredEndpoint({ id: 'reset', url: r.url, secret: key })]);
    const d = s.dispatcher();
    await s.publish({ id: 'z1' });
    await waitFor(() => r.received.length === 2, 'tried again', 10_000);
    expect(r.verifiedIds(key)).toEqual(['z1', 'z1']);
    await waitFor(async () => (await d.queueOf('reset').stats()).delivered === 1, 'settled', 5_000);
    expect((await d.queueOf('reset').stats()).lastError).toMatch(/^reset: /);
  });

  it('drops the oldest events past the queue bound, and counts them', async () => {
    const r = await Receiver.start();
    const key = secret();
    const s = setup([configuredEndpoint({ id: 'small', url: r.url, secret: key })]);
    const d = s.dispatcher({ maxPerEndpoint: 3 });
    await d.queueOf('small').disable('paused by the test', Date.now());
    for (let i = 0; i < 5; i++) await s.publish({ id: `q${i}` });
    await waitFor(async () => (await d.queueOf('small').stats()).enqueued === 5, 'all five queued', 10_000);
    expect(await d.queueOf('small').stats()).toMatchObject({ queued: 3, dropped: 2 });
    await waitFor(() => total(s.counts, 'small', 'dropped') === 2, 'the drops reported', 5_000);
    await d.queueOf('small').enable();
    await waitFor(() => r.received.length === 3, 'the three newest delivered', 10_000);
    expect(r.verifiedIds(key).sort()).toEqual(['q2', 'q3', 'q4']);
  });

  it('replays a dead event', async () => {
    const r = await Receiver.start();
    r.answer = (_req, res) => res.writeHead(500).end();
    const key = secret();
    const s = setup([configuredEndpoint({ id: 'replay', url: r.url, secret: key })]);
    const d = s.dispatcher({ schedule: { delaysMs: [100], minSpanMs: 0 } });
    await s.publish({ id: 'd1' });
    await waitFor(async () => (await d.queueOf('replay').stats()).dead === 1, 'dead', 10_000);
    expect(await d.queueOf('replay').stats(1)).toMatchObject({ failed: 1, queued: 0, lastError: 'HTTP 500', recentDead: [{ id: 'd1', attempts: 2 }] });
    r.answer = (_req, res) => res.writeHead(204).end();
    expect(await d.queueOf('replay').replay(Date.now(), 'd1')).toBe(1);
    await waitFor(() => r.received.length === 3, 'delivered after the replay', 10_000);
    expect(r.verifiedIds(key)).toEqual(['d1', 'd1', 'd1']);
    await waitFor(async () => (await d.queueOf('replay').stats()).delivered === 1, 'settled', 5_000);
    expect(await d.queueOf('replay').stats()).toMatchObject({ dead: 0, queued: 0, delivered: 1 });
  });

  it('signs with every secret during a rotation, each verifying alone', async () => {
    const r = await Receiver.start();
    const fresh = secret();
    const old = secret();
    const s = setup([configuredEndpoint({ id: 'rotating', url: r.url, secrets: [fresh, old] })]);
    s.dispatcher();
    await s.publish({ id: 'k1' });
    await waitFor(() => r.received.length === 1, 'delivered', 10_000);
    expect(r.verifiedIds(fresh)).toEqual(['k1']);
    expect(r.verifiedIds(old)).toEqual(['k1']);
    expect(String(r.received[0]!.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(() => r.verifiedIds(secret())).toThrow();
  });
});

describe('a registration or deletion on the admin API', () => {
  it('takes effect at once: an event 100 ms after a registration reaches the new endpoint, one 100 ms after its deletion does not', async () => {
    const r = await Receiver.start();
    const s = setup([]);
    const guard = new AddressGuard({ allow: ['127.0.0.0/8'] });
    // The admin API's registry, on a connection of its own (as another instance's would be).
    const registry = new EndpointRegistry(new RedisEndpointStore(connection.client, s.ks), { clock: { now: () => Date.now() }, guard: () => guard });
    // The periodic re-read is out of the picture: only the change message can make the dispatcher see the endpoint.
    s.dispatcher({ guard, registryFeed: connection, registeredEveryMs: 600_000 });
    const c = redis.client();
    await waitFor(
      async () => ((await c.pubsub('NUMSUB', s.ks.eventEndpointsChanged())) as [string, number])[1] === 1,
      'the dispatcher listening for registry changes',
      5_000,
    );
    c.disconnect();

    const { endpoint, secret: key } = await registry.register('acme', { url: r.url }, { by: 'test' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await s.publish({ id: 'after-register', consumer: 'acme' });
    await waitFor(() => r.received.length === 1, 'the event at the endpoint registered 100 ms before it', 5_000);
    expect(r.verifiedIds(key)).toEqual(['after-register']);

    await registry.remove('acme', endpoint.id, { by: 'test' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await s.publish({ id: 'after-delete', consumer: 'acme' });
    // Long enough for a delivery (the first one took well under this), short of the periodic re-read by far.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(r.verifiedIds(key)).toEqual(['after-register']);
  });
});

describe('which endpoints an outbox entry goes to', () => {
  const entry = { streamId: '1-0', id: 'e', type: 'quota.threshold', consumer: 'acme', key: 'k1', plan: 'pro', percent: 80, ce: '{}' };

  it('matches types and every filter list given (consumers, plans, keys)', () => {
    const ep = (over: Partial<DeliveryEndpoint>): DeliveryEndpoint => ({ id: 'x', url: 'http://127.0.0.1/', secrets: ['s'], ...over });
    expect(endpointTakes(ep({}), entry)).toBe(true);
    expect(endpointTakes(ep({ types: ['key.banned'] }), entry)).toBe(false);
    expect(endpointTakes(ep({ filter: { consumers: ['acme'], plans: ['pro'], keys: ['k1'] } }), entry)).toBe(true);
    expect(endpointTakes(ep({ filter: { consumers: ['acme'], keys: ['k2'] } }), entry)).toBe(false);
    expect(endpointTakes(ep({ filter: { plans: ['free'] } }), entry)).toBe(false);
    // A registered endpoint: its own consumer's events only, its own thresholds only.
    expect(endpointTakes(ep({ consumer: 'globex' }), entry)).toBe(false);
    expect(endpointTakes(ep({ consumer: 'acme', thresholds: [80] }), entry)).toBe(true);
    expect(endpointTakes(ep({ consumer: 'acme', thresholds: [100] }), entry)).toBe(false);
    expect(endpointTakes(ep({ consumer: 'acme', thresholds: [100] }), { ...entry, type: 'key.banned', percent: undefined })).toBe(true);
  });

  it('reads a registered endpoint record, and refuses one delivery could not use', () => {
    expect(registeredEndpoint('r1', JSON.stringify({ consumer: 'acme', url: 'https://x.example/h', secret: 'whsec_a', types: ['key.banned'] }))).toEqual({
      id: 'r1',
      url: 'https://x.example/h',
      secrets: ['whsec_a'],
      consumer: 'acme',
      types: ['key.banned'],
      thresholds: undefined,
    });
    for (const [id, json] of [
      ['r1', 'not json'],
      ['r1', JSON.stringify({ url: 'https://x.example/h', secret: 'whsec_a' })],
      ['r1', JSON.stringify({ consumer: 'acme', url: 'https://x.example/h' })],
      ['r{1}', JSON.stringify({ consumer: 'acme', url: 'https://x.example/h', secret: 'whsec_a' })],
    ] as const)
      expect(registeredEndpoint(id, json)).toBeUndefined();
  });
});
