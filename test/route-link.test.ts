// A route's `link` (docs: "Configuration reference", routes): only http and https URLs, refused by `tollgate config
// check` with the field's path otherwise; and whatever characters the configured URL holds, the Link header on the
// deprecated route carries exactly one link with one relation (the target percent-encoded, never closing its `<...>`).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, runCli, tempDir } from './helpers/cli.js';
import { startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';
import { TestUpstream } from './helpers/upstream.js';

const route = (path: string, link: string) => ({ method: 'GET', path, deprecation: '2026-01-01T00:00:00Z', link });

// What an attacker or a careless copy-paste would put in a route's link.
const CRAFTED = {
  breakout: 'https://docs.example.com/m>; rel="successor-version", <https://evil.example/x',
  quotesAndSpaces: 'https://docs.example.com/a b"c',
  commaSemicolon: 'https://docs.example.com/x,<https://evil.example/>;rel=alternate',
  controls: 'https://docs.example.com/a\u0000b\u001bc',
  unicode: 'https://dócs.example.com/migración?to=v2#ñ',
};

let up: TestUpstream;
let gw: TestGateway;

beforeAll(async () => {
  assertBuilt();
  up = await TestUpstream.start();
  gw = await startTestGateway(testConfig({ upstream: { url: up.url }, routes: Object.entries(CRAFTED).map(([name, link]) => route(`/v1/${name}`, link)) }));
});

afterAll(async () => {
  await gw?.close();
  await up?.close();
});

/** The link-values of a Link header (RFC 8288 §3): `<target>` then its parameters, values separated by commas. */
function linkValues(header: string): Array<{ target: string; params: string }> {
  const out: Array<{ target: string; params: string }> = [];
  const re = /\s*<([^>]*)>((?:\s*;\s*[^;,]+)*)\s*(?:,|$)/y;
  let m: RegExpExecArray | null;
  while (re.lastIndex < header.length && (m = re.exec(header))) out.push({ target: m[1]!, params: m[2]!.trim() });
  expect(re.lastIndex, `unparsed rest of ${header}`).toBe(header.length);
  return out;
}

describe('a route link', () => {
  it('config check refuses a non-http(s) link, naming the field', async () => {
    const dir = tempDir();
    try {
      for (const link of [
        'javascript:alert(document.domain)',
        'data:text/html,<script>alert(1)</script>',
        'ftp://files.example.com/m',
        'file:///etc/passwd',
        'mailto:a@b.c',
      ]) {
        const file = dir.write('gateway.yaml', { routes: [{ path: '/v1/ok' }, route('/v1/pets/:id', link)] });
        const r = await runCli(['config', 'check', '--config', file]);
        expect(r.code, link).toBe(1);
        expect(r.stdout).toBe('');
        expect(r.stderr, link).toContain('routes[1].link: expected an http:// or https:// URL');
        expect(r.stderr).not.toMatch(/\n\s+at /);
      }
      const ok = dir.write('gateway.yaml', { routes: [route('/v1/pets/:id', 'HTTPS://docs.example.com/m'), route('/v1/x', 'http://docs.example.com/m')] });
      expect((await runCli(['config', 'check', '--config', ok])).code).toBe(0);
    } finally {
      dir.remove();
    }
  });

  it.each(Object.keys(CRAFTED))('%s: the Link header carries exactly one link, rel="deprecation", encoded', async (name) => {
    const res = await fetch(`${gw.url}/v1/${name}`, { signal: AbortSignal.timeout(10_000) });
    await res.arrayBuffer();
    expect(res.status).toBe(200);
    const header = res.headers.get('link')!;
    expect(header).toMatch(/^[\x21-\x7e ]+$/);
    const values = linkValues(header);
    expect(values).toEqual([{ target: expect.any(String), params: '; rel="deprecation"' }]);
    const target = values[0]!.target;
    // A URI (RFC 3986) with none of the characters Link parsers split on, and the same address as configured.
    expect(target).toMatch(/^https:\/\/[A-Za-z0-9\-._~:/?#[\]@!$&'()*+=%]+$/);
    expect(new URL(target).hostname).toBe(new URL(CRAFTED[name as keyof typeof CRAFTED]).hostname);
    expect(header.split(',')).toHaveLength(1);
    expect(header.split(';')).toHaveLength(2);
  });

  it('keeps an ordinary URL as it is', async () => {
    gw.runtime.apply(testConfig({ upstream: { url: up.url }, routes: [route('/v1/plain', 'https://example.com/docs/migrate-pets?from=v1#top')] }));
    const res = await fetch(`${gw.url}/v1/plain`, { signal: AbortSignal.timeout(10_000) });
    await res.arrayBuffer();
    expect(res.headers.get('link')).toBe('<https://example.com/docs/migrate-pets?from=v1#top>; rel="deprecation"');
  });
});
