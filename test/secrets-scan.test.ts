// No key leaks, anywhere a gateway speaks (docs: "The request path", "Error codes", "Reliability"): two real
// `node dist/cli.js serve` processes on one private Redis (one logging at trace, one at info in front of a dead
// upstream), a broad mix of traffic (valid, unknown, mistyped, revoked, rotated, expired, banned and unverifiable
// keys; keys in every wrong place; anonymous 429s; upstream 4xx/5xx, resets and timeouts; 404/410/413/400; ops
// endpoints; a rejected SIGHUP reload; a Redis hang; SIGTERM), then a scan of every log line, both /metrics texts,
// every response body and header, everything the upstream received and `keys list`, for every plaintext key and
// token sent, every SHA-256 of them, and anything shaped like a key or a hash. test/keys-lifecycle.test.ts scans
// Redis itself; this file is about what leaves the processes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey, hashKey } from '../src/keys/format.js';
import { CliProcess, assertBuilt, runCli, tempDir } from './helpers/cli.js';
import { leaksIn } from './helpers/gateway.js';
import { metricValue, waitFor } from './helpers/limits.js';
import { timedRequest, type LoadResult } from './helpers/load.js';
import { TestRedis, freePort } from './helpers/redis-server.js';
import { TestUpstream, echo } from './helpers/upstream.js';

const PREFIX = 'secrets:';

let redis: TestRedis;
let up: TestUpstream;
let dir: ReturnType<typeof tempDir>;
let configA: string;
/** A: in front of the echo upstream, logging everything (trace). B: in front of a dead upstream, logging at info. */
let A: { proc: CliProcess; url: string };
let B: { proc: CliProcess; url: string };

/** Every token any client sent or any command printed: none may leave a gateway, nor its SHA-256. */
const secrets = new Set<string>();
/** Every response the gateways gave, with status, headers and body. */
const responses: LoadResult[] = [];
const keys: Record<string, { id: string; key: string }> = {};
const STATIC_KEY = generateKey();
let ipCounter = 0;
/** A client address of its own (X-Forwarded-For), so unauthenticated requests never share an anonymous bucket by accident. */
const nextIp = () => `10.9.${Math.floor(++ipCounter / 250)}.${ipCounter % 250}`;

function config(upstreamUrl: string, level: string): Record<string, unknown> {
  return {
    // Client IPs from X-Forwarded-For, so each group of anonymous requests has its own per-IP bucket.
    server: { host: '127.0.0.1', port: 0, trustProxy: true, maxBodyBytes: 1024, drainTimeoutMs: 2000 },
    upstream: { url: upstreamUrl, timeoutMs: 400 },
    redis: { url: redis.url, prefix: PREFIX, failMode: 'open', commandTimeoutMs: 500 },
    log: { level },
    plans: { free: { perMinute: 100_000, perDay: 1_000_000 }, tiny: { perMinute: 2, perDay: 1000 } },
    anonymous: { perMinute: 5 },
    ban: { threshold: 3, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 600 },
    routes: [
      {
        method: 'GET',
        path: '/v1/old/:id',
        deprecation: '2020-01-01T00:00:00Z',
        sunset: '2021-01-01T00:00:00Z',
        link: 'https://example.com/migrate',
        afterSunset: 'gone',
      },
      { method: 'GET', path: '/v1/pets/:petId', deprecation: '2020-01-01T00:00:00Z', sunset: '2099-01-01T00:00:00Z', link: 'https://example.com/pets' },
    ],
    keys: [{ id: 'static-key', plan: 'free', sha256: hashKey(STATIC_KEY) }],
  };
}

async function start(file: string): Promise<{ proc: CliProcess; url: string }> {
  const proc = CliProcess.start(['serve', '--config', file]);
  const line = await proc.waitForLog('tollgate gateway listening');
  return { proc, url: String(line.url) };
}

