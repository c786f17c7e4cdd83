// The events room's pure parts: the crossing rule at its boundaries, event ids, the CloudEvent's attributes, Standard
// Webhooks signatures verified by the package's own verify(), and the producer's drafts, dedupe and error handling
// (with a sink of the test's own; test/events-redis.test.ts has the Redis outbox).
import { randomBytes } from 'node:crypto';
import { channel } from 'node:diagnostics_channel';
import { describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { CHANNELS, type DecidedMessage, type DecidedWindow } from '../src/observability/catalogue.js';
import { crossed, crossings, periodOf } from '../src/events/thresholds.js';
import { cloudEventProblems, toCloudEvent } from '../src/events/cloudevent.js';
import { WebhookSigner } from '../src/events/signing.js';
import { decidedDrafts, deprecatedDraft, EventProducer, suspendedDraft } from '../src/events/producer.js';
import { eventIds, idPart, minuteStamp, subjectOf } from '../src/events/types.js';
import type { OutboxEntry } from '../src/events/outbox.js';
import { captureLogger } from './helpers/limits.js';

const DAY = 86_400_000;
const AT = Date.UTC(2026, 10, 29, 10, 15, 20, 500);

const day = (limit: number, used: number, extra: Partial<DecidedWindow> = {}): DecidedWindow => ({
  name: 'day',
  limit,
  used,
  resetMs: 3 * 3_600_000,
  mode: 'enforce',
  lengthMs: DAY,
  ...extra,
});
const minute = (limit: number, used: number): DecidedWindow => ({ name: 'minute', limit, used, resetMs: 30_000, mode: 'enforce', lengthMs: 60_000 });

function decided(windows: DecidedWindow[], extra: Partial<DecidedMessage> = {}): DecidedMessage {
  return { keyId: 'k1', plan: 'pro', outcome: 'admitted', cost: 1, windows, candidates: [], short: 0, banLevel: 0, retryMs: 0, at: AT, shared: true, ...extra };
}

describe('the crossing rule: used - cost < ceil(limit * p / 100) <= used', () => {
  it('the one request that reaches the threshold crosses it, not the one before nor after', () => {
    expect([79, 80, 81].map((used) => crossed(used, 1, 100, 80))).toEqual([false, true, false]);
    expect([99, 100].map((used) => crossed(used, 1, 100, 100))).toEqual([false, true]);
  });

  it('a cost above 1 jumping over a threshold crosses it (once), landing exactly on it too', () => {
    expect(crossed(83, 5, 100, 80)).toBe(true); // 78 -> 83
    expect(crossed(88, 5, 100, 80)).toBe(false); // 83 -> 88
    expect(crossed(80, 5, 100, 80)).toBe(true); // 75 -> 80
    expect(crossed(79, 5, 100, 80)).toBe(false); // 74 -> 79
    // A cost that jumps two thresholds crosses both.
    expect(crossings(decided([day(100, 100)], { cost: 25 }), [80, 100]).map((c) => c.percent)).toEqual([80, 100]);
  });

  it('thresholds round up: 80% of 7 is 6 (5.6), 100% is the limit itself', () => {
    expect(crossed(6, 1, 7, 80)).toBe(true);
    expect(crossed(5, 1, 7, 80)).toBe(false);
    expect(crossed(7, 1, 7, 100)).toBe(true);
  });

  it('refused requests never cross; minute windows never; a shadow window without room took nothing', () => {
    for (const outcome of ['limited', 'banned', 'banned_now', 'invalid_key'] as const)
      expect(crossings(decided([day(100, 80)], { outcome }), [80])).toEqual([]);
    expect(crossings(decided([minute(10, 8), day(1000, 8)]), [80])).toEqual([]);
    expect(crossings(decided([minute(10, 8), day(10, 8)]), [80]).map((c) => c.name)).toEqual(['day']);
    expect(crossings(decided([day(100, 100, { mode: 'shadow' })], { short: 1 }), [80, 100])).toEqual([]);
  });

  it('a window in shadow mode and a candidate limit cross their 100% as shadow crossings', () => {
    expect(crossings(decided([day(100, 100, { mode: 'shadow' })]), [80, 100]).map((c) => [c.kind, c.name, c.percent])).toEqual([['shadow', 'day', 100]]);
    const m = decided([minute(100, 1), day(1000, 500)], { candidates: [{ name: 'day:shadow', limit: 500, of: 1 }] });
    expect(crossings(m, [80, 100]).map((c) => [c.kind, c.name, c.limit, c.used])).toEqual([['shadow', 'day:shadow', 500, 500]]);
    expect(crossings({ ...m, windows: [minute(100, 1), day(1000, 501)] }, [80, 100])).toEqual([]);
    // A candidate on a minute window is never watched.
    expect(crossings(decided([minute(100, 50)], { candidates: [{ name: 'minute:shadow', limit: 50, of: 0 }] }), [100])).toEqual([]);
  });

  it("periods: a month's first day; a day window's end rounded to the minute", () => {
    expect(periodOf(day(100, 1), AT)).toBe(minuteStamp(AT + 3 * 3_600_000));
    expect(minuteStamp(Date.UTC(2026, 10, 29, 13, 15, 29))).toBe('20261129T1315Z');
    expect(minuteStamp(Date.UTC(2026, 10, 29, 13, 15, 31))).toBe('20261129T1316Z');
    expect(
      periodOf({ name: 'month', limit: 1, used: 1, resetMs: 1, mode: 'enforce', lengthMs: 1, endsAt: Date.UTC(2026, 11, 1), period: '2026-11-01' }, AT),
    ).toBe('2026-11-01');
  });
});

describe('event ids', () => {
  it('as the design names them, no "." anywhere', () => {
    expect(eventIds.threshold('key:k1', 'day', '20261129T1315Z', 80)).toBe('quota-threshold:key:k1:day:20261129T1315Z:80');
    expect(eventIds.shadowThreshold('consumer:acme', 'day:shadow', '2026-11-01')).toBe('quota-shadow-threshold:consumer:acme:day:shadow:2026-11-01');
    expect(eventIds.banned('k1', 2, 1_700_000_000_400)).toBe('key-banned:k1:2:1700000000');
    expect(eventIds.suspended('acme', 1_700_000_000_123)).toBe('consumer-suspended:acme:1700000000123');
    expect(eventIds.deprecated('key:k1', 'GET /v1/pets.json', '2026-11-29')).toBe('deprecated-called:key:k1:GET%20/v1/pets%2Ejson:2026-11-29');
    expect(eventIds.expiring('k1', 1_700_000_000_000)).toBe('key-expiring:k1:1700000000000');
    expect(idPart('a.b%c d')).toBe('a%2Eb%25c%20d');
    expect(subjectOf('k1')).toBe('key:k1');
    expect(subjectOf('k1', 'acme')).toBe('consumer:acme');
  });
});

describe('CloudEvents 1.0, structured mode', () => {
  it('has the required attributes (id, source, specversion, type) and the optional ones Tollgate sets, as JSON', () => {
    const [draft] = decidedDrafts(decided([day(100, 80)]), [80]);
    const ce = JSON.parse(JSON.stringify(toCloudEvent(draft!, 'urn:tollgate:prod'))) as Record<string, unknown>;
    expect(cloudEventProblems(ce)).toEqual([]);
    expect(Object.keys(ce).sort()).toEqual(['data', 'datacontenttype', 'id', 'source', 'specversion', 'subject', 'time', 'type']);
    expect(ce).toMatchObject({
      specversion: '1.0',
      source: 'urn:tollgate:prod',
      type: 'quota.threshold',
      subject: 'key:k1',
      time: new Date(AT).toISOString(),
      datacontenttype: 'application/json',
    });
    expect(cloudEventProblems({ ...ce, id: '' })).toEqual(['id: a required attribute, a non-empty string']);
    expect(cloudEventProblems({ ...ce, specversion: '0.3' })).toEqual(['specversion: expected "1.0"']);
    expect(cloudEventProblems({ ...ce, source: undefined })).toEqual(['source: a required attribute, a non-empty string']);
  });
});

describe('Standard Webhooks signatures', () => {
  it('every secret of a rotation signs; the package verifies with each, and refuses another secret or another body', () => {
    const secrets = [`whsec_${randomBytes(32).toString('base64')}`, `whsec_${randomBytes(24).toString('base64')}`];
    const body = JSON.stringify({ id: 'quota-threshold:key:k1:day:20261129T1315Z:80' });
    const headers = new WebhookSigner(secrets).headers('quota-threshold:key:k1:day:20261129T1315Z:80', body, new Date());
    expect(Object.keys(headers)).toEqual(['webhook-id', 'webhook-timestamp', 'webhook-signature']);
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    for (const s of headers['webhook-signature'].split(' ')) expect(s).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(headers['webhook-timestamp']).toMatch(/^\d+$/);
    for (const s of secrets) expect(new Webhook(s).verify(body, { ...headers })).toEqual(JSON.parse(body));
    expect(() => new Webhook(`whsec_${randomBytes(32).toString('base64')}`).verify(body, { ...headers })).toThrow();
    expect(() => new Webhook(secrets[0]!).verify(`${body} `, { ...headers })).toThrow();
  });
});

describe('the producer', () => {
  it("a crossing becomes quota.threshold with its id, subject and data; a key of a consumer is the consumer's, its cap its own", () => {
    const [d] = decidedDrafts(decided([minute(10, 1), day(100, 80)], { consumer: 'acme' }), [80, 100]);
    expect(d).toMatchObject({
      id: `quota-threshold:consumer:acme:day:${minuteStamp(AT + 3 * 3_600_000)}:80`,
      type: 'quota.threshold',
      subject: 'consumer:acme',
      consumer: 'acme',
      key: 'k1',
      plan: 'pro',
      percent: 80,
      data: { key: 'k1', consumer: 'acme', plan: 'pro', window: 'day', percent: 80, limit: 100, used: 80, threshold: 80 },
    });
    const [cap] = decidedDrafts(decided([day(1000, 5), day(10, 8, { name: 'key:day', cap: true })], { consumer: 'acme' }), [80]);
    expect(cap!.subject).toBe('key:k1');
    expect(cap!.id).toMatch(/^quota-threshold:key:k1:key:day:/);
  });

  it("memory's decisions cross nothing (another instance may cross the same in its own memory); a ban still is one", () => {
    expect(decidedDrafts(decided([day(100, 80)], { shared: false }), [80])).toEqual([]);
    const [b] = decidedDrafts(decided([day(100, 80)], { outcome: 'banned_now', banLevel: 2, retryMs: 600_000 }), [80]);
    expect(b).toMatchObject({
      id: `key-banned:k1:2:${Math.round((AT + 600_000) / 1000)}`,
      type: 'key.banned',
      subject: 'key:k1',
      data: { level: 2, seconds: 600 },
    });
  });

  it('consumer.suspended for a suspension only; deprecated.called names operation, sunset and successor', () => {
    expect(suspendedDraft({ consumer: 'acme', status: 'active', at: AT })).toBeUndefined();
    expect(suspendedDraft({ consumer: 'acme', status: 'deleted', at: AT })).toBeUndefined();
    expect(suspendedDraft({ consumer: 'acme', status: 'suspended', at: AT })).toMatchObject({ id: `consumer-suspended:acme:${AT}`, subject: 'consumer:acme' });
    expect(
      deprecatedDraft({
        keyId: 'k1',
        operation: 'listPets',
        route: 'GET /v1/pets',
        sunset: '2027-01-01T00:00:00.000Z',
        successor: 'https://x.example/v2',
        at: AT,
      }),
    ).toMatchObject({
      id: 'deprecated-called:key:k1:listPets:2026-11-29',
      data: { operation: 'listPets', route: 'GET /v1/pets', sunset: '2027-01-01T00:00:00.000Z', successor: 'https://x.example/v2', day: '2026-11-29' },
    });
  });

  it('subscribed: each event to the sink once; deprecated calls once per subject, operation and day from memory; a failing sink is logged, never thrown', async () => {
    const entries: OutboxEntry[] = [];
    let fail = false;
    const sink = {
      publish: async (e: OutboxEntry) => {
        if (fail) throw new Error('Command timed out');
        entries.push(e);
        return '1-0';
      },
    };
    const { logger, messages } = captureLogger('info');
    const producer = new EventProducer({ sink, source: 'urn:tollgate:test', thresholds: () => [80, 100], logger });
    producer.start();
    try {
      const decidedCh = channel(CHANNELS.decided);
      const deprecatedCh = channel(CHANNELS.deprecatedCalled);
      expect(decidedCh.hasSubscribers).toBe(true);
      decidedCh.publish(decided([day(100, 79)]));
      decidedCh.publish(decided([day(100, 80)]));
      for (let i = 0; i < 50; i++) deprecatedCh.publish({ keyId: 'k1', operation: 'GET /v1/old', route: 'GET /v1/old', at: AT + i });
      deprecatedCh.publish({ keyId: 'k1', operation: 'GET /v1/old', route: 'GET /v1/old', at: AT + DAY });
      await producer.settled();
      expect(entries.map((e) => e.type)).toEqual(['quota.threshold', 'deprecated.called', 'deprecated.called']);
      expect(entries[0]).toMatchObject({ consumer: '', key: 'k1', plan: 'pro', percent: '80' });
      expect(JSON.parse(entries[0]!.ce)).toMatchObject({ id: entries[0]!.id, source: 'urn:tollgate:test', type: 'quota.threshold' });
      fail = true;
      // The publisher's call returns normally; the failure is a log line.
      expect(() => decidedCh.publish(decided([day(100, 100)]))).not.toThrow();
      deprecatedCh.publish({ keyId: 'k2', operation: 'GET /v1/old', route: 'GET /v1/old', at: AT });
      await producer.settled();
      expect(messages().filter((m) => m === 'event not published')).toHaveLength(2);
      // Not in the outbox: the next call of the day tries again.
      fail = false;
      deprecatedCh.publish({ keyId: 'k2', operation: 'GET /v1/old', route: 'GET /v1/old', at: AT + 1 });
      await producer.settled();
      expect(entries.at(-1)!.id).toBe('deprecated-called:key:k2:GET%20/v1/old:2026-11-29');
    } finally {
      await producer.stop();
    }
    expect(channel(CHANNELS.decided).hasSubscribers).toBe(false);
  });

  it('the seen-set is bounded: past its size the oldest is forgotten', async () => {
    const ids: string[] = [];
    const producer = new EventProducer({
      sink: { publish: async (e) => (ids.push(e.id), '1-0') },
      source: 'urn:x:y',
      thresholds: () => [80],
      logger: captureLogger().logger,
      seenLimit: 2,
    });
    producer.start();
    try {
      const ch = channel(CHANNELS.deprecatedCalled);
      for (const k of ['a', 'b', 'c', 'a', 'c']) ch.publish({ keyId: k, operation: 'op', route: 'GET /x', at: AT });
      await producer.settled();
      expect(ids.map((i) => i.split(':')[2])).toEqual(['a', 'b', 'c', 'a']);
    } finally {
      await producer.stop();
    }
  });
});
