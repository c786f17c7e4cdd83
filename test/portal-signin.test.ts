// The consumer portal's listener in a real `tollgate serve` process (and an in-process gateway for the one case that
// needs no portal): key sign-in with its cookie (HttpOnly, SameSite=Strict, Path=/, Secure only over TLS), the
// refusals (revoked, unknown, no consumer, suspended), sign-ins limited per client address (another address is not
// affected, and X-Forwarded-For is not believed: server.trustProxy is false), the single-use link from the admin API
// (303 with a cookie, then 410 without one; the code never in the process's output), Referrer-Policy: no-referrer on
// every portal answer, the admin API's portal endpoints checked against docs/admin.openapi.yaml, and hostile input
// answered with a clear 4xx, never a 500. Requests come from different loopback source addresses (127.0.0.x) so each
// case has its own sign-in count.
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { generateKey } from '../src/keys/format.js';
import { composeGateway } from '../src/compose.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { assertBuilt, CliProcess, tempDir } from './helpers/cli.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { CheckedApi } from './helpers/openapi.js';
import { TestRedis } from './helpers/redis-server.js';
import { makeCertificates, type TestCertificates } from './helpers/tls.js';
import { TestUpstream } from './helpers/upstream.js';
import { waitFor } from './helpers/wait.js';

const TOKEN = generateAdminToken();
const SIGN_INS = 4;

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  json: Record<string, unknown>;
}

/** Every portal answer, for the Referrer-Policy check at the end. */
const portalAnswers: Array<{ what: string; headers: IncomingHttpHeaders; status: number }> = [];

interface PortalCall {
  body?: unknown;
  /** Sent as it is (a string) with `type`, else JSON. */
  type?: string | null;
  cookie?: string;
  origin?: string;
  /** The loopback address the request comes from. */
  from?: string;
  headers?: Record<string, string>;
  ca?: Buffer;
}

