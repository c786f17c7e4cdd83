// Fuzz: request targets against a real listening gateway (docs: "The request path"). Percent-encodings valid and not, dot-segments raw and encoded, `//`,
// overlong paths, absolute-form targets naming other hosts (among them a live canary server that must stay
// untouched), `//host` paths, `*`, CONNECT.
// Expected: a /v1 path is proxied byte for byte to the TestUpstream (Host: the upstream's own), a path an upstream
// may read as another (dot-segments, an encoded slash or backslash, a backslash, ";") gets 400 invalid_request,
// anything outside /v1 404 not_found, Node's own 400/431 for what its parser refuses; CONNECT (there is no forward
// proxy) gets 404 not_found and its connection closed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  assertStillServing,
  caseId,
  errorCode,
  exchange,
  fromNode,
  fuzzCases,
  fuzzSeed,
  MAX_HEADER_BYTES,
  oneAnswer,
  runCases,
  startFuzzGateway,
  statuses,
  type Exchange,
  type FuzzCase,
  type FuzzGateway,
  Rng,
  type SeenRequest,
} from './helpers/fuzz.js';

const SEED = fuzzSeed();

let f: FuzzGateway;
beforeAll(async () => {
  f = await startFuzzGateway();
});
afterAll(async () => {
  await f?.close();
});

const UNRESERVED = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~';
const SUB_DELIMS = "!$&'()*+,;=:@";

/**
 * The oracle's rule for a path an upstream may read as another: a dot-segment (RFC 3986 §5.2.4, also percent-encoded),
 * an encoded slash or backslash, a backslash, or a ";" (upstreams decode the first, split on the second and drop
 * `;params` from segments).
 */
function isAmbiguous(path: string): boolean {
  if (/%2f|%5c|\\|;/i.test(path)) return true;
  return path
    .replace(/%2e/gi, '.')
    .split('/')
    .some((seg) => seg === '.' || seg === '..');
}

/** Does Express's `/v1` mount take this path (case-insensitive, then "/" or the end)? */
function underV1(path: string): boolean {
  return /^\/v1(?:\/|$)/i.test(path);
}

function segment(rng: Rng): string {
  switch (rng.int(12)) {
    case 0:
      return rng.pick(['.', '..', '%2e', '%2e%2e', '%2E%2E', '.%2e', '%2e.', '..;', '..;x', '.;', '...', '.hidden', '..x', 'x..']);
    case 1:
      return rng.pick(['%zz', '%', '%0', '%00', '%2f', '%2F', '%5c', '%ff', '%c0%ae', '%252e%252e', '%e2%80%ae', '%0d%0a', '%20', '%3f', '%23']);
    case 2:
      return `%${rng.string('0123456789abcdefABCDEF', 2)}`;
    case 3:
      return ''; // an empty segment: "//"
    case 4:
      return rng.string(UNRESERVED + SUB_DELIMS, rng.range(1, 12));
    case 5:
      return rng.string(`${UNRESERVED + SUB_DELIMS}%`, rng.range(1, 20));
    case 6:
      return rng.string(UNRESERVED, rng.range(40, 400));
    case 7:
      return rng.pick(['evil.example', '127.0.0.1', `127.0.0.1:${f.canary.port}`, 'localhost', '[::1]', 'http:', 'https:', 'user@evil.example']);
    default:
      return rng.string(UNRESERVED, rng.range(1, 10));
  }
}

function query(rng: Rng): string {
  if (rng.bool(0.6)) return '';
  const pairs = Array.from(
    { length: rng.range(1, 4) },
    () => `${rng.string(`${UNRESERVED}%[]`, rng.range(0, 8))}=${rng.string(`${UNRESERVED + SUB_DELIMS}/?%`, rng.range(0, 16))}`,
  );
  return `?${pairs.join('&')}`;
}

/** A request for `target` with the valid key, a Host naming someone else half the time, and the case id. */
function request(rng: Rng, method: string, target: string, requestId: string): string {
  const host = rng.pick(['fuzz.test', `127.0.0.1:${f.canary.port}`, 'evil.example', 'localhost:1']);
  return `${method} ${target} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${f.key}\r\nX-Request-Id: ${requestId}\r\n\r\n`;
}

/**
 * The expected fate of a target whose path (as the gateway's router sees it) is `path`:
 * proxied with exactly `upstreamUrl`, refused as ambiguous, or not found.
 */
