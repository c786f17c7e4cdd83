// A key read from a header or a query parameter never leaves the gateway, whatever its shape: `tollgate serve` as a
// child process (its log lines captured), keys in a real redis-server, a real upstream and a real OTLP/HTTP receiver
// on loopback. A foreign key is sent through every source and on every kind of answer (200, 401, 400 before
// authentication, 404 outside /v1, 502 from a broken upstream); then every output is searched for it: the gateway's
// stdout and stderr, the exported spans, /metrics, what the upstream received, every answer's headers and body.
// Also the CLI's side: `keys create` and `keys generate` issue keys with the configured prefix.
import { createServer, request as httpRequest, type OutgoingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey, generateKeyId, hashKey } from '../src/keys/format.js';
import { RedisKeyStore } from '../src/keys/redis-store.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { connectRedis, type RedisConnection } from '../src/storage/redis.js';
import { assertBuilt, cliOk, runCli, startServe, tempDir, type CliProcess } from './helpers/cli.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';
import { waitFor } from './helpers/wait.js';

// A legacy key of another system's shape, and one that is not stored: neither may appear anywhere.
const LEGACY = 'sk_live_51HxQz8Lm3Vb9TqWc2Ry7Pk';
const UNKNOWN = 'sk_live_UnknownLegacyKey9876543';
const PREFIX = 'redact:';

let redis: TestRedis;
let conn: RedisConnection;
let up: TestUpstream;
let receiver: Server;
let receiverUrl: string;
const exported: string[] = [];
let dir: ReturnType<typeof tempDir>;
let gw: { proc: CliProcess; url: string; port: number } | undefined;

beforeAll(async () => {
  assertBuilt();
  redis = await TestRedis.start();
  conn = connectRedis({ url: redis.url, commandTimeoutMs: 2000, purpose: 'cli' });
  up = await TestUpstream.start();
  up.behaviour = (req, res, body) => {
    if (req.url?.startsWith('/v1/broken')) return req.socket.destroy();
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ url: req.url, headers: req.headers, bodyLength: body.length }));
  };
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      exported.push(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  dir = tempDir();
}, 120_000);

afterAll(async () => {
  await gw?.proc.stop();
  await conn?.close();
  await new Promise((r) => receiver?.close(r));
  await up?.close();
  await redis?.stop();
  dir?.remove();
});

interface Answer {
  status: number;
  head: string;
  body: string;
}

