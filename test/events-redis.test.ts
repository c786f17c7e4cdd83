// The events outbox on a real redis-server (src/events/outbox.ts, lua/publish.lua): one entry per event id however
// often and however concurrently it is published, its fields as the dispatcher reads them, the seen marker's 40 days,
// the stream's bound; and the key.expiring pass (src/events/expiring.ts) publishing each expiry once.
import { describe, expect, it } from 'vitest';
import { RedisOutbox, outboxEntry, SEEN_TTL_MS } from '../src/events/outbox.js';
import { EventProducer } from '../src/events/producer.js';
import { toCloudEvent } from '../src/events/cloudevent.js';
import { expiringKeys, EXPIRING_WITHIN_MS } from '../src/events/expiring.js';
import { suspendedDraft } from '../src/events/producer.js';
import { Keyspace } from '../src/storage/keyspace.js';
import type { KeyRecord } from '../src/keys/types.js';
import type { RedisCommands } from '../src/storage/redis.js';
import { useStack } from './helpers/stack.js';
import { captureLogger } from './helpers/limits.js';

const stack = useStack({ redis: true, client: true, upstream: false });
let seq = 0;
const fresh = () => new Keyspace(`evt${++seq}:`);
const outboxOn = (ks: Keyspace, opts: { maxLen?: number } = {}) => new RedisOutbox(stack.client as unknown as RedisCommands, ks, opts);

const AT = Date.UTC(2026, 10, 29, 10, 0, 0);

describe('the outbox', () => {
  it('appends an event once: a second publish of its id appends nothing and says so', async () => {
    const ks = fresh();
    const outbox = outboxOn(ks);
    const draft = suspendedDraft({ consumer: 'acme', status: 'suspended', at: AT })!;
    const entry = outboxEntry(draft, toCloudEvent(draft, 'urn:tollgate:test'));
    const first = await outbox.publish(entry);
    expect(first).toMatch(/^\d+-\d+$/);
    expect(await outbox.publish(entry)).toBeNull();
    const rows = await stack.client.xrange(ks.eventsOutbox(), '-', '+');
    expect(rows).toHaveLength(1);
    expect(rows[0]![0]).toBe(first);
    // The fields in the contract's order, the CloudEvent as JSON text.
    expect(rows[0]![1]).toEqual([
      'id',
      `consumer-suspended:acme:${AT}`,
      'type',
      'consumer.suspended',
      'consumer',
      'acme',
      'key',
      '',
      'plan',
      '',
      'ce',
      entry.ce,
    ]);
    expect(ks.eventsOutbox()).toBe(`evt${seq}:events:{outbox}`);
    expect(ks.eventSeen(entry.id)).toBe(`evt${seq}:events:{outbox}:seen:consumer-suspended:acme:${AT}`);
    const ttl = await stack.client.pttl(ks.eventSeen(entry.id));
    expect(ttl).toBeGreaterThan(SEEN_TTL_MS - 60_000);
    expect(ttl).toBeLessThanOrEqual(SEEN_TTL_MS);
  });

  it('100 concurrent publishes of one id from two clients: one entry', async () => {
    const ks = fresh();
    const other = stack.client.duplicate();
    try {
      const outboxes = [outboxOn(ks), new RedisOutbox(other as unknown as RedisCommands, ks)];
      const draft = suspendedDraft({ consumer: 'acme', status: 'suspended', at: AT })!;
      const entry = outboxEntry(draft, toCloudEvent(draft, 'urn:x:y'));
      const results = await Promise.all(Array.from({ length: 100 }, (_, i) => outboxes[i % 2]!.publish(entry)));
      expect(results.filter((r) => r !== null)).toHaveLength(1);
      expect(await stack.client.xlen(ks.eventsOutbox())).toBe(1);
    } finally {
      other.disconnect();
    }
  });

  it('the stream is bounded (XADD MAXLEN ~): the oldest entries go', async () => {
    const ks = fresh();
    const outbox = outboxOn(ks, { maxLen: 10 });
    for (let i = 0; i < 500; i++) {
      const d = suspendedDraft({ consumer: `c${i}`, status: 'suspended', at: AT })!;
      await outbox.publish(outboxEntry(d, toCloudEvent(d, 'urn:x:y')));
    }
    // Approximate trimming removes whole nodes of the stream (100 entries by default).
    expect(await stack.client.xlen(ks.eventsOutbox())).toBeLessThanOrEqual(110);
  });
});

describe('key.expiring', () => {
  it('keys expiring within 7 days, active ones only, each expiry published once whatever the passes', async () => {
    const ks = fresh();
    const producer = new EventProducer({ sink: outboxOn(ks), source: 'urn:tollgate:test', thresholds: () => [80], logger: captureLogger().logger });
    const now = AT;
    const iso = (ms: number) => new Date(ms).toISOString();
    const keys: KeyRecord[] = [
      { id: 'soon', plan: 'pro', createdAt: iso(0), status: 'active', expiresAt: iso(now + 3_600_000), name: 'CI key', consumer: 'acme' },
      { id: 'edge', plan: 'free', createdAt: iso(0), status: 'active', expiresAt: iso(now + EXPIRING_WITHIN_MS) },
      { id: 'later', plan: 'free', createdAt: iso(0), status: 'active', expiresAt: iso(now + EXPIRING_WITHIN_MS + 1) },
      { id: 'past', plan: 'free', createdAt: iso(0), status: 'active', expiresAt: iso(now - 1) },
      { id: 'revoked', plan: 'free', createdAt: iso(0), status: 'revoked', expiresAt: iso(now + 1000) },
      { id: 'never', plan: 'free', createdAt: iso(0), status: 'active' },
    ];
    const records = {
      async *all() {
        yield keys.slice(0, 3);
        yield keys.slice(3);
      },
    };
    expect(await expiringKeys(now, { records, producer })).toEqual({ expiring: 2, published: 2 });
    expect(await expiringKeys(now, { records, producer })).toEqual({ expiring: 2, published: 0 });
    const rows = await stack.client.xrange(ks.eventsOutbox(), '-', '+');
    const ces = rows.map((r) => JSON.parse(r[1][r[1].indexOf('ce') + 1]!) as Record<string, unknown>);
    expect(ces.map((c) => [c.id, c.type, c.subject])).toEqual([
      [`key-expiring:soon:${now + 3_600_000}`, 'key.expiring', 'consumer:acme'],
      [`key-expiring:edge:${now + EXPIRING_WITHIN_MS}`, 'key.expiring', 'key:edge'],
    ]);
    expect(ces[0]!.data).toEqual({ key: 'soon', consumer: 'acme', name: 'CI key', plan: 'pro', expiresAt: iso(now + 3_600_000) });
    // A new expiry is a new event.
    keys[0] = { ...keys[0]!, expiresAt: iso(now + 2 * 3_600_000) };
    expect(await expiringKeys(now, { records, producer })).toEqual({ expiring: 2, published: 1 });
  });
});