function call(base: string, method: string, path: string, o: PortalCall = {}): Promise<Answer> {
  const url = new URL(path, base);
  const headers: Record<string, string> = { ...o.headers };
  let payload: string | undefined;
  if (o.body !== undefined) {
    payload = typeof o.body === 'string' ? o.body : JSON.stringify(o.body);
    if (o.type !== null) headers['content-type'] = o.type ?? 'application/json';
  } else if (method !== 'GET' && o.type !== null) headers['content-type'] = o.type ?? 'application/json';
  if (payload !== undefined) headers['content-length'] = String(Buffer.byteLength(payload));
  if (o.cookie !== undefined) headers.cookie = o.cookie;
  if (o.origin !== undefined) headers.origin = o.origin;
  const make = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = make(url, { method, headers, localAddress: o.from ?? '127.0.0.1', ...(o.ca ? { ca: o.ca } : {}), agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        let json: Record<string, unknown> = {};
        try {
          json = JSON.parse(text) as Record<string, unknown>;
        } catch {
          // not JSON (the page, the link's refusal)
        }
        const answer = { status: res.statusCode!, headers: res.headers, text, json };
        if (url.origin === new URL(base).origin) portalAnswers.push({ what: `${method} ${url.pathname}`, headers: res.headers, status: answer.status });
        resolve(answer);
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** The tollgate_portal cookie's Set-Cookie line, if the answer set one. */
const setCookie = (a: Answer): string | undefined => (a.headers['set-cookie'] ?? []).find((c) => c.startsWith('tollgate_portal='));
const cookieOf = (a: Answer): string => setCookie(a)!.split(';')[0]!;
const attributes = (line: string): string[] =>
  line
    .split(';')
    .slice(1)
    .map((p) => p.trim().split('=')[0]!.toLowerCase());

let redis: TestRedis;
let up: TestUpstream;
let certs: TestCertificates;
const dir = tempDir();
let serve: CliProcess;
let portal: string;
let admin: CheckedApi;
let tlsServe: CliProcess;
let tlsPortal: string;
let tlsAdmin: CheckedApi;
let ca: Buffer;

let common: Record<string, unknown>;

async function startServe(config: Record<string, unknown>, name: string): Promise<{ proc: CliProcess; portal: string; admin: string }> {
  const proc = CliProcess.start(['serve', '--config', dir.write(name, config)]);
  try {
    const p = await proc.waitForLog('portal listening');
    const a = await proc.waitForLog('admin API listening');
    return { proc, portal: String(p.url), admin: String(a.url) };
  } catch (err) {
    await proc.stop();
    throw err;
  }
}

beforeAll(async () => {
  assertBuilt();
  [redis, up] = await Promise.all([TestRedis.start(), TestUpstream.start()]);
  certs = makeCertificates();
  ca = readFileSync(certs.caFile);
  common = {
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url },
    admin: { port: 0, tokens: [{ id: 'platform', sha256: hashAdminToken(TOKEN) }] },
    plans: { free: { perMinute: 60, perDay: 1000 } },
    log: { level: 'info' },
  };
  const plain = await startServe({ ...common, redis: { url: redis.url, prefix: 'psign:' }, portal: { port: 0, signInsPerMinute: SIGN_INS } }, 'plain.yaml');
  serve = plain.proc;
  portal = plain.portal;
  admin = new CheckedApi({ target: () => plain.admin, token: TOKEN });
  // Over TLS, without Redis (the memory stores), with a public URL for its links.
  const tls = await startServe(
    {
      ...common,
      portal: { port: 0, tls: { certFile: certs.certFile, keyFile: certs.keyFile }, publicUrl: 'https://portal.example.test', signInsPerMinute: SIGN_INS },
    },
    'tls.yaml',
  );
  tlsServe = tls.proc;
  tlsPortal = tls.portal;
  tlsAdmin = new CheckedApi({ target: () => tls.admin, token: TOKEN, doc: admin.doc });
  for (const api of [admin, tlsAdmin]) {
    expect((await api.call('POST', '/consumers', { body: { id: 'acme', name: 'Acme', plan: 'free' } })).status).toBe(201);
    expect((await api.call('POST', '/consumers', { body: { id: 'globex', name: 'Globex', plan: 'free' } })).status).toBe(201);
  }
}, 120_000);

afterAll(async () => {
  await serve?.stop();
  await tlsServe?.stop();
  await up?.close();
  await redis?.stop();
  certs?.remove();
  dir.remove();
});

async function newKey(api: CheckedApi, consumer?: string): Promise<{ id: string; key: string }> {
  const r = await api.call('POST', '/keys', { body: { plan: 'free', ...(consumer ? { consumer } : {}) } });
  expect(r.status).toBe(201);
  return { id: r.body.id as string, key: r.body.key as string };
}

describe('key sign-in', () => {
  it('a key of a consumer signs in: 200 Me, a cookie HttpOnly, SameSite=Strict, Path=/, not Secure over http; /api/me answers with it', async () => {
    const { id, key } = await newKey(admin, 'acme');
    const r = await call(portal, 'POST', '/api/session', { body: { key }, from: '127.0.0.2' });
    expect(r.status).toBe(200);
    expect(r.headers['cache-control']).toBe('no-store');
    expect(r.json).toMatchObject({
      consumer: { id: 'acme', name: 'Acme', plan: 'free', status: 'active' },
      session: { kind: 'key', keyId: id, scopes: ['keys:read', 'usage:read'] },
      canRegisterWebhooks: false,
    });
    const line = setCookie(r)!;
    expect(line).toMatch(/^tollgate_portal=[A-Za-z0-9_-]{43};/);
    expect(attributes(line)).toEqual(expect.arrayContaining(['httponly', 'path', 'samesite', 'max-age']));
    expect(line).toMatch(/; SameSite=Strict/);
    expect(line).toMatch(/; Path=\//);
    expect(line).toMatch(/; Max-Age=28800/);
    expect(attributes(line)).not.toContain('secure');
    const me = await call(portal, 'GET', '/api/me', { cookie: cookieOf(r) });
    expect(me.status).toBe(200);
    expect(me.json).toEqual(r.json);
    // The key itself is in no log line.
    expect(serve.stdout).not.toContain(key);
  });

  it('over TLS the cookie is Secure', async () => {
    const { key } = await newKey(tlsAdmin, 'acme');
    const r = await call(tlsPortal, 'POST', '/api/session', { body: { key }, from: '127.0.0.2', ca });
    expect(r.status).toBe(200);
    expect(attributes(setCookie(r)!)).toEqual(expect.arrayContaining(['secure', 'httponly', 'samesite', 'path']));
    // The configured public URL's origin is the portal's own.
    const end = await call(tlsPortal, 'POST', '/api/session/end', { cookie: cookieOf(r), origin: 'https://portal.example.test', ca });
    expect(end.status).toBe(204);
    expect(attributes((end.headers['set-cookie'] ?? [])[0]!)).toContain('secure');
  });

  it('behind a proxy that ends TLS (a plain listener, an https publicUrl) the cookie is Secure too', async () => {
    const behind = await startServe(
      { ...common, portal: { port: 0, publicUrl: 'https://portal.example.test', signInsPerMinute: SIGN_INS } },
      'behind-proxy.yaml',
    );
    try {
      const api = new CheckedApi({ target: () => behind.admin, token: TOKEN, doc: admin.doc });
      expect((await api.call('POST', '/consumers', { body: { id: 'acme', name: 'Acme', plan: 'free' } })).status).toBe(201);
      const { key } = await newKey(api, 'acme');
      const r = await call(behind.portal, 'POST', '/api/session', { body: { key }, from: '127.0.0.9' });
      expect(r.status).toBe(200);
      expect(attributes(setCookie(r)!)).toEqual(expect.arrayContaining(['secure', 'httponly', 'samesite', 'path']));
    } finally {
      await behind.proc.stop();
    }
  });

  it('revoked or unknown keys: 401 invalid_api_key; a key of no consumer: 403 forbidden; a suspended consumer: 403 consumer_suspended', async () => {
    const revoked = await newKey(admin, 'acme');
    expect((await admin.call('POST', `/keys/${revoked.id}/revoke`, { body: {} })).status).toBe(200);
    const loose = await newKey(admin);
    const suspended = await newKey(admin, 'globex');
    expect((await admin.call('POST', '/consumers/globex/suspend', { body: {} })).status).toBe(200);
    const from = '127.0.0.3';
    const r1 = await call(portal, 'POST', '/api/session', { body: { key: revoked.key }, from });
    expect([r1.status, r1.json.code]).toEqual([401, 'invalid_api_key']);
    const r2 = await call(portal, 'POST', '/api/session', { body: { key: 'tg_' + 'x'.repeat(40) }, from });
    expect([r2.status, r2.json.code]).toEqual([401, 'invalid_api_key']);
    const r3 = await call(portal, 'POST', '/api/session', { body: { key: loose.key }, from });
    expect([r3.status, r3.json.code]).toEqual([403, 'forbidden']);
    expect(r3.json.message).toContain('belongs to none');
    const r4 = await call(portal, 'POST', '/api/session', { body: { key: suspended.key }, from });
    expect([r4.status, r4.json.code]).toEqual([403, 'consumer_suspended']);
    for (const r of [r1, r2, r3, r4]) expect(setCookie(r)).toBeUndefined();
    expect((await admin.call('POST', '/consumers/globex/resume', { body: {} })).status).toBe(200);
  });

  it(`${SIGN_INS} sign-ins per address per minute: the next is 429 with Retry-After; another address is not affected; X-Forwarded-For is not believed`, async () => {
    const { key } = await newKey(admin, 'acme');
    const from = '127.0.0.40';
    const answers: Answer[] = [];
    for (let i = 0; i < SIGN_INS; i++) answers.push(await call(portal, 'POST', '/api/session', { body: { key: i % 2 ? key : 'tg_wrong_' + i }, from }));
    expect(answers.map((a) => a.status)).toEqual(Array.from({ length: SIGN_INS }, (_, i) => (i % 2 ? 200 : 401)));
    const over = await call(portal, 'POST', '/api/session', { body: { key }, from });
    expect([over.status, over.json.code]).toEqual([429, 'rate_limit_exceeded']);
    const after = Number(over.headers['retry-after']);
    expect(after).toBeGreaterThanOrEqual(1);
    expect(after).toBeLessThanOrEqual(60);
    expect(setCookie(over)).toBeUndefined();
    // A forwarded address from the same peer counts as the peer.
    const forwarded = await call(portal, 'POST', '/api/session', { body: { key }, from, headers: { 'x-forwarded-for': '198.51.100.7' } });
    expect(forwarded.status).toBe(429);
    const other = await call(portal, 'POST', '/api/session', { body: { key }, from: '127.0.0.41' });
    expect(other.status).toBe(200);
  });
});

describe('sign-in links', () => {
  it('POST portal-links on the admin API, then GET /link: 303 to / with a cookie; used again: 410 and no cookie; the code never in the log', async () => {
    const issued = await admin.call('POST', '/consumers/acme/portal-links', { body: { actor: 'alice@acme.test', scopes: ['keys:read', 'usage:read'] } });
    expect(issued.status).toBe(201);
    expect(issued.headers['cache-control']).toBe('no-store');
    const code = issued.body.code as string;
    expect(issued.body).toMatchObject({ consumer: 'acme', actor: 'alice@acme.test', scopes: ['keys:read', 'usage:read'] });
    expect(issued.body.url).toBe(`${portal}/link?code=${code}`);
    expect(Date.parse(issued.body.expiresAt as string) - Date.now()).toBeGreaterThan(14 * 60_000);
    // A HEAD does not use the link up.
    const head = await call(portal, 'HEAD', `/link?code=${code}`, { type: null });
    expect(head.status).toBe(204);
    expect(setCookie(head)).toBeUndefined();
    const first = await call(portal, 'GET', `/link?code=${code}`);
    expect(first.status).toBe(303);
    expect(first.headers.location).toBe('/');
    expect(first.headers['cache-control']).toBe('no-store');
    expect(attributes(setCookie(first)!)).toEqual(expect.arrayContaining(['httponly', 'samesite', 'path']));
    const me = await call(portal, 'GET', '/api/me', { cookie: cookieOf(first) });
    expect(me.json).toMatchObject({ consumer: { id: 'acme' }, session: { kind: 'link', actor: 'alice@acme.test', scopes: ['keys:read', 'usage:read'] } });
    const again = await call(portal, 'GET', `/link?code=${code}`);
    expect(again.status).toBe(410);
    expect(setCookie(again)).toBeUndefined();
    expect(again.headers['content-type']).toMatch(/^text\/html/);
    expect(again.text).toContain('This sign-in link has been used, has expired or was withdrawn. Ask for a new one where you got it.');
    expect(again.text).not.toContain('<script');
    expect(again.headers['content-security-policy']).toContain("default-src 'none'");
    // The request log has the path, never the query; the audit line names the actor and scopes, never the code.
    const linkLines = () => serve.logs.filter((l) => l.msg === 'portal request' && (l.req as { path?: string }).path === '/link');
    await waitFor(() => linkLines().length >= 3, 'the /link requests logged');
    expect(linkLines().map((l) => [(l.req as { method: string }).method, (l.res as { statusCode: number }).statusCode])).toEqual([
      ['HEAD', 204],
      ['GET', 303],
      ['GET', 410],
    ]);
    const audit = serve.logs.find((l) => l.msg === 'admin change' && l.action === 'portal.link');
    expect(audit).toMatchObject({ consumerId: 'acme', portalActor: 'alice@acme.test', scopes: ['keys:read', 'usage:read'], by: 'platform' });
    expect(serve.stdout).not.toContain(code);
    expect(serve.stderr).not.toContain(code);
    expect(serve.stdout).not.toContain(cookieOf(first).split('=')[1]!);
  });

  it("the link's URL starts with portal.publicUrl when it is set", async () => {
    const issued = await tlsAdmin.call('POST', '/consumers/acme/portal-links', { body: { actor: 'bob', scopes: ['usage:read'] } });
    expect(issued.status).toBe(201);
    expect(issued.body.url).toBe(`https://portal.example.test/link?code=${issued.body.code}`);
    const used = await call(tlsPortal, 'GET', `/link?code=${issued.body.code}`, { ca });
    expect(used.status).toBe(303);
    expect(attributes(setCookie(used)!)).toContain('secure');
  });

  it("DELETE portal-sessions ends the consumer's sessions (or one actor's) at once; links for unknown or suspended consumers are refused", async () => {
    const link = async (actor: string) =>
      cookieOf(
        await call(
          portal,
          'GET',
          `/link?code=${(await admin.call('POST', '/consumers/acme/portal-links', { body: { actor, scopes: ['keys:read'] } })).body.code}`,
        ),
      );
    const carol = await link('carol');
    const dave = await link('dave');
    const ended = await admin.call('DELETE', '/consumers/acme/portal-sessions?actor=carol');
    expect(ended.status).toBe(200);
    expect(ended.body).toMatchObject({ consumer: 'acme', actor: 'carol' });
    expect((await call(portal, 'GET', '/api/me', { cookie: carol })).status).toBe(401);
    expect((await call(portal, 'GET', '/api/me', { cookie: dave })).status).toBe(200);
    const all = await admin.call('DELETE', '/consumers/acme/portal-sessions');
    expect(all.body).toMatchObject({ consumer: 'acme', actor: null });
    const me = await call(portal, 'GET', '/api/me', { cookie: dave });
    expect([me.status, me.json.code]).toEqual([401, 'portal_session_required']);
    expect(serve.logs.filter((l) => l.msg === 'admin change' && l.action === 'portal.sessions.end').length).toBeGreaterThanOrEqual(2);

    expect((await admin.call('POST', '/consumers/nobody/portal-links', { body: { actor: 'x', scopes: ['keys:read'] } })).status).toBe(404);
    expect((await admin.call('DELETE', '/consumers/nobody/portal-sessions')).status).toBe(404);
    expect((await admin.call('POST', '/consumers/globex/suspend', { body: {} })).status).toBe(200);
    const refused = await admin.call('POST', '/consumers/globex/portal-links', { body: { actor: 'x', scopes: ['keys:read'] } });
    expect([refused.status, refused.body.code]).toEqual([403, 'consumer_suspended']);
    expect((await admin.call('POST', '/consumers/globex/resume', { body: {} })).status).toBe(200);
  });

  it('suspending the consumer ends its portal sessions, and they stay ended after the resume', async () => {
    const { key } = await newKey(admin, 'globex');
    const signedIn = await call(portal, 'POST', '/api/session', { body: { key }, from: '127.0.0.5' });
    expect(signedIn.status).toBe(200);
    expect((await admin.call('POST', '/consumers/globex/suspend', { body: {} })).status).toBe(200);
    expect((await call(portal, 'GET', '/api/me', { cookie: cookieOf(signedIn) })).status).toBe(401);
    expect((await admin.call('POST', '/consumers/globex/resume', { body: {} })).status).toBe(200);
    expect((await call(portal, 'GET', '/api/me', { cookie: cookieOf(signedIn) })).status).toBe(401);
    await new Promise((r) => setTimeout(r, 5));
    expect((await call(portal, 'POST', '/api/session', { body: { key }, from: '127.0.0.5' })).status).toBe(200);
  });

  it('409 portal_off when the gateway has neither portal.port nor portal.publicUrl', async () => {
    const config = testConfig({
      server: { host: '127.0.0.1', port: 0 },
      upstream: { url: up.url },
      admin: { port: 0, tokens: [{ id: 'platform', sha256: hashAdminToken(TOKEN) }] },
      plans: { free: { perMinute: 60, perDay: 1000 } },
    });
    const gateway = await composeGateway({ config, logger: silentLogger, env: {}, upstreamCheckTimeoutMs: 200 });
    let gw: RunningGateway | undefined;
    try {
      gw = await startGateway({ gateway, logger: silentLogger });
      expect(gw.portalUrl).toBeUndefined();
      const api = new CheckedApi({ target: () => gw!.adminUrl!, token: TOKEN, doc: admin.doc });
      expect((await api.call('POST', '/consumers', { body: { id: 'acme', name: 'Acme', plan: 'free' } })).status).toBe(201);
      const r = await api.call('POST', '/consumers/acme/portal-links', { body: { actor: 'x', scopes: ['keys:read'] } });
      expect([r.status, r.body.code]).toEqual([409, 'portal_off']);
      expect(api.problems).toEqual([]);
    } finally {
      await (gw ? gw.shutdown() : gateway.close());
    }
  });
});

describe("key records keep the key's last 4 characters", () => {
  it('written at create, rotate and a plaintext import (not a hash import); the limit script takes such records', async () => {
    const gateway = String(serve.logs.find((l) => l.msg === 'tollgate gateway listening')!.url);
    const created = await newKey(admin, 'acme');
    const shown = await admin.call('GET', `/keys/${created.id}`);
    expect(shown.body.last4).toBe(created.key.slice(-4));
    const rotated = await admin.call('POST', `/keys/${created.id}/rotate`, { body: {} });
    expect(rotated.status).toBe(200);
    expect(rotated.body.last4).toBe((rotated.body.key as string).slice(-4));
    expect((await admin.call('GET', `/keys/${created.id}`)).body.last4).toBe((rotated.body.key as string).slice(-4));
    const plaintext = generateKey();
    const imported = await admin.call('POST', '/keys/import', {
      body: [
        { id: 'imported-plain', plan: 'free', key: plaintext },
        { id: 'imported-hash', plan: 'free', sha256: 'b'.repeat(64) },
      ],
    });
    expect(imported.body.imported).toBe(2);
    expect((await admin.call('GET', '/keys/imported-plain')).body.last4).toBe(plaintext.slice(-4));
    expect((await admin.call('GET', '/keys/imported-hash')).body).not.toHaveProperty('last4');
    for (const key of [rotated.body.key as string, plaintext]) {
      const r = await fetch(`${gateway}/v1/anything`, { headers: { authorization: `Bearer ${key}` } });
      expect(r.status).toBe(200);
    }
  });
});

describe('hostile input: a clear 4xx, never a 500', () => {
  it('on the portal', async () => {
    const from = '127.0.0.60';
    const cases: Array<[string, Answer, number, string?]> = [
      ['oversize body', await call(portal, 'POST', '/api/session', { body: { key: 'k'.repeat(40_000) }, from }), 413, 'payload_too_large'],
      ['not JSON', await call(portal, 'POST', '/api/session', { body: '{"key": ', from }), 400, 'invalid_json'],
      [
        'wrong content-type',
        await call(portal, 'POST', '/api/session', { body: 'key=abc', type: 'application/x-www-form-urlencoded', from }),
        403,
        'forbidden',
      ],
      ['no content-type', await call(portal, 'POST', '/api/session/end', { type: null, from }), 403, 'forbidden'],
      ['Origin from elsewhere', await call(portal, 'POST', '/api/session', { body: { key: 'x' }, origin: 'https://evil.example', from }), 403, 'forbidden'],
      ['a key that is not a string', await call(portal, 'POST', '/api/session', { body: { key: ['a'] }, from: '127.0.0.61' }), 400, 'invalid_request'],
      ['a JSON array', await call(portal, 'POST', '/api/session', { body: [1, 2], from: '127.0.0.61' }), 400, 'invalid_request'],
      ['forged cookie', await call(portal, 'GET', '/api/me', { cookie: `tollgate_portal=${'A'.repeat(43)}` }), 401, 'portal_session_required'],
      ['garbage cookie', await call(portal, 'GET', '/api/me', { cookie: 'tollgate_portal=%00%ff;;==; x' }), 401, 'portal_session_required'],
      ['huge cookie', await call(portal, 'GET', '/api/me', { cookie: `tollgate_portal=${'z'.repeat(6000)}` }), 401, 'portal_session_required'],
      ['no cookie', await call(portal, 'GET', '/api/me'), 401, 'portal_session_required'],
      ['unknown API path', await call(portal, 'GET', '/api/nothing-here'), 401, 'portal_session_required'],
      ['unknown page', await call(portal, 'GET', '/nothing-here'), 404, 'not_found'],
      ['link without code', await call(portal, 'GET', '/link'), 410],
      ['link with two codes', await call(portal, 'GET', `/link?code=${'A'.repeat(43)}&code=${'B'.repeat(43)}`), 410],
      ['link with garbage', await call(portal, 'GET', '/link?code=%00%ff%fe'), 410],
    ];
    // A cookie of a session that was ended.
    const { key } = await newKey(admin, 'acme');
    const signedIn = await call(portal, 'POST', '/api/session', { body: { key }, from: '127.0.0.62' });
    expect((await call(portal, 'POST', '/api/session/end', { cookie: cookieOf(signedIn) })).status).toBe(204);
    cases.push(['ended session', await call(portal, 'GET', '/api/me', { cookie: cookieOf(signedIn) }), 401, 'portal_session_required']);
    for (const [what, answer, status, code] of cases) {
      expect(answer.status, what).toBe(status);
      if (code) expect(answer.json.code, what).toBe(code);
    }
  });

  it('on the admin API: bad actors and scopes are 400 with every problem; nothing is issued', async () => {
    const bodies: Array<[string, unknown]> = [
      ['control character in actor', { actor: 'alice\u0000', scopes: ['keys:read'] }],
      ['newline in actor', { actor: 'alice\nbob', scopes: ['keys:read'] }],
      ['empty actor', { actor: '', scopes: ['keys:read'] }],
      ['long actor', { actor: 'a'.repeat(201), scopes: ['keys:read'] }],
      ['unknown scope', { actor: 'a', scopes: ['keys:admin'] }],
      ['1,000 scopes', { actor: 'a', scopes: Array.from({ length: 1000 }, (_, i) => `scope${i}`) }],
      ['repeated scope', { actor: 'a', scopes: ['keys:read', 'keys:read'] }],
      ['no scopes', { actor: 'a', scopes: [] }],
      ['webhooks:write while portal.webhooks is false', { actor: 'a', scopes: ['webhooks:write'] }],
      ['sessionHours 25', { actor: 'a', scopes: ['keys:read'], sessionHours: 25 }],
      ['a consumer in the body', { actor: 'a', scopes: ['keys:read'], consumer: 'globex' }],
      ['not an object', ['a']],
    ];
    for (const [what, body] of bodies) {
      const r = await admin.call('POST', '/consumers/acme/portal-links', { body });
      expect(r.status, what).toBe(400);
      expect(r.body.code, what).toBe('invalid_request');
      expect(r.text.length, what).toBeLessThan(2000);
      expect(r.body.code).not.toBe(undefined);
    }
    const notJson = await admin.call('POST', '/consumers/acme/portal-links', { body: '{', type: 'application/json' });
    expect([notJson.status, notJson.body.code]).toEqual([400, 'invalid_json']);
    const badQuery = await admin.call('DELETE', '/consumers/acme/portal-sessions?actor=a%07b');
    expect(badQuery.status).toBe(400);
    const twice = await admin.call('DELETE', '/consumers/acme/portal-sessions?actor=a&actor=b');
    expect(twice.status).toBe(400);
    expect(serve.logs.filter((l) => l.msg === 'admin change' && l.action === 'portal.link' && l.consumerId === 'acme' && l.portalActor === 'a')).toEqual([]);
  });
});

describe('every portal answer', () => {
  it('carries Referrer-Policy: no-referrer and the page CSP; none was a 5xx', async () => {
    const page = await call(portal, 'GET', '/');
    expect(page.status).toBe(200);
    expect(page.text).toContain('<script type="module" src="/assets/app.js"></script>');
    expect(portalAnswers.length).toBeGreaterThan(30);
    for (const a of portalAnswers) {
      expect(a.headers['referrer-policy'], a.what).toBe('no-referrer');
      expect(a.headers['content-security-policy'], a.what).toContain("script-src 'self'");
      expect(a.status, a.what).toBeLessThan(500);
    }
    expect(serve.logs.filter((l) => l.msg === 'portal request failed')).toEqual([]);
  });

  it('the admin answers matched docs/admin.openapi.yaml, and both portal operations were tried', () => {
    expect(admin.problems).toEqual([]);
    expect(tlsAdmin.problems).toEqual([]);
    for (const op of [
      'createPortalLink 201',
      'createPortalLink 400',
      'createPortalLink 403',
      'createPortalLink 404',
      'createPortalLink 409',
      'endPortalSessions 200',
      'endPortalSessions 404',
    ])
      expect([...admin.doc.seen], op).toContain(op);
  });
});
