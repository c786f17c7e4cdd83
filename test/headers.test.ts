// Header formats Tollgate writes itself, against the RFC examples (RFC 9745, RFC 8594, RFC 9110, RFC 6750 and the IETF httpapi RateLimit draft).
import { describe, expect, it } from 'vitest';
import { generateKey } from '../src/keys/format.js';
import {
  H,
  bindingWindow,
  claimsGatewayHeader,
  connectionTokens,
  consumerMetadataHeader,
  forwardableMetadataValue,
  formatDeprecation,
  formatLink,
  formatRateLimitPolicy,
  formatRetryAfter,
  formatSunset,
  isSaneRequestId,
  setRateLimitHeaders,
  stripHopByHop,
} from '../src/http/headers.js';

const IMF_FIXDATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;

describe('formatDeprecation (RFC 9745)', () => {
  it('is @ and the Unix seconds of the instant, as in the RFC example', () => {
    expect(formatDeprecation(Date.parse('2023-06-30T23:59:59Z'))).toBe('@1688169599');
    expect(formatDeprecation(1_688_169_599_000)).toBe('@1688169599');
  });

  it('drops milliseconds rather than rounding up', () => {
    expect(formatDeprecation(1_688_169_599_999)).toBe('@1688169599');
    expect(formatDeprecation(Date.parse('2026-06-01T00:00:00Z'))).toBe('@1780272000');
    expect(formatDeprecation(0)).toBe('@0');
  });
});

describe('formatSunset (RFC 8594)', () => {
  it('is an IMF-fixdate', () => {
    expect(formatSunset(Date.parse('2027-06-01T00:00:00Z'))).toBe('Tue, 01 Jun 2027 00:00:00 GMT');
    expect(formatSunset(Date.parse('2026-01-01T00:00:00Z'))).toBe('Thu, 01 Jan 2026 00:00:00 GMT');
    // RFC 9110's own example.
    expect(formatSunset(Date.UTC(1994, 10, 6, 8, 49, 37))).toBe('Sun, 06 Nov 1994 08:49:37 GMT');
  });

  it('is always in GMT with two-digit day and time fields', () => {
    for (const iso of ['2027-06-01T02:00:00+02:00', '2030-12-31T23:59:59.999Z', '2026-03-09T07:05:03Z']) {
      expect(formatSunset(Date.parse(iso))).toMatch(IMF_FIXDATE);
    }
    expect(formatSunset(Date.parse('2027-06-01T02:00:00+02:00'))).toBe('Tue, 01 Jun 2027 00:00:00 GMT');
  });
});

describe('formatLink (RFC 8288)', () => {
  it('is <url>; rel="relation"', () => {
    expect(formatLink('https://example.com/docs/migrate-pets', 'deprecation')).toBe('<https://example.com/docs/migrate-pets>; rel="deprecation"');
    expect(formatLink('https://example.com/s', 'sunset')).toBe('<https://example.com/s>; rel="sunset"');
  });
});

describe('formatRetryAfter (RFC 9110 delay-seconds)', () => {
  it('is whole seconds, rounded up, at least 1', () => {
    const cases: Array<[number, string]> = [
      [0, '1'],
      [-5000, '1'],
      [1, '1'],
      [999, '1'],
      [1000, '1'],
      [1001, '2'],
      [59_500, '60'],
      [60_000, '60'],
      [3_600_000, '3600'],
    ];
    for (const [ms, want] of cases) expect(formatRetryAfter(ms), `${ms} ms`).toBe(want);
  });

  it('never has a fraction', () => {
    for (let ms = -10; ms < 5000; ms += 37) expect(formatRetryAfter(ms)).toMatch(/^[1-9]\d*$/);
  });
});