async function keysCli(...args: string[]): Promise<string> {
  const r = await runCli(['keys', ...args, '--config', configA]);
  if (r.code !== 0) throw new Error(`keys ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return r.stdout;
}

async function create(name: string, plan = 'free', extra: string[] = []): Promise<void> {
  const out = JSON.parse(await keysCli('create', '--plan', plan, '--name', name, '--json', ...extra)) as { id: string; key: string };
  secrets.add(out.key);
  keys[name] = out;
}

/** One request through a gateway; the response goes to the scan. */
async function send(
  gw: { url: string },
  path: string,
  opts: { key?: string; headers?: Record<string, string | string[]>; method?: string; body?: string; ip?: string } = {},
): Promise<LoadResult> {
  const headers: Record<string, string | string[]> = {
    'x-forwarded-for': opts.ip ?? '10.1.0.1',
    ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}),
    ...opts.headers,
  };
  const r = await timedRequest(gw.url + path, { method: opts.method, headers, body: opts.body, timeoutMs: 5000 });
  responses.push(r);
  expect(r.error, `${path}: ${r.error}`).toBeUndefined();
  return r;
}

beforeAll(async () => {
  assertBuilt();
  [redis, up] = await Promise.all([TestRedis.start(), TestUpstream.start()]);
  dir = tempDir();
  configA = dir.write('a.yaml', config(up.url, 'trace'));
  const configB = dir.write('b.yaml', config(`http://127.0.0.1:${await freePort()}`, 'info'));
  secrets.add(STATIC_KEY);
  [A, B] = await Promise.all([start(configA), start(configB)]);
  await Promise.all([
    create('valid'),
    create('tiny', 'tiny'),
    create('revoked'),
    create('rotated-now'),
    create('rotated-grace'),
    create('expired', 'free', ['--expires', '2020-01-01T00:00:00Z']),
    create('unverifiable'),
  ]);
});

afterAll(async () => {
  await CliProcess.killAll();
  await up?.close();
  await redis?.stop();
  dir?.remove();
});