function expectFor(path: string, upstreamUrl: string): { status: number; code?: string; upstreamUrl?: string } {
  const pathOnly = path.split('?', 1)[0]!;
  if (!underV1(pathOnly)) return { status: 404, code: 'not_found' };
  if (isAmbiguous(pathOnly)) return { status: 400, code: 'invalid_request' };
  return { status: 200, upstreamUrl };
}

function targetCase(kind: string, bytes: string, requestId: string, want: ReturnType<typeof expectFor>, opts: { nodeMayRefuse: boolean }): FuzzCase {
  const headerBytes = Buffer.byteLength(bytes, 'latin1');
  return {
    kind,
    bytes: Buffer.from(bytes, 'latin1'),
    requestId,
    opts: { responses: 1 },
    check(ex: Exchange, seen: SeenRequest[]): string[] {
      const r = ex.responses[0];
      if (headerBytes > MAX_HEADER_BYTES + 64) {
        const problems = oneAnswer(ex, statuses(431, 400));
        if (!fromNode(r)) problems.push('an over-limit request line reached the gateway');
        if (seen.length) problems.push('the upstream was called');
        return problems;
      }
      if (fromNode(r) && (opts.nodeMayRefuse || headerBytes > MAX_HEADER_BYTES - 64)) {
        const problems = oneAnswer(ex, statuses(400, 431));
        if (seen.length) problems.push('the upstream was called for a request Node refused');
        return problems;
      }
      const problems = oneAnswer(ex, statuses(want.status));
      if (want.code && !ex.head && errorCode(r) !== want.code) problems.push(`code ${errorCode(r)}, expected ${want.code}`);
      if (want.upstreamUrl === undefined) {
        if (seen.length) problems.push(`the upstream was called (${seen[0]!.url}) for a ${want.status}`);
        return problems;
      }
      if (seen.length !== 1) problems.push(`the upstream saw ${seen.length} requests, expected 1`);
      for (const s of seen) {
        if (s.url !== want.upstreamUrl) problems.push(`the upstream saw ${JSON.stringify(s.url)}, expected ${JSON.stringify(want.upstreamUrl)}`);
        if (s.headers.host !== f.upstreamHost) problems.push(`the upstream saw Host ${String(s.headers.host)}`);
        if (s.headers['x-consumer-id'] !== f.keyId) problems.push(`X-Consumer-Id ${String(s.headers['x-consumer-id'])}`);
      }
      return problems;
    },
  };
}

