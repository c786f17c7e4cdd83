// The events section (src/config/sections/events.ts): its defaults, the secrets as Standard Webhooks reads them, http(s)
// URLs only, event types from the catalogue, unknown fields refused, and the rule that events need Redis.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../src/config/load.js';
import { defaultEventSource } from '../src/config/schema.js';

const REDIS = { url: 'redis://127.0.0.1:6379' };
const secret = (bytes = 32) => `whsec_${randomBytes(bytes).toString('base64')}`;

function errorsOf(events: unknown, redis: unknown = REDIS): string[] {
  const r = validateConfig({ ...(redis ? { redis } : {}), events });
  return r.ok ? [] : r.errors;
}

describe('events', () => {
  it('fills the defaults: thresholds 80 and 100, no webhooks, every type, an id from the url, the queue bound', () => {
    const r = validateConfig({ redis: REDIS, events: { webhooks: [{ url: 'https://hooks.example.com/t', secret: secret() }] } });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const e = r.config.events!;
    expect(e.thresholds).toEqual([80, 100]);
    expect(e.allowTargets).toEqual([]);
    expect(e.queue).toEqual({ maxPerEndpoint: 10_000 });
    expect(e.source).toBeUndefined();
    expect(e.metering).toBeUndefined();
    expect(e.webhooks[0]!.id).toMatch(/^cfg-[0-9a-f]{12}$/);
    expect(e.webhooks[0]!.types).toEqual([
      'quota.threshold',
      'quota.shadow_threshold',
      'key.banned',
      'consumer.suspended',
      'deprecated.called',
      'key.expiring',
    ]);
    // The same url, the same id: stable across restarts and instances.
    const again = validateConfig({ redis: REDIS, events: { webhooks: [{ url: 'https://hooks.example.com/t', secret: secret() }] } });
    expect(again.ok && again.config.events!.webhooks[0]!.id).toBe(e.webhooks[0]!.id);
  });

  it('metering: format, every, graceMinutes and headers by default; to is a URL or a file path', () => {
    const r = validateConfig({ redis: REDIS, events: { metering: { to: '/var/lib/tollgate/usage.jsonl' } } });
    expect(r.ok && r.config.events!.metering).toEqual({
      to: '/var/lib/tollgate/usage.jsonl',
      format: 'cloudevents',
      every: 300,
      graceMinutes: 10,
      headers: {},
      recheckHours: 48,
      lago: { code: 'tollgate_requests', subscriptionField: 'lagoSubscriptionId' },
      stripe: { eventName: 'tollgate_requests', customerField: 'stripeCustomerId' },
    });
    expect(errorsOf({ metering: { to: 'https://openmeter.example.com/api/v1/events', format: 'openmeter', headers: { authorization: 'Bearer x' } } })).toEqual(
      [],
    );
    expect(errorsOf({ metering: { to: 'ftp://example.com/x' } }).join('\n')).toMatch(/events\.metering\.to.*http:\/\/ or https:\/\/ URL, or a file path/);
    expect(errorsOf({ metering: { to: '/x', format: 'csv' } }).join('\n')).toMatch(/events\.metering\.format/);
  });

  it('needs redis', () => {
    expect(errorsOf({}, null).join('\n')).toMatch(/events: events need a redis section/);
    expect(errorsOf({})).toEqual([]);
  });

  it('secret or secrets, exactly one; each whsec_ and base64 of 24 to 64 bytes', () => {
    const url = 'https://hooks.example.com/t';
    expect(errorsOf({ webhooks: [{ url }] }).join('\n')).toMatch(/events\.webhooks\[0\]: expected secret or secrets/);
    expect(errorsOf({ webhooks: [{ url, secret: secret(), secrets: [secret()] }] }).join('\n')).toMatch(/give secret or secrets, not both/);
    expect(errorsOf({ webhooks: [{ url, secrets: [secret(), secret(24), secret(64)] }] })).toEqual([]);
    expect(errorsOf({ webhooks: [{ url, secret: randomBytes(32).toString('base64') }] }).join('\n')).toMatch(/starting whsec_/);
    expect(errorsOf({ webhooks: [{ url, secret: secret(23) }] }).join('\n')).toMatch(/base64 of 24 to 64 bytes/);
    expect(errorsOf({ webhooks: [{ url, secret: secret(65) }] }).join('\n')).toMatch(/base64 of 24 to 64 bytes/);
    expect(errorsOf({ webhooks: [{ url, secret: 'whsec_not base64 at all!!!!!!!!!!!!!!!!' }] }).join('\n')).toMatch(/base64 of 24 to 64 bytes/);
    expect(errorsOf({ webhooks: [{ url, secrets: [] }] }).join('\n')).toMatch(/secrets/);
  });

  it('urls http(s) only; types from the catalogue; unknown fields refused; ids unique', () => {
    const s = secret();
    expect(errorsOf({ webhooks: [{ url: 'ftp://example.com/x', secret: s }] }).join('\n')).toMatch(
      /events\.webhooks\[0\]\.url: expected an http:\/\/ or https:\/\/ URL/,
    );
    expect(errorsOf({ webhooks: [{ url: 'https://a.example/', secret: s, types: ['quota.exceeded'] }] }).join('\n')).toMatch(
      /events\.webhooks\[0\]\.types\[0\]/,
    );
    expect(errorsOf({ webhooks: [{ url: 'https://a.example/', secret: s, header: 'x' }] }).join('\n')).toMatch(/header/);
    expect(errorsOf({ webhook: [] }).join('\n')).toMatch(/webhook/);
    expect(errorsOf({ webhooks: [{ url: 'https://a.example/', secret: s, filter: { consumer: ['acme'] } }] }).join('\n')).toMatch(/consumer/);
    expect(
      errorsOf({
        webhooks: [
          { url: 'https://a.example/', secret: s },
          { url: 'https://a.example/', secret: s },
        ],
      }).join('\n'),
    ).toMatch(/events\.webhooks\[1\]\.id: duplicate webhook id/);
    expect(
      errorsOf({
        webhooks: [
          { id: 'one', url: 'https://a.example/', secret: s, filter: { consumers: ['acme'], plans: ['pro'] } },
          { id: 'two', url: 'https://a.example/', secret: s },
        ],
      }),
    ).toEqual([]);
  });

  it('thresholds 1..100, each once; allowTargets CIDRs; source a URI', () => {
    expect(errorsOf({ thresholds: [0] }).join('\n')).toMatch(/events\.thresholds\[0\]/);
    expect(errorsOf({ thresholds: [101] }).join('\n')).toMatch(/events\.thresholds\[0\]/);
    expect(errorsOf({ thresholds: [50, 50] }).join('\n')).toMatch(/each percent once/);
    expect(errorsOf({ thresholds: [50, 90, 100], allowTargets: ['127.0.0.0/8', 'fd00::/8'], source: 'urn:tollgate:prod' })).toEqual([]);
    expect(errorsOf({ allowTargets: ['127.0.0.1'] }).join('\n')).toMatch(/CIDR/);
    expect(errorsOf({ allowTargets: ['10.0.0.0/33'] }).join('\n')).toMatch(/CIDR/);
    expect(errorsOf({ source: 'not a uri' }).join('\n')).toMatch(/events\.source/);
  });

  it('the default source names the Redis prefix', () => {
    expect(defaultEventSource('tollgate:')).toBe('urn:tollgate:tollgate');
    expect(defaultEventSource('prod:')).toBe('urn:tollgate:prod');
    expect(defaultEventSource('')).toBe('urn:tollgate:tollgate');
    expect(defaultEventSource(undefined)).toBe('urn:tollgate:tollgate');
  });
});