describe('traffic', () => {
  it('valid keys, every Authorization spelling, and keys in the wrong places', async () => {
    const k = keys.valid!.key;
    expect((await send(A, '/v1/things', { key: k })).status).toBe(200);
    expect((await send(A, '/v1/things?x=1', { key: k, method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"x"}' })).status).toBe(
      200,
    );
    expect((await send(A, '/v1/pets/1', { key: k })).headers?.deprecation).toBe('@1577836800'); // 2020-01-01T00:00:00Z
    expect((await send(A, '/v1/things', { key: STATIC_KEY })).status).toBe(200);
    expect((await send(A, '/v1/things', { headers: { authorization: `bearer ${k}` } })).status).toBe(200);
    expect((await send(A, '/v1/things', { headers: { authorization: `BEARER    ${k}  ` } })).status).toBe(200);
    // A key sent as the request id is not taken as one: it would be echoed, forwarded and logged.
    expect((await send(A, '/v1/things', { key: k, headers: { 'x-request-id': k } })).status).toBe(200);
    // Refused spellings, each from its own client IP so none hits the anonymous limit.
    const refused: Array<[Record<string, string | string[]>, number, string]> = [
      [{ authorization: `Bearer ${k} extra` }, 401, 'invalid_api_key'],
      [{ authorization: `Bearer ${k}\u00a0` }, 401, 'invalid_api_key'],
      [{ authorization: `Basic ${Buffer.from(`${k}:`).toString('base64')}` }, 401, 'missing_api_key'],
      [{ authorization: `Basic ${k}` }, 401, 'missing_api_key'],
      [{ authorization: `Token ${k}` }, 401, 'missing_api_key'],
      [{ authorization: k }, 401, 'missing_api_key'],
      [{ 'x-api-key': k }, 401, 'missing_api_key'],
      [{ cookie: `api_key=${k}` }, 401, 'missing_api_key'],
      [{ 'proxy-authorization': `Bearer ${k}` }, 401, 'missing_api_key'],
    ];
    for (const [headers, status, code] of refused) {
      const r = await send(A, '/v1/things', { headers, ip: nextIp() });
      if (r.status !== 400) {
        // (Node itself refuses some byte sequences with a bare 400 before the gateway sees them.)
        expect([r.status, r.code]).toEqual([status, code]);
      }
    }
    // Two Authorization headers: Node keeps the first.
    await send(A, '/v1/things', { headers: { authorization: [`Bearer ${generateKey()}`, `Bearer ${k}`] }, ip: nextIp() });
  });

  it('unknown, mistyped, revoked, rotated and expired keys', async () => {
    const unknown = generateKey();
    const valid = keys.valid!.key;
    const mistyped = valid.slice(0, 10) + (valid[10] === 'a' ? 'b' : 'a') + valid.slice(11);
    const truncated = valid.slice(0, -1);
    for (const t of [unknown, mistyped, truncated]) secrets.add(t);
    for (const t of [unknown, mistyped, truncated, 'tg_', 'not-a-key']) {
      const r = await send(A, '/v1/things', { key: t, ip: nextIp() });
      expect([r.status, r.code]).toEqual([401, 'invalid_api_key']);
    }

    await keysCli('revoke', keys.revoked!.id);
    const now = JSON.parse(await keysCli('rotate', keys['rotated-now']!.id, '--json')) as { key: string };
    const grace = JSON.parse(await keysCli('rotate', keys['rotated-grace']!.id, '--grace', '600', '--json')) as { key: string };
    secrets.add(now.key).add(grace.key);
    for (const gw of [A, B]) {
      // Revocation and rotation reach every instance within a second.
      await waitFor(async () => (await send(gw, '/v1/things', { key: keys.revoked!.key, ip: nextIp() })).status === 401, 'revoked key refused', 3000, 50);
      await waitFor(
        async () => (await send(gw, '/v1/things', { key: keys['rotated-now']!.key, ip: nextIp() })).status === 401,
        'rotated key refused',
        3000,
        50,
      );
    }
    expect((await send(A, '/v1/things', { key: now.key })).status).toBe(200);
    expect((await send(A, '/v1/things', { key: grace.key })).status).toBe(200);
    expect((await send(A, '/v1/things', { key: keys['rotated-grace']!.key })).status).toBe(200);
    const expired = await send(A, '/v1/things', { key: keys.expired!.key, ip: nextIp() });
    expect([expired.status, expired.code]).toEqual([401, 'invalid_api_key']);
    // Anonymous flood from one IP: 401s, then 429s.
    const codes = [];
    for (let i = 0; i < 8; i++) codes.push((await send(A, '/v1/things', { key: unknown, ip: '10.3.2.1' })).status);
    expect(codes.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(codes.slice(5)).toEqual([429, 429, 429]);
  });

  it('limits and the ban ladder: 429 rate_limit_exceeded, then api_key_banned, on both instances', async () => {
    const k = keys.tiny!.key;
    const seen: Array<string | number | undefined> = [];
    for (let i = 0; i < 6; i++) {
      const r = await send(i % 2 ? B : A, '/v1/things', { key: k });
      seen.push(r.status === 429 ? r.code : r.status);
    }
    // B's upstream is dead: its admitted request is a 502, and given back to the key's windows (so A's next is admitted).
    expect(seen).toEqual([200, 502, 200, 'rate_limit_exceeded', 'rate_limit_exceeded', 'api_key_banned']);
    // The ban's log line is written as the ban is answered: allow it a moment to arrive (bounded).
    for (let i = 0; i < 100 && !A.proc.logs.concat(B.proc.logs).some((l) => l.msg === 'api key banned'); i++) await new Promise((r) => setTimeout(r, 20));
    expect(A.proc.logs.concat(B.proc.logs).some((l) => l.msg === 'api key banned')).toBe(true);
    await keysCli('unban', keys.tiny!.id);
  });

  it('upstream errors passed through, resets, timeouts, a dead upstream, and the gateway own 4xx', async () => {
    const k = keys.valid!.key;
    try {
      up.behaviour = (_req, res) => {
        res.statusCode = 400;
        res.setHeader('content-type', 'application/json');
        res.end('{"code":"invalid_request","message":"name: required","status":400}');
      };
      expect((await send(A, '/v1/things', { key: k })).status).toBe(400);
      up.behaviour = (_req, res) => {
        res.statusCode = 500;
        res.setHeader('x-powered-by', 'Upstream');
        res.end('upstream exploded');
      };
      expect((await send(A, '/v1/things', { key: k })).status).toBe(500);
      up.behaviour = (_req, res) => {
        res.statusCode = 503;
        res.end();
      };
      expect((await send(A, '/v1/things', { key: k })).status).toBe(503);
      up.behaviour = (req) => req.socket.destroy();
      expect((await send(A, '/v1/things', { key: k })).code).toBe('bad_gateway');
      up.behaviour = () => {};
      expect((await send(A, '/v1/things', { key: k })).code).toBe('gateway_timeout');
    } finally {
      up.behaviour = echo;
    }
    expect((await send(B, '/v1/things', { key: k })).code).toBe('bad_gateway');
    expect((await send(A, '/v1/old/1', { key: k })).code).toBe('gone');
    expect((await send(A, '/v1/../admin', { key: k })).status).toBe(400);
    expect((await send(A, '/v1/%2e%2e/admin', { key: k })).code).toBe('invalid_request');
    expect((await send(A, '/v1/things', { key: k, method: 'POST', headers: { 'content-type': 'application/json' }, body: 'x'.repeat(2000) })).code).toBe(
      'payload_too_large',
    );
    const chunked = await send(A, '/v1/things', {
      key: k,
      method: 'POST',
      headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      body: 'y'.repeat(4000),
    });
    expect(chunked.status === 413 || chunked.status === 200).toBe(true);
    expect((await send(A, '/nope', { key: k })).code).toBe('not_found');
    expect((await send(A, '/', { key: k })).code).toBe('not_found');
    for (const gw of [A, B]) {
      for (const p of ['/healthz', '/readyz', '/metrics']) await send(gw, p, { key: k });
    }
    expect(responses.at(-2)!.status).toBe(503); // B's /readyz: the upstream is down
  });

  it('a key that cannot be verified while Redis hangs: 503, and the degraded-mode logs', async () => {
    redis.pause();
    try {
      const r = await send(B, '/v1/things', { key: keys.unverifiable!.key });
      expect([r.status, r.code]).toEqual([503, 'service_unavailable']);
    } finally {
      redis.resume();
    }
    await waitFor(async () => (await send(B, '/v1/things', { key: keys.unverifiable!.key })).status === 502, 'verified again once Redis answers', 30_000, 100);
    expect(B.proc.logs.some((l) => l.msg === 'api key could not be verified: key store unavailable')).toBe(true);
  });

  it('a rejected SIGHUP reload logs its errors', async () => {
    const good = config(up.url, 'trace');
    dir.write('a.yaml', { ...good, plans: { free: { perMinute: 'sixty', perDay: 1000 }, tiny: { perMinute: 2, perDay: 1000 } } });
    const before = A.proc.logs.length;
    A.proc.signal('SIGHUP');
    await A.proc.waitForLog('config reload rejected', { after: before });
    dir.write('a.yaml', good);
    A.proc.signal('SIGHUP');
    await A.proc.waitForLog('config reloaded', { after: before });
  });
});

describe('the scan', () => {
  const metricsTexts: string[] = [];
  let listOutput = '';

  beforeAll(async () => {
    for (const gw of [A, B]) {
      const text = await (await fetch(`${gw.url}/metrics`, { signal: AbortSignal.timeout(3000) })).text();
      metricsTexts.push(text);
    }
    listOutput = await keysCli('list', '--json');
    // Stop both, so every buffered log line (down to "stopped") is written before the scan.
    for (const gw of [A, B]) {
      gw.proc.signal('SIGTERM');
      expect((await gw.proc.waitForExit()).code).toBe(0);
      // waitForExit resolves on 'close': the process's stdout is read to its end, down to its last line.
      expect(gw.proc.logs.at(-1)?.msg).toBe('stopped');
    }
  });

  function where(): Array<[string, string]> {
    const out: Array<[string, string]> = [];
    for (const [name, gw] of [
      ['A', A],
      ['B', B],
    ] as const) {
      out.push([`gateway ${name} stdout (logs)`, gw.proc.stdout], [`gateway ${name} stderr`, gw.proc.stderr]);
    }
    for (const [i, t] of metricsTexts.entries()) out.push([`/metrics of gateway ${'AB'[i]}`, t]);
    for (const r of responses) out.push([`response to ${r.url} (${r.status})`, `${JSON.stringify(r.headers ?? {})}\n${r.body ?? ''}`]);
    for (const s of up.seen)
      out.push([`request received by the upstream (${s.url})`, `${s.url}\n${JSON.stringify(s.rawHeaders)}\n${s.body.toString('latin1')}`]);
    out.push(['keys list --json', listOutput]);
    return out;
  }

  it('the traffic was broad', () => {
    // A bound: the tests above add the secrets, and new tests add more.
    expect(secrets.size).toBeGreaterThanOrEqual(12);
    const statuses = new Set(responses.map((r) => r.status));
    for (const s of [200, 400, 401, 404, 410, 413, 429, 500, 502, 503, 504]) expect(statuses, `no ${s} in the traffic`).toContain(s);
    const codes = new Set(responses.map((r) => r.code));
    for (const c of [
      'missing_api_key',
      'invalid_api_key',
      'rate_limit_exceeded',
      'api_key_banned',
      'bad_gateway',
      'gateway_timeout',
      'service_unavailable',
      'payload_too_large',
      'gone',
      'not_found',
      'invalid_request',
    ]) {
      expect(codes, `no ${c} in the traffic`).toContain(c);
    }
    expect(A.proc.logs.length + B.proc.logs.length).toBeGreaterThan(responses.length);
    expect(
      metricValue(metricsTexts[0]!, 'tollgate_bans_total', { plan: 'tiny' }) ?? metricValue(metricsTexts[1]!, 'tollgate_bans_total', { plan: 'tiny' }),
    ).toBe(1);
    expect(up.seen.length).toBeGreaterThan(5);
  });

  it('no plaintext key or token, nor its SHA-256, in any log line, /metrics, response, upstream request or key listing', () => {
    const found: string[] = [];
    for (const [place, text] of where()) {
      for (const s of secrets) {
        if (text.includes(s)) found.push(`${place}: a plaintext key (${s.slice(0, 8)}…)`);
        if (text.includes(hashKey(s))) found.push(`${place}: the SHA-256 of a key (${s.slice(0, 8)}…)`);
      }
    }
    expect(found).toEqual([]);
  });

  it('nothing shaped like a key or a 64-hex hash anywhere, and no error body with a stack trace or internal address', () => {
    const found: string[] = [];
    for (const [place, text] of where()) {
      if (/tg_[0-9A-Za-z]{20,}/.test(text)) found.push(`${place}: something shaped like a key`);
      if (/(?<![0-9a-fA-F])[0-9a-f]{64}(?![0-9a-fA-F])/.test(text)) found.push(`${place}: something shaped like a SHA-256`);
    }
    expect(found).toEqual([]);
    for (const r of responses.filter((x) => (x.status ?? 0) >= 400)) {
      // Upstream bodies pass through unchanged; the gateway's own errors are checked.
      if (r.headers?.['content-type']?.startsWith('application/json') && /"status":/.test(r.body ?? '')) expect(leaksIn(r.body ?? ''), r.body).toEqual([]);
    }
  });
});