/** Characters that llhttp may refuse in a request target (its strict URL table), so Node's own 400 is fine there. */
function nodeMayRefuse(target: string): boolean {
  return /[^\x21-\x7e]|["<>\\^`{|}]/.test(target);
}

function originFormCase(rng: Rng, i: number): FuzzCase {
  const requestId = caseId('target', i);
  const prefix = rng.pick(['/v1/', '/v1/', '/v1/', '/V1/', '/v1', '/v1//', '/v1%2f', '/v2/', '//v1/', '/']);
  const segs = Array.from({ length: rng.range(0, 6) }, () => segment(rng));
  const fragment = rng.bool(0.05) ? `#${rng.string(`${UNRESERVED}/.`, rng.range(0, 8))}` : '';
  const target = prefix + segs.join('/') + query(rng) + fragment;
  const method = rng.pick(['GET', 'GET', 'HEAD', 'DELETE', 'OPTIONS']);
  // A fragment is no part of a request target: the gateway drops it, for routing and upstream alike.
  const sent = target.split('#', 1)[0]!;
  const c = targetCase('origin-form', request(rng, method, target, requestId), requestId, expectFor(sent, sent), { nodeMayRefuse: nodeMayRefuse(target) });
  if (method === 'HEAD') c.opts = { ...c.opts, head: true };
  return c;
}

function absoluteFormCase(rng: Rng, i: number): FuzzCase {
  const requestId = caseId('target', i);
  const scheme = rng.pick(['http', 'https', 'HTTP', 'Https', 'ws', 'ftp', 'foo+bar']);
  const authority = rng.pick([
    `127.0.0.1:${f.canary.port}`,
    `user:pw@127.0.0.1:${f.canary.port}`,
    'other.host',
    'evil.example:443',
    `[::1]:${f.canary.port}`,
    `localhost:${f.canary.port}`,
    `127.0.0.1:${f.upstream.port}`,
    '',
    '0x7f.1:80',
  ]);
  const path =
    rng.pick(['/v1/', '/v1/', '/v1', '/other/', '/', '', '/v1/../', '/v1/%2e%2e/', '//v1/']) +
    Array.from({ length: rng.range(0, 4) }, () => segment(rng)).join('/');
  const target = `${scheme}://${authority}${path}${query(rng)}`;
  // What the router sees: the gateway reduces an absolute-form target to its path and query (WHATWG URL parsing,
  // which also resolves dot-segments); an unparsable one becomes "/".
  let reduced = '/';
  try {
    const u = new URL(target);
    reduced = (u.pathname || '/') + u.search;
  } catch {
    reduced = '/';
  }
  // llhttp takes only letters in a scheme, and wants a host.
  // A path that does not start with "/" runs into the authority, which llhttp may well refuse.
  const refusable = nodeMayRefuse(target) || authority === '' || !/^[a-z]+$/i.test(scheme) || (path !== '' && !path.startsWith('/'));
  return targetCase('absolute-form', request(rng, 'GET', target, requestId), requestId, expectFor(reduced, reduced), { nodeMayRefuse: refusable });
}

function byteCase(i: number, b: number): FuzzCase {
  const requestId = caseId('target', i);
  const ch = String.fromCharCode(b);
  const target = `/v1/byte/a${ch}b`;
  const bytes = `GET ${target} HTTP/1.1\r\nHost: fuzz.test\r\nAuthorization: Bearer ${f.key}\r\nX-Request-Id: ${requestId}\r\n\r\n`;
  // A space or CR/LF ends the target early: "HTTP/1.1" is then no version, or the line breaks; Node refuses both.
  // "#" starts a fragment, which the gateway drops.
  const sent = target.split('#', 1)[0]!;
  return targetCase(`path-byte`, bytes, requestId, expectFor(sent, sent), { nodeMayRefuse: nodeMayRefuse(target) });
}

describe(`fuzz: request targets (FUZZ_SEED=${SEED})`, () => {
  it('every byte 0x00-0xFF inside a /v1 path: proxied exactly as sent, or refused by Node', async () => {
    // "?" and "#" split the path: the upstream gets the target as sent all the same.
    const summary = await runCases(f, SEED, 'target', 256, (_rng, i) => byteCase(i, i));
    expect(summary.cases).toBe(256);
    expect(summary.byStatus['200']).toBeGreaterThan(60);
    await assertStillServing(f, SEED, 'the path byte sweep');
  }, 60_000);

  it(`random origin-form targets (${fuzzCases(1200)} cases): percent-encoding, dot-segments, "//", other hosts in segments`, async () => {
    const count = fuzzCases(1200);
    const summary = await runCases(f, SEED, 'target', count, (rng, i) => originFormCase(rng, 1000 + i), { stream: 1, budgetMs: 20_000 + count * 40 });
    expect(summary.cases).toBe(count);
    expect(summary.byStatus['200']).toBeGreaterThan(0);
    expect(summary.byStatus['400']).toBeGreaterThan(0);
    expect(summary.byStatus['404']).toBeGreaterThan(0);
    await assertStillServing(f, SEED, 'random origin-form targets');
  }, 120_000);

  it(`random absolute-form targets (${fuzzCases(600)} cases) are reduced to their path; only the upstream is contacted`, async () => {
    const count = fuzzCases(600);
    const summary = await runCases(f, SEED, 'target', count, (rng, i) => absoluteFormCase(rng, 100_000 + i), { stream: 2, budgetMs: 20_000 + count * 40 });
    expect(summary.cases).toBe(count);
    expect(summary.byStatus['200']).toBeGreaterThan(0);
    expect(f.canary.seen).toEqual([]);
    await assertStillServing(f, SEED, 'random absolute-form targets');
  }, 120_000);

  it("overlong paths: 10k characters are proxied, past Node's header limit Node answers 431", async () => {
    const r = new Rng(SEED + 3);
    const cases: FuzzCase[] = [];
    for (const len of [1_000, 5_000, 10_000, 12_000, 15_000, 16_500, 20_000, 50_000, 100_000]) {
      const target = `/v1/long/${r.string(UNRESERVED, len)}`;
      const id = caseId('target', 200_000 + len);
      cases.push(targetCase(`overlong-${len}`, request(r, 'GET', target, id), id, expectFor(target, target), { nodeMayRefuse: false }));
    }
    const summary = await runCases(f, SEED, 'target', cases.length, (_rng, i) => cases[i]!, { stream: 3, concurrency: 3 });
    // Up to 15,000 characters fit under Node's 16 KiB header limit; 16,500 and longer do not.
    expect(summary.byStatus).toEqual({ '200': 5, '431': 4 });
    await assertStillServing(f, SEED, 'overlong paths');
  }, 60_000);

  it('fixed hostile targets: "//host", "*", other hosts, CONNECT; the canary is never contacted', async () => {
    const canary = `127.0.0.1:${f.canary.port}`;
    const k = f.key;
    const req = (line: string, id: string) => `${line}\r\nHost: ${canary}\r\nAuthorization: Bearer ${k}\r\nX-Request-Id: ${id}\r\n\r\n`;
    const table: Array<[string, number | 'connect', string | undefined]> = [
      [`GET http://${canary}/v1/x HTTP/1.1`, 200, '/v1/x'],
      [`GET https://${canary}/v1/x?q=1 HTTP/1.1`, 200, '/v1/x?q=1'],
      [`GET http://other.host/v1/x HTTP/1.1`, 200, '/v1/x'],
      [`GET http://${canary} HTTP/1.1`, 404, undefined],
      [`GET http://${canary}/healthz HTTP/1.1`, 200, undefined], // the gateway's own /healthz, not the canary's
      [`GET //evil.example/v1/x HTTP/1.1`, 404, undefined],
      [`GET //${canary}/v1/x HTTP/1.1`, 404, undefined],
      [`GET /v1//${canary}/x HTTP/1.1`, 200, `/v1//${canary}/x`],
      [`GET /v1/../healthz HTTP/1.1`, 400, undefined],
      [`GET /v1/%2e%2e/healthz HTTP/1.1`, 400, undefined],
      [`GET /v1/x/..;/retired/1 HTTP/1.1`, 400, undefined],
      [`GET /v1/retired%2F1 HTTP/1.1`, 400, undefined], // a WSGI upstream would decode it to the retired route
      [`GET /v1/retired;x/1 HTTP/1.1`, 400, undefined], // so would one that drops ";params" (Tomcat)
      [`GET /v1/retired/1 HTTP/1.1`, 410, undefined],
      [`GET /v1/retired/1#x HTTP/1.1`, 410, undefined], // a fragment does not slip past the route policy
      [`GET /v1/x#/../../healthz HTTP/1.1`, 200, '/v1/x'],
      [`OPTIONS * HTTP/1.1`, 404, undefined],
      [`CONNECT ${canary} HTTP/1.1`, 'connect', undefined],
      [`CONNECT evil.example:443 HTTP/1.1`, 'connect', undefined],
      [`CONNECT /v1/x HTTP/1.1`, 'connect', undefined],
    ];
    for (const [i, [line, status, upstreamUrl]] of table.entries()) {
      const id = caseId('target-fixed', i);
      const before = f.upstream.seen.length;
      // CONNECT: read until the gateway closes (a second answer would be a fault), the others until the one answer.
      const ex = await exchange(f.port, req(line, id), { responses: status === 'connect' ? 2 : 1, timeoutMs: 3000 });
      const seen = f.upstream.seen.slice(before).filter((s) => s.headers['x-request-id'] === id);
      if (status === 'connect') {
        // No forward proxy: one 404 not_found (JSON, with the request's id), then the gateway closes at once.
        expect(oneAnswer(ex, statuses(404)), line).toEqual([]);
        expect(errorCode(ex.responses[0]), line).toBe('not_found');
        expect(ex.responses[0]!.headers['x-request-id'], line).toBe(id);
        expect(ex.closedByPeer, line).toBe(true);
        expect(ex.elapsedMs, line).toBeLessThan(1000);
        expect(seen, line).toEqual([]);
      } else {
        expect(oneAnswer(ex, statuses(status)), line).toEqual([]);
        expect(
          seen.map((s) => s.url),
          line,
        ).toEqual(upstreamUrl ? [upstreamUrl] : []);
        for (const s of seen) expect(s.headers.host, line).toBe(f.upstreamHost);
      }
    }
    expect(f.canary.seen).toEqual([]);
    await assertStillServing(f, SEED, 'fixed hostile targets');
  }, 60_000);
});
