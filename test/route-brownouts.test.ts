// A route's successor and brownouts (docs: "Routing", Deprecation, successors and brownouts). The successor is one
// more link in the route's Link header (rel="successor-version"), encoded like `link`; during a brownout the route
// answers 410 gone as a retired one does (message naming the brownout's end and the sunset, the backend never called,
// Deprecation/Sunset/Link still sent) and outside it is served. Time is the gateway's clock (a ManualClock here),
// never the wall clock: the brownouts below are years away from now.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseInterval } from '../src/config/iso-interval.js';
import { validateConfig } from '../src/config/load.js';
import { ManualClock } from '../src/util/clock.js';
import { assertBuilt, runCli, tempDir } from './helpers/cli.js';
import { startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';
import { TestUpstream } from './helpers/upstream.js';

const SUNSET = '2031-06-01T00:00:00Z';
const clock = new ManualClock(Date.parse('2031-01-01T00:00:00Z'));
let up: TestUpstream;
let gw: TestGateway;

const pets = {
  method: 'GET',
  path: '/v1/pets/:id',
  deprecation: '2030-06-01T00:00:00Z',
  sunset: SUNSET,
  afterSunset: 'gone',
  link: 'https://docs.example.com/migrate',
  successor: '/v2/pets/{id}',
  brownouts: ['2031-03-01T14:00:00Z/PT1H', 'P1D/2031-05-02T00:00:00Z', '2031-03-01T14:30:00Z/2031-03-01T16:00:00Z'],
};

beforeAll(async () => {
  assertBuilt();
  up = await TestUpstream.start();
  gw = await startTestGateway(
    testConfig({
      upstream: { url: up.url },
      routes: [
        pets,
        { path: '/v1/orders', successor: 'https://api.example.com/v2/orders?x=a b,c;d' },
        { path: '/v1/toys', sunset: SUNSET, successor: 'https://api.example.com/v2/toys', brownouts: ['2031-03-01T14:00:00Z/PT1H'] },
        { path: '/v1/plain' },
        { path: '/v1/breakout', successor: '/v2/x>;rel="alternate",<https://evil.example/' },
      ],
    }),
    { clock },
  );
});

afterAll(async () => {
  await gw?.close();
  await up?.close();
});

async function get(path: string): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
  const res = await fetch(`${gw.url}${path}`, { signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text.startsWith('{') ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

describe('a route successor', () => {
  it('joins the deprecation link in one Link header, rel="successor-version", a path as a path', async () => {
    clock.set(Date.parse('2031-01-01T00:00:00Z'));
    const r = await get('/v1/pets/1');
    expect(r.status).toBe(200);
    expect(r.headers.get('link')).toBe('<https://docs.example.com/migrate>; rel="deprecation", </v2/pets/%7Bid%7D>; rel="successor-version"');
  });

  it('is sent on a route without deprecation, percent-encoded so that it stays one link', async () => {
    const r = await get('/v1/orders');
    expect(r.status).toBe(200);
    expect(r.headers.get('link')).toBe('<https://api.example.com/v2/orders?x=a%20b%2Cc%3Bd>; rel="successor-version"');
    expect(r.headers.get('deprecation')).toBeNull();
  });

  it('a path crafted to close the link and open another stays one link on this host', async () => {
    const r = await get('/v1/breakout');
    expect(r.headers.get('link')).toBe('</v2/x%3E%3Brel=%22alternate%22%2C%3Chttps://evil.example/>; rel="successor-version"');
  });

  it('config check refuses what is neither an http(s) URL nor a single-slash path, naming the field', () => {
    for (const successor of ['javascript:alert(1)', 'ftp://x.example/y', 'v2/pets', '//evil.example/x', '/\\evil.example', '/\n/evil.example', '/a b', '']) {
      const r = validateConfig({ routes: [{ path: '/v1/ok' }, { path: '/v1/x', successor }] });
      expect(r.ok, JSON.stringify(successor)).toBe(false);
      if (!r.ok)
        expect(r.errors.join('\n'), JSON.stringify(successor)).toMatch(
          /^routes\[1\]\.successor: (expected an http:\/\/ or https:\/\/ URL, or a path|a successor path starts with a single \/)/m,
        );
    }
    expect(
      validateConfig({
        routes: [
          { path: '/v1/x', successor: 'HTTPS://api.example.com/v2' },
          { path: '/v1/y', successor: '/v2/y?a=1#b' },
        ],
      }).ok,
    ).toBe(true);
  });
});

describe('brownouts', () => {
  it('inside an interval: 410 gone naming its end and the sunset, headers sent, the backend not called', async () => {
    clock.set(Date.parse('2031-03-01T14:10:00Z'));
    const before = up.seen.length;
    const r = await get('/v1/pets/7');
    expect(r.status).toBe(410);
    // Two overlapping brownouts (14:00 + PT1H and 14:30-16:00) are one: served again at 16:00.
    expect(r.body).toEqual({
      code: 'gone',
      status: 410,
      message: 'GET /v1/pets/:id is browned out until 2031-03-01T16:00:00.000Z: it will be retired on 2031-06-01T00:00:00.000Z; move to /v2/pets/%7Bid%7D.',
    });
    expect(r.headers.get('retry-after')).toBe(String(110 * 60));
    expect(r.headers.get('deprecation')).toBe(`@${Date.parse('2030-06-01T00:00:00Z') / 1000}`);
    expect(r.headers.get('sunset')).toBe('Sun, 01 Jun 2031 00:00:00 GMT');
    expect(r.headers.get('link')).toContain('rel="successor-version"');
    expect(up.seen.length).toBe(before);
  });

  it('at its end, before its start and between intervals: served', async () => {
    for (const at of ['2031-03-01T16:00:00Z', '2031-03-01T13:59:59.999Z', '2031-04-30T23:59:59Z', '2031-05-02T00:00:00Z']) {
      clock.set(Date.parse(at));
      const before = up.seen.length;
      const r = await get('/v1/pets/7');
      expect(r.status, at).toBe(200);
      expect(r.headers.get('retry-after')).toBeNull();
      expect(up.seen.length).toBe(before + 1);
    }
  });

  it('a <duration>/<end> interval: 410 within the day before its end', async () => {
    clock.set(Date.parse('2031-05-01T00:00:00Z'));
    const r = await get('/v1/pets/7');
    expect(r.status).toBe(410);
    expect(r.body.message).toContain('browned out until 2031-05-02T00:00:00.000Z');
  });

  it('afterSunset: pass names the sunset, not a retirement; the successor URL in the message', async () => {
    clock.set(Date.parse('2031-03-01T14:59:59Z'));
    const r = await get('/v1/toys');
    expect(r.status).toBe(410);
    expect(r.body.message).toBe(
      'GET /v1/toys is browned out until 2031-03-01T15:00:00.000Z: its sunset is 2031-06-01T00:00:00.000Z; move to https://api.example.com/v2/toys.',
    );
    expect(r.headers.get('retry-after')).toBe('1');
  });

  it('after the sunset the retirement answers, one decision: "was retired", no Retry-After', async () => {
    clock.set(Date.parse(SUNSET));
    const r = await get('/v1/pets/7');
    expect(r.status).toBe(410);
    expect(r.body.message).toBe('GET /v1/pets/:id was retired at 2031-06-01T00:00:00.000Z.');
    expect(r.headers.get('retry-after')).toBeNull();
    // afterSunset: pass keeps serving after the sunset.
    expect((await get('/v1/toys')).status).toBe(200);
  });

  it('a route without brownouts or sunset is served whatever the clock says', async () => {
    clock.set(Date.parse('2031-03-01T14:10:00Z'));
    expect((await get('/v1/plain')).status).toBe(200);
  });
});

describe('brownouts in the config', () => {
  const route = (extra: Record<string, unknown>) => ({ routes: [{ path: '/v1/ok' }, { path: '/v1/pets', ...extra }] });
  const errorsOf = (raw: Record<string, unknown>): string[] => {
    const r = validateConfig(raw);
    return r.ok ? [] : r.errors;
  };

  it.each([
    ['no sunset', { brownouts: ['2031-03-01T14:00:00Z/PT1H'] }, /^routes\[1\]\.brownouts: brownouts need a sunset date/],
    [
      'ending after the sunset',
      { sunset: SUNSET, brownouts: ['2031-03-01T14:00:00Z/PT1H', '2031-05-31T23:00:00Z/PT2H'] },
      /^routes\[1\]\.brownouts\[1\]: the brownout ends at 2031-06-01T01:00:00\.000Z, after the route's sunset \(2031-06-01T00:00:00\.000Z\)/,
    ],
    [
      'end before start',
      { sunset: SUNSET, brownouts: ['2031-03-01T15:00:00Z/2031-03-01T14:00:00Z'] },
      /^routes\[1\]\.brownouts\[0\]: the interval must end after it starts/,
    ],
    ['an empty duration', { sunset: SUNSET, brownouts: ['2031-03-01T15:00:00Z/PT0S'] }, /^routes\[1\]\.brownouts\[0\]: the interval must end after it starts/],
    ['malformed', { sunset: SUNSET, brownouts: ['2031-03-01T14:00:00Z'] }, /^routes\[1\]\.brownouts\[0\]: expected an ISO 8601 interval/],
    ['a date without time', { sunset: SUNSET, brownouts: ['2031-03-01/PT1H'] }, /^routes\[1\]\.brownouts\[0\]: .*its start "2031-03-01" is not a date-time/],
    ['a bad duration', { sunset: SUNSET, brownouts: ['2031-03-01T14:00:00Z/PT1Hx'] }, /^routes\[1\]\.brownouts\[0\]: .*"PT1Hx" is not an ISO 8601 duration/],
    ['two durations', { sunset: SUNSET, brownouts: ['PT1H/PT2H'] }, /^routes\[1\]\.brownouts\[0\]: .*two durations name no time/],
    ['a repeating interval', { sunset: SUNSET, brownouts: ['R2/2031-03-01T14:00:00Z/PT1H'] }, /^routes\[1\]\.brownouts\[0\]: expected an ISO 8601 interval/],
    ['not a list', { sunset: SUNSET, brownouts: '2031-03-01T14:00:00Z/PT1H' }, /^routes\[1\]\.brownouts: /],
  ])('%s: refused, naming routes[i].brownouts[j]', (_name, extra, message) => {
    const errors = errorsOf(route(extra));
    expect(
      errors.some((e) => message.test(e)),
      errors.join('\n'),
    ).toBe(true);
  });

  it('config check names every bad brownout at once and exits 1', async () => {
    const dir = tempDir();
    try {
      const file = dir.write('gateway.yaml', {
        routes: [
          { path: '/v1/a', brownouts: ['2031-03-01T14:00:00Z/PT1H'] },
          { path: '/v1/b', sunset: SUNSET, brownouts: ['2031-03-01T15:00:00Z/2031-03-01T14:00:00Z', '2031-07-01T00:00:00Z/PT1H'] },
        ],
      });
      const r = await runCli(['config', 'check', '--config', file]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('routes[0].brownouts: brownouts need a sunset date');
      expect(r.stderr).toContain('routes[1].brownouts[0]: the interval must end after it starts');
      expect(r.stderr).toContain('routes[1].brownouts[1]: the brownout ends at 2031-07-01T01:00:00.000Z, after the route');
      expect(r.stderr).not.toMatch(/\n\s+at /);
    } finally {
      dir.remove();
    }
  });
});

describe('ISO 8601 intervals', () => {
  const span = (text: string): [string, string] | string => {
    const r = parseInterval(text);
    return r.ok ? [new Date(r.startMs).toISOString(), new Date(r.endMs).toISOString()] : r.message;
  };

  it('reads the three forms, offsets, fractions and weeks', () => {
    expect(span('2031-03-01T14:00:00Z/PT1H')).toEqual(['2031-03-01T14:00:00.000Z', '2031-03-01T15:00:00.000Z']);
    expect(span('2031-03-01T14:00:00Z/2031-03-01T15:00:00Z')).toEqual(['2031-03-01T14:00:00.000Z', '2031-03-01T15:00:00.000Z']);
    expect(span('PT1H/2031-03-01T15:00:00Z')).toEqual(['2031-03-01T14:00:00.000Z', '2031-03-01T15:00:00.000Z']);
    expect(span('2031-03-01T14:00:00+02:00/PT30M')).toEqual(['2031-03-01T12:00:00.000Z', '2031-03-01T12:30:00.000Z']);
    expect(span('2031-03-01T14:00:00Z/PT1,5H')).toEqual(['2031-03-01T14:00:00.000Z', '2031-03-01T15:30:00.000Z']);
    expect(span('2031-03-01T00:00:00Z/P1W')).toEqual(['2031-03-01T00:00:00.000Z', '2031-03-08T00:00:00.000Z']);
    expect(span('2031-03-01T00:00:00Z/P1DT12H')).toEqual(['2031-03-01T00:00:00.000Z', '2031-03-02T12:00:00.000Z']);
  });

  it('adds months on the UTC calendar, the day kept within the month', () => {
    expect(span('2031-01-31T00:00:00Z/P1M')).toEqual(['2031-01-31T00:00:00.000Z', '2031-02-28T00:00:00.000Z']);
    expect(span('2032-01-31T00:00:00Z/P1M')).toEqual(['2032-01-31T00:00:00.000Z', '2032-02-29T00:00:00.000Z']);
    expect(span('P1M/2031-03-31T00:00:00Z')).toEqual(['2031-02-28T00:00:00.000Z', '2031-03-31T00:00:00.000Z']);
    expect(span('2031-11-15T00:00:00Z/P1Y2M')).toEqual(['2031-11-15T00:00:00.000Z', '2033-01-15T00:00:00.000Z']);
    // A day is 24 hours in UTC, whatever the process's time zone does on that date.
    expect(span('2031-03-29T12:00:00Z/P1D')).toEqual(['2031-03-29T12:00:00.000Z', '2031-03-30T12:00:00.000Z']);
  });

  it('refuses what is not one interval', () => {
    for (const bad of [
      '',
      '/',
      'PT1H',
      '2031-03-01T14:00:00Z/',
      '/PT1H',
      'a/b',
      'xPT1H/2031-03-01T15:00:00Z',
      '2031-03-01T14:00:00Z/P1DT',
      '2031-03-01T14:00:00Z/P',
      '2031-03-01T14:00:00Z/-PT1H',
      '2031-03-01T14:00:00Z/PT1.5H30M',
      '2031-02-30T14:00:00Z/PT1H',
      '2031-03-01T14:00:00Z/P99999999Y',
      '2031-03-01T14:00:00Z/PT1H/PT1H',
    ])
      expect(typeof span(bad), bad).toBe('string');
  });
});