describe('isSaneRequestId', () => {
  it('accepts short ids of safe characters', () => {
    for (const id of ['abc', '0f8fad5b-d9cb-469f-a165-70867728950e', 'req.2026/06:01@edge+1=', 'a'.repeat(128), 'A_b-C']) {
      expect(isSaneRequestId(id), id).toBe(true);
    }
  });

  it('refuses empty, long, and anything that could break a log line or a header', () => {
    for (const id of [
      '',
      'a'.repeat(129),
      'has space',
      'line\nbreak',
      'cr\rlf',
      'tab\t',
      'quote"',
      "apos'",
      'semi;colon',
      'comma,',
      '<script>',
      'ünïcode',
      'back\\slash',
    ]) {
      expect(isSaneRequestId(id), JSON.stringify(id)).toBe(false);
    }
    for (const v of [undefined, null, 42, ['abc'], { id: 'abc' }]) expect(isSaneRequestId(v)).toBe(false);
  });

  it('refuses an id that holds something shaped like a key (tg_ and 20+ base62 characters), and keeps ids that only mention tg_', () => {
    const key = generateKey();
    for (const id of [key, `trace-${key}`, `${key.slice(0, 23)}`, `x/${key.slice(0, 30)}/y`]) expect(isSaneRequestId(id), id).toBe(false);
    for (const id of ['tg_', 'tg_short', `tg_${'a'.repeat(19)}`, 'TG_0123456789012345678901234', 'my-tg_trace']) expect(isSaneRequestId(id), id).toBe(true);
  });
});

describe('stripHopByHop (RFC 9110 §7.6.1)', () => {
  it('removes the standard hop-by-hop headers and keeps end-to-end ones (Trailer among them: RFC 9110 §6.6.2)', () => {
    const h: Record<string, unknown> = {
      connection: 'keep-alive',
      'keep-alive': 'timeout=5',
      te: 'trailers',
      'transfer-encoding': 'chunked',
      upgrade: 'websocket',
      'proxy-connection': 'keep-alive',
      'proxy-authorization': 'Basic dXNlcjpwYXNz',
      trailer: 'x-checksum',
      host: 'example.com',
      'content-type': 'application/json',
      'content-length': '12',
      authorization: 'Bearer k',
      'x-request-id': 'r1',
    };
    stripHopByHop(h);
    expect(h).toEqual({
      trailer: 'x-checksum',
      host: 'example.com',
      'content-type': 'application/json',
      'content-length': '12',
      authorization: 'Bearer k',
      'x-request-id': 'r1',
    });
  });

  it('removes every header the Connection header lists, case-insensitively and with odd spacing', () => {
    const h: Record<string, unknown> = { connection: 'X-Foo ,  x-bar,,Close', 'x-foo': '1', 'x-bar': '2', 'x-baz': '3', close: 'odd but listed' };
    stripHopByHop(h);
    expect(h).toEqual({ 'x-baz': '3' });
  });

  it('handles a Connection header that arrived more than once', () => {
    const h: Record<string, unknown> = { connection: ['x-one', 'x-two, keep-alive'], 'x-one': 'a', 'x-two': 'b', 'x-three': 'c' };
    stripHopByHop(h);
    expect(h).toEqual({ 'x-three': 'c' });
  });

  it('is harmless without a Connection header', () => {
    const h: Record<string, unknown> = { 'x-keep': 'yes' };
    stripHopByHop(h);
    expect(h).toEqual({ 'x-keep': 'yes' });
  });
});

describe('connectionTokens', () => {
  it('lists the extra header names Connection names, lower-cased, and none for the usual values', () => {
    for (const none of [undefined, 'keep-alive', 'Keep-Alive', ' keep-alive , te ', '', ['keep-alive']]) expect(connectionTokens(none)).toBeUndefined();
    // "close" is a connection option, but a header of that name would be listed too (RFC 9110 §7.6.1): same answer
    // however it is spelled.
    for (const close of ['close', 'CLOSE', ' close ', 'keep-alive, close']) expect(connectionTokens(close)).toEqual(new Set(['close']));
    expect(connectionTokens('keep-alive, X-Foo')).toEqual(new Set(['x-foo']));
    expect(connectionTokens(['Upgrade, x-a', 'X-B'])).toEqual(new Set(['x-a', 'x-b']));
    expect(connectionTokens('close, content-length')).toEqual(new Set(['close', 'content-length']));
  });
});

