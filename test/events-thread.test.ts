// The events thread (src/workers/events-thread.ts, events-worker.ts; the build's copy in dist/): webhook delivery on a
// worker thread of its own, its counters reported to the main thread's Prometheus metrics, and a clean stop.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metrics } from '../src/observability/metrics.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { EventsThread, eventsThreadData } from '../src/workers/events-thread.js';
import { events as eventsSection } from '../src/config/sections/events.js';
import { freePort, TestRedis } from './helpers/redis-server.js';
import { waitFor } from './helpers/wait.js';

let redis: TestRedis;
let server: Server;
let port: number;
const received: Array<{ headers: IncomingHttpHeaders; body: string }> = [];
let th1Attempts = 0;

beforeAll(async () => {
  redis = await TestRedis.start();
  port = await freePort();
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      received.push({ headers: req.headers, body });
      // th-1's first attempt fails (500): the thread tries it again.
      const firstOfTh1 = (JSON.parse(body) as { id: string }).id === 'th-1' && ++th1Attempts === 1;
      res.writeHead(firstOfTh1 ? 500 : 204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await redis?.stop();
});

describe('events thread', () => {
  it('delivers from a thread of its own and reports its counts to the main thread', async () => {
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const config = eventsSection.parse({ webhooks: [{ id: 'thread-hook', url: `http://127.0.0.1:${port}/hook`, secret }] });
    const data = eventsThreadData(config, { topology: { url: redis.url }, prefix: 'th:', commandTimeoutMs: 5000 }, 'silent');
    data.tuning = { delaysMs: [200], pollMs: 100, attemptTimeoutMs: 3000 };
    const metrics = new Metrics();
    const thread = new EventsThread(data, metrics);
    thread.start();
    try {
      const c = redis.client();
      const ks = new Keyspace('th:');
      for (const id of ['th-1', 'th-2']) {
        const ce = JSON.stringify({
          specversion: '1.0',
          id,
          source: 'urn:tollgate:test',
          type: 'key.banned',
          subject: 'key:k1',
          time: new Date().toISOString(),
          data: {},
        });
        await c.xadd(ks.eventsOutbox(), '*', 'id', id, 'type', 'key.banned', 'consumer', '', 'key', 'k1', 'plan', 'free', 'ce', ce);
      }
      c.disconnect();
      await waitFor(
        async () => (await metrics.registry.metrics()).includes('tollgate_events_delivered_total{endpoint="thread-hook"} 2'),
        'both counted',
        30_000,
      );
      expect(received).toHaveLength(3);
      const ids = received.map((r) => (new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as { id: string }).id);
      expect(ids.sort()).toEqual(['th-1', 'th-1', 'th-2']);
    } finally {
      await thread.stop();
    }
    expect(thread.running).toBe(false);
  });
});
