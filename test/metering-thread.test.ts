// The continuous metering export on the events thread (src/workers/events-worker.ts with events.metering): started
// with the thread, it sends the ledger's closed hours to the destination every `every` seconds, from its checkpoint, so
// hours that close or change later follow on the next runs; stopping the thread stops it.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { events as eventsSection } from '../src/config/sections/events.js';
import { RedisKeyStore } from '../src/keys/redis-store.js';
import { keySubject } from '../src/limits/subject.js';
import { Metrics } from '../src/observability/metrics.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { connectRedis, type RedisConnection } from '../src/storage/redis.js';
import { hourOfDay } from '../src/usage/store.js';
import { HOUR_MS, dayOf } from '../src/util/time.js';
import { EventsThread, eventsThreadData } from '../src/workers/events-thread.js';
import { OpenMeterReceiver } from './helpers/metering-receivers.js';
import { TestRedis } from './helpers/redis-server.js';
import { waitFor } from './helpers/wait.js';

const PREFIX = 'mt:';
const ks = new Keyspace(PREFIX);
let redis: TestRedis;
let conn: RedisConnection;
let om: OpenMeterReceiver;

beforeAll(async () => {
  redis = await TestRedis.start();
  conn = connectRedis({ url: redis.url, commandTimeoutMs: 2000, purpose: 'cli' });
  om = await new OpenMeterReceiver().start();
});

afterAll(async () => {
  await om?.close();
  await conn?.close();
  await redis?.stop();
});

describe('metering on the events thread', () => {
  it('exports every `every` seconds from the checkpoint: the closed hours, then a late change as a correction', async () => {
    const base = Math.floor(Date.now() / HOUR_MS) * HOUR_MS;
    const c = redis.client();
    await new RedisKeyStore(conn, ks).create({
      id: 'k1',
      plan: 'free',
      createdAt: new Date().toISOString(),
      status: 'active',
      hash: createHash('sha256').update('k1').digest('hex'),
    });
    const at = (hours: number) => base - hours * HOUR_MS;
    const bump = (hourMs: number, n: number) => c.hincrby(ks.usageDay(keySubject('k1'), dayOf(hourMs)), `a${hourOfDay(hourMs)}`, n);
    await bump(at(2), 5);
    await bump(at(3), 7);
    const config = eventsSection.parse({ source: 'urn:tollgate:thread-test', metering: { to: `${om.url}/api/v1/events`, format: 'openmeter', every: 1 } });
    const data = eventsThreadData(config, { topology: { url: redis.url }, prefix: PREFIX, commandTimeoutMs: 5000 }, 'silent', { retentionDays: 35 });
    const metrics = new Metrics();
    const thread = new EventsThread(data, metrics);
    thread.start();
    try {
      await waitFor(async () => om.events.size === 2, 'both hours exported', 30_000);
      expect([...om.events.values()].map((e) => e.id).sort()).toEqual([
        `k1:${new Date(at(3)).toISOString().slice(0, 13)}`,
        `k1:${new Date(at(2)).toISOString().slice(0, 13)}`,
      ]);
      await bump(at(2), 1);
      await waitFor(async () => om.events.size === 3, 'the correction exported', 30_000);
      // Each run's figures reach the main thread's metrics.
      await waitFor(
        async () => /tollgate_metering_events_total\{destination="openmeter-[0-9a-f]{12}",kind="correction"\} 1/.test(await metrics.registry.metrics()),
        'the correction counted',
        10_000,
      );
      const text = await metrics.registry.metrics();
      expect(text).toMatch(/tollgate_metering_events_total\{destination="openmeter-[0-9a-f]{12}",kind="hour"\} 2/);
      // The mark: the end of the last closed hour (the run may have read it just before an hour closed).
      const mark = Number(/tollgate_metering_mark_seconds\{destination="openmeter-[0-9a-f]{12}"\} (\d+)/.exec(text)?.[1]);
      const closedNow = Math.floor((Date.now() - 10 * 60_000) / HOUR_MS) * 3600;
      expect([closedNow, closedNow - 3600]).toContain(mark);
      expect(text).toMatch(/tollgate_metering_runs_total\{destination="openmeter-[0-9a-f]{12}",outcome="complete"\} [1-9]/);
      const correction = [...om.events.values()].find((e) => e.id.endsWith(':correction:1'))!;
      expect(correction).toMatchObject({ source: 'urn:tollgate:thread-test', subject: 'key:k1', data: { admitted: 1, totals: { admitted: 6 } } });
    } finally {
      await thread.stop();
      c.disconnect();
    }
    expect(thread.running).toBe(false);
    // Stopped: a change now is not sent.
    const requests = om.requests.length;
    const after = redis.client();
    await after.hincrby(ks.usageDay(keySubject('k1'), dayOf(at(3))), `a${hourOfDay(at(3))}`, 1);
    after.disconnect();
    await new Promise((r) => setTimeout(r, 2000));
    expect(om.requests.length).toBe(requests);
  });
});