describe('header names', () => {
  it('are lower-case, as Node stores them', () => {
    for (const name of Object.values(H)) expect(name).toBe(name.toLowerCase());
    expect(H.requestId).toBe('x-request-id');
    expect(H.deprecation).toBe('deprecation');
    expect(H.sunset).toBe('sunset');
  });
});

describe('consumer metadata headers', () => {
  it('name a field X-Consumer-Metadata-<field>: lower-cased, _ and . written -, a token every backend keeps', () => {
    expect(consumerMetadataHeader('tier')).toBe('x-consumer-metadata-tier');
    expect(consumerMetadataHeader('billing_id')).toBe('x-consumer-metadata-billing-id');
    expect(consumerMetadataHeader('Stripe.Customer')).toBe('x-consumer-metadata-stripe-customer');
    expect(consumerMetadataHeader('a-B_c.9')).toBe('x-consumer-metadata-a-b-c-9');
    for (const f of ['x', 'billing_id', 'A.b-C_d']) expect(consumerMetadataHeader(f)).toMatch(/^x-consumer-metadata-[a-z0-9-]+$/);
  });

  it('carry a value only as it is: 1-256 characters of printable ASCII, no space at either end', () => {
    for (const v of ['cus_123', 'gold', 'a b', '~!@#$%^&*()[]{}"\\', 'x'.repeat(256)]) expect(forwardableMetadataValue(v), JSON.stringify(v)).toBe(true);
    const refused = [
      '',
      ' lead',
      'trail ',
      'x'.repeat(257),
      'a\r\nX-Injected: 1',
      'a\nb',
      'a\rb',
      'tab\there',
      'nul\u0000',
      'del\u007f',
      'Zürich',
      '東京',
      'é',
    ];
    for (const v of refused) expect(forwardableMetadataValue(v), JSON.stringify(v)).toBe(false);
    for (const v of [undefined, null, 42, {}]) expect(forwardableMetadataValue(v)).toBe(false);
  });

  it("a client's own X-Consumer-Metadata-* is the gateway's, in any spelling an upstream folds into it", () => {
    for (const name of ['x-consumer-metadata-tier', 'x_consumer_metadata_tier', 'x-consumer_metadata-billing_id', 'x-consumer-metadata-'])
      expect(claimsGatewayHeader(name), name).toBe(true);
    expect(claimsGatewayHeader('x-metadata-tier')).toBe(false);
  });
});

describe('RateLimit headers over a list of windows', () => {
  const capture = () => {
    const headers: Record<string, string> = {};
    return { headers, res: { setHeader: (n: string, v: string) => (headers[n] = v) } };
  };
  const w = (name: string, limit: number, remaining: number, windowSeconds: number) => ({
    name,
    limit,
    remaining,
    resetMs: windowSeconds * 500,
    windowSeconds,
  });

  it('the binding window is the one with the fewest points left; on a tie, the shorter; then the first listed', () => {
    const { headers, res } = capture();
    setRateLimitHeaders(res, [w('day', 1000, 5, 86_400), w('store:day', 50, 5, 86_400), w('store:minute', 10, 5, 60)], 'p', 0);
    expect(headers[H.rateLimitLimit]).toBe('10');
    expect(headers[H.rateLimitReset]).toBe('30');
    expect(bindingWindow([w('minute', 60, 7, 60), w('store:minute', 10, 7, 60)]).name).toBe('minute');
    expect(bindingWindow([w('minute', 60, 9, 60), w('day', 100, 2, 86_400)]).name).toBe('day');
  });

  it('lists every window in RateLimit and RateLimit-Policy, a name holding a quote or backslash escaped (RFC 8941 strings)', () => {
    const { headers, res } = capture();
    const windows = [w('minute', 60, 10, 60), w('/v1/a"b\\c:minute', 5, 0, 60)];
    setRateLimitHeaders(res, windows, formatRateLimitPolicy(windows), 0);
    expect(headers[H.rateLimit]).toBe('"minute";r=10;t=30, "/v1/a\\"b\\\\c:minute";r=0;t=30');
    expect(headers[H.rateLimitPolicy]).toBe('"minute";q=60;w=60, "/v1/a\\"b\\\\c:minute";q=5;w=60');
  });
});