function send(port: number, path: string, headers: OutgoingHttpHeaders = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, head: JSON.stringify(res.rawHeaders), body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.setTimeout(5000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

/** Every form a key may take in text: as sent, %-escaped, JSON-escaped, and a long piece of it. */
function forms(key: string): string[] {
  return [key, encodeURIComponent(key), JSON.stringify(key).slice(1, -1), key.slice(4, 24)];
}

describe('a key from any source never leaves the gateway', () => {
  it('is absent from logs, spans, metrics, the upstream request, error bodies and X-Request-Id', async () => {
    await new RedisKeyStore(conn, new Keyspace(PREFIX)).create({
      id: generateKeyId(),
      plan: 'free',
      createdAt: new Date().toISOString(),
      status: 'active',
      hash: hashKey(LEGACY),
    });
    const file = dir.write('gateway.yaml', {
      server: { host: '127.0.0.1', port: 0 },
      upstream: { url: up.url, timeoutMs: 2000 },
      redis: { url: redis.url, prefix: PREFIX },
      plans: { free: { perMinute: 1000, perDay: 10_000 } },
      routes: [{ method: 'GET', path: '/v1/things/:id' }],
      tracing: { otlpEndpoint: receiverUrl, exportIntervalMs: 100 },
      log: { level: 'debug' },
      auth: { sources: ['bearer', 'header:X-API-Key', 'query:api_key'], foreignKeys: true },
    });
    gw = await startServe(file);
    const port = gw.port;
    const answers: Answer[] = [];
    const call = async (path: string, headers: OutgoingHttpHeaders, status: number): Promise<void> => {
      const a = await send(port, path, headers);
      expect(a.status, `${path} ${JSON.stringify(headers)}: ${a.body}`).toBe(status);
      answers.push(a);
    };
    const q = (key: string): string => encodeURIComponent(key);
    for (const key of [LEGACY, UNKNOWN]) {
      const ok = key === LEGACY ? 200 : 401;
      await call('/v1/things/1', { authorization: `Bearer ${key}` }, ok);
      await call('/v1/things/2', { 'x-api-key': key }, ok);
      await call(`/v1/things/3?b=1&api_key=${q(key)}`, {}, ok);
      await call(`/v1/things/4?api_key=${key}&z=9`, { 'x-request-id': key }, ok);
      await call('/v1/things/5', { 'x-api-key': key, 'x-request-id': `req-${key}` }, ok);
      await call(`/ratelimit?api_key=${q(key)}`, {}, ok);
      // Refused before authentication, outside /v1, two keys, and an upstream that breaks the connection.
      await call(`/v1/a/../b?api_key=${q(key)}`, { 'x-api-key': key }, 400);
      await call(`/elsewhere?api_key=${q(key)}`, { 'x-api-key': key }, 404);
      await call(`/v1/things/6?api_key=${q(key)}`, { 'x-api-key': 'sk_live_AnotherKeyEntirely000' }, 401);
      if (key === LEGACY) await call(`/v1/broken?api_key=${q(key)}`, { 'x-api-key': key }, 502);
    }
    const metrics = await send(port, '/metrics');
    expect(metrics.status).toBe(200);
    // The access log line of the last request, and the spans of them all, are out.
    await waitFor(
      () => gw!.proc.logs.filter((l) => l.msg === 'request completed' || l.msg === 'request errored').length >= answers.length + 1,
      'an access log line per request',
      30_000,
    );
    await waitFor(() => exported.join('').includes('/v1/broken'), 'the spans exported', 30_000);
    await gw.proc.stop();

    // The outputs really were captured: the URLs are logged (their key parameters redacted), spans exported.
    const logs = gw.proc.stdout + gw.proc.stderr;
    expect(logs).toContain('/v1/things/3?b=1&api_key=[redacted]');
    expect(logs).toContain('/v1/things/4?api_key=[redacted]&z=9');
    expect(logs).toContain('upstream request failed');
    expect(exported.join('')).toContain('tollgate.authenticate');
    // The legacy key's five proxied calls with the key parameters stripped, and the broken one with its one retry
    // (upstream.retries defaults to 1; a reset connection retries an idempotent GET).
    expect(up.seen.map((s) => s.url)).toEqual([
      '/v1/things/1',
      '/v1/things/2',
      '/v1/things/3?b=1',
      '/v1/things/4?z=9',
      '/v1/things/5',
      '/v1/broken',
      '/v1/broken',
    ]);

    const outputs: Record<string, string> = {
      logs,
      spans: exported.join('\n'),
      metrics: metrics.body,
      upstream: JSON.stringify(up.seen.map((s) => ({ url: s.url, rawHeaders: s.rawHeaders, body: s.body.toString('utf8') }))),
      answers: JSON.stringify(answers),
    };
    for (const key of [LEGACY, UNKNOWN])
      for (const form of forms(key)) for (const [where, text] of Object.entries(outputs)) expect(text.includes(form), `${where} holds ${form}`).toBe(false);
  }, 60_000);
});

describe('a key under another spelling of a query source, or in the path, is not logged in clear', () => {
  it('the access log redacts ?API_KEY=, ?api_key[]=, ?Api_Key%5B0%5D= and an issued key in a path segment', async () => {
    const foreign = 'sk_live_OtherSpellingKey4242xyz';
    const issued = generateKey();
    const file = dir.write('spellings.yaml', {
      server: { host: '127.0.0.1', port: 0 },
      upstream: { url: up.url, timeoutMs: 2000 },
      redis: { url: redis.url, prefix: 'spell:' },
      plans: { free: { perMinute: 1000, perDay: 10_000 } },
      routes: [{ method: 'GET', path: '/v1/things/:id' }],
      auth: { sources: ['bearer', 'query:api_key'], foreignKeys: true },
    });
    const serve = await startServe(file);
    try {
      const paths = [
        `/v1/things/1?API_KEY=${foreign}`,
        `/v1/things/2?x=1&api_key[]=${foreign}`,
        `/v1/things/3?Api_Key%5B0%5D=${encodeURIComponent(foreign)}&api_key%5b%5d=${foreign}`,
        `/v1/things/${issued}?z=1`,
      ];
      // None of them carries a key under the configured name: each is refused as missing one, and logged.
      for (const path of paths) expect((await send(serve.port, path)).status, path).toBe(401);
      await waitFor(() => serve.proc.logs.filter((l) => l.msg === 'request completed').length >= paths.length, 'an access log line per request', 30_000);
      const urls = serve.proc.logs.filter((l) => l.msg === 'request completed').map((l) => (l.req as { url: string }).url);
      expect(urls).toEqual([
        '/v1/things/1?API_KEY=[redacted]',
        '/v1/things/2?x=1&api_key[]=[redacted]',
        '/v1/things/3?Api_Key%5B0%5D=[redacted]&api_key%5b%5d=[redacted]',
        `/v1/things/${issued.slice(0, 3)}[redacted]?z=1`,
      ]);
      const logs = serve.proc.stdout + serve.proc.stderr;
      for (const form of [...forms(foreign), ...forms(issued)]) expect(logs.includes(form), `the logs hold ${form}`).toBe(false);
    } finally {
      await serve.proc.stop();
    }
  }, 120_000);
});

describe('a key with a recorded prefix (imported, or rotated with --keep-prefix) is not logged in clear where it does not belong', () => {
  it('the access log redacts it in a path segment and in a parameter no source names, by the prefix the store records', async () => {
    // A key rotated with --keep-prefix: the record keeps the imported key's prefix, and the new key starts with it.
    const rotated = generateKey('sk_live_');
    const sameIssuer = `sk_live_${'Q7'.repeat(12)}`;
    const kept = 'kept:';
    await new RedisKeyStore(conn, new Keyspace(kept)).create({
      id: generateKeyId(),
      plan: 'free',
      createdAt: new Date().toISOString(),
      status: 'active',
      hash: hashKey(rotated),
      prefix: 'sk_live_',
    });
    const file = dir.write('kept.yaml', {
      server: { host: '127.0.0.1', port: 0 },
      upstream: { url: up.url, timeoutMs: 2000 },
      redis: { url: redis.url, prefix: kept },
      plans: { free: { perMinute: 1000, perDay: 10_000 } },
      routes: [{ method: 'GET', path: '/v1/things/:id' }],
      auth: { sources: ['bearer'], foreignKeys: true },
    });
    const serve = await startServe(file);
    try {
      // The key filter reads every record at start-up: from then on the gateway knows the prefix.
      await waitFor(() => serve.proc.logs.some((l) => l.msg === 'key filter built'), 'the key filter built', 10_000);
      const paths = [`/v1/things/${rotated}`, `/v1/things/1?token=${rotated}&z=1`, `/v1/things/2?session=${sameIssuer}`];
      for (const path of paths) expect((await send(serve.port, path)).status, path).toBe(401);
      const echoed = await send(serve.port, '/v1/things/3', { 'x-request-id': rotated });
      expect(echoed.head).not.toContain(rotated);
      await waitFor(() => serve.proc.logs.filter((l) => l.msg === 'request completed').length >= paths.length + 1, 'an access log line per request', 30_000);
      const urls = serve.proc.logs.filter((l) => l.msg === 'request completed').map((l) => (l.req as { url: string }).url);
      expect(urls.slice(0, 3)).toEqual([
        '/v1/things/sk_live_[redacted]',
        '/v1/things/1?token=sk_live_[redacted]&z=1',
        '/v1/things/2?session=sk_live_[redacted]',
      ]);
      // The key itself, in a bearer header, still opens its key.
      expect((await send(serve.port, '/v1/things/4', { authorization: `Bearer ${rotated}` })).status).toBe(200);
      const logs = serve.proc.stdout + serve.proc.stderr;
      for (const form of [...forms(rotated), ...forms(sameIssuer)]) expect(logs.includes(form), `the logs hold ${form}`).toBe(false);
    } finally {
      await serve.proc.stop();
    }
  }, 30_000);
});

describe('the CLI issues keys with auth.issuedPrefix', () => {
  it('keys create and keys generate print keys with the configured prefix', async () => {
    const file = dir.write('prefixed.yaml', {
      redis: { url: redis.url, prefix: 'prefixed:' },
      plans: { free: { perMinute: 10, perDay: 100 } },
      auth: { issuedPrefix: 'acme_' },
    });
    const created = await cliOk(['keys', 'create', '--plan', 'free', '--json', '--config', file]);
    expect((JSON.parse(created.stdout) as { key: string }).key).toMatch(/^acme_[0-9A-Za-z]{49}$/);
    const generated = await cliOk(['keys', 'generate', '--json', '--config', file]);
    expect((JSON.parse(generated.stdout) as { key: string }).key).toMatch(/^acme_[0-9A-Za-z]{49}$/);
    expect((JSON.parse((await cliOk(['keys', 'generate', '--json'])).stdout) as { key: string }).key).toMatch(/^tg_/);
  });

  it('config check refuses a bad source with one line naming the path', async () => {
    const file = dir.write('bad.yaml', { auth: { sources: ['bearer', 'header:Cookie'] } });
    const r = await runCli(['config', 'check', '--config', file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('auth.sources[1]: "header:Cookie": Cookie cannot carry an API key');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
