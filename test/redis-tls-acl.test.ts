// Tollgate on a Redis reached over TLS (certificates made by the test with openssl) as an ACL user that holds only
// the commands, keys and channels Tollgate needs: the least-privilege ACL docs/redis.md documents. The gateway serves
// keyed and anonymous requests and /readyz, and every key command works; a wrong CA or password fails clearly.
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { composeGateway } from '../src/compose.js';
import { runCli, tempDir, withoutAudit } from './helpers/cli.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { startLimitsGateway, type LimitsGateway } from './helpers/limits.js';
import { freePort, TestRedis } from './helpers/redis-server.js';
import { makeCertificates, type TestCertificates } from './helpers/tls.js';
import { TestUpstream } from './helpers/upstream.js';

/**
 * The least-privilege ACL, as docs/redis.md gives it: Tollgate's keys and channel under its prefix, and the commands
 * its clients send (or its scripts run), nothing else.
 */
const TOLLGATE_ACL = [
  'on',
  '>s3cret-pw',
  'resetkeys',
  '~tollgate:*',
  'resetchannels',
  '&tollgate:*',
  '-@all',
  ...[
    'get',
    'getdel',
    'set',
    'del',
    'sadd',
    'smembers',
    'sscan',
    'scard',
    'pexpireat',
    'publish',
    'subscribe',
    'eval',
    'evalsha',
    'time',
    'hmget',
    'hset',
    'hget',
    'hgetall',
    'hincrby',
    'hkeys',
    'hdel',
    'srem',
    'incr',
    'incrby',
    'decr',
    'pexpire',
    'expire',
    'pttl',
    'ping',
    'info',
    'wait',
    'select',
    'client|setname',
    'config|get',
    'cluster|slots',
    'cluster|info',
  ].map((c) => `+${c}`),
];

let certs: TestCertificates;
let redis: TestRedis;
let tlsPort: number;
let up: TestUpstream;
let gw: LimitsGateway;

beforeAll(async () => {
  certs = makeCertificates();
  tlsPort = await freePort();
  redis = await TestRedis.start([
    '--tls-port',
    String(tlsPort),
    '--tls-cert-file',
    certs.certFile,
    '--tls-key-file',
    certs.keyFile,
    '--tls-ca-cert-file',
    certs.caFile,
    '--tls-auth-clients',
    'no',
    // redis-server takes a config directive's arguments as separate words.
    '--user',
    'tollgate',
    ...TOLLGATE_ACL,
  ]);
  up = await TestUpstream.start();
}, 60_000);

afterAll(async () => {
  await gw?.close();
  await up?.close();
  await redis?.stop();
  certs?.remove();
});

function redisSection(extra: Record<string, unknown> = {}) {
  return { url: `rediss://127.0.0.1:${tlsPort}`, username: 'tollgate', password: 's3cret-pw', tls: { caFile: certs.caFile }, ...extra };
}

describe('TLS and an ACL user with least privilege', () => {
  it('the gateway serves keyed and anonymous requests and is ready; Redis logged no ACL denial', async () => {
    gw = await startLimitsGateway(
      testConfig({ upstream: { url: up.url }, redis: redisSection(), plans: { free: { perMinute: 2, perDay: 100 } }, anonymous: { perMinute: 1 } }),
    );
    const { key } = await gw.createKey({ plan: 'free' });
    const get = async (k?: string) =>
      (await fetch(`${gw.url}/v1/categories`, { headers: k ? { authorization: `Bearer ${k}` } : {}, signal: AbortSignal.timeout(5000) })).status;
    expect([await get(key), await get(key), await get(key)]).toEqual([200, 200, 429]);
    expect([await get(), await get()]).toEqual([401, 429]);
    const ready = await fetch(`${gw.url}/readyz`);
    expect(ready.status).toBe(200);
    const admin = redis.client();
    try {
      expect(await admin.call('ACL', 'LOG')).toEqual([]);
      // Every connection of the gateway is the ACL user's, over TLS.
      const list = (await admin.client('LIST')) as string;
      const gatewayLines = list.split('\n').filter((l) => l.includes('name=tollgate-gateway'));
      expect(gatewayLines.length).toBeGreaterThan(0);
      for (const l of gatewayLines) expect(l).toContain('user=tollgate');
    } finally {
      admin.disconnect();
    }
  });

  it('the consumer portal (links, sessions, sign-in attempts, ended sessions) works as that user; no ACL denial', async () => {
    const composed = await composeGateway({
      config: testConfig({
        upstream: { url: up.url },
        redis: redisSection({ prefix: 'tollgate:portal:' }),
        plans: { free: { perMinute: 60, perDay: 1000 } },
        portal: { port: 0 },
      }),
      logger: silentLogger,
      env: {},
      healthChecks: false,
      delivery: false,
    });
    try {
      const portal = composed.portalApp!;
      await composed.consumerAdmin.create({ id: 'acme', name: 'Acme', plan: 'free' });
      const { code } = await composed.portalAccess.issueLink({ consumer: 'acme', actor: 'jane@acme.test', scopes: ['keys:read', 'usage:read'] });
      const link = await request(portal).get(`/link?code=${code}`);
      expect(link.status).toBe(303);
      const cookie = String(link.headers['set-cookie']).split(';')[0]!;
      expect((await request(portal).get('/api/me').set('cookie', cookie)).status).toBe(200);
      const { key } = await composed.admin.issuer.create({ plan: 'free', consumer: 'acme' });
      const signIn = await request(portal).post('/api/session').set('content-type', 'application/json').send({ key });
      expect(signIn.status).toBe(200);
      await composed.portalAccess.endSessions('acme', 'jane@acme.test');
      expect((await request(portal).get('/api/me').set('cookie', cookie)).status).toBe(401);
      await composed.consumerAdmin.suspend('acme');
      const admin = redis.client();
      try {
        expect(await admin.call('ACL', 'LOG')).toEqual([]);
      } finally {
        admin.disconnect();
      }
    } finally {
      await composed.close();
    }
  });

  it('every key command works as that user, the password from REDIS_PASSWORD', async () => {
    const dir = tempDir();
    try {
      const { password: _pw, ...withoutPassword } = redisSection({ prefix: 'tollgate:cli:' });
      const file = dir.write('gateway.yaml', { upstream: { url: up.url }, redis: withoutPassword });
      const cli = (...args: string[]) =>
        runCli([...(args[0] === 'consumers' ? args : ['keys', ...args]), '--config', file], { env: { REDIS_PASSWORD: 's3cret-pw' } });
      expect((await cli('consumers', 'create', '--id', 'acme', '--name', 'Acme', '--plan', 'free', '--max-keys', '3')).code).toBe(0);
      const created = await cli('create', '--plan', 'free', '--json');
      expect(withoutAudit(created.stderr)).toBe('');
      const id = (JSON.parse(created.stdout) as { id: string }).id;
      for (const args of [
        ['list'],
        ['show', id],
        ['update', id, '--plan', 'pro', '--metadata', '{"customer":"c_1"}'],
        ['update', id, '--consumer', 'acme'],
        ['consumers', 'show', 'acme'],
        ['consumers', 'list'],
        ['consumers', 'update', 'acme', '--per-month', '1000'],
        ['consumers', 'suspend', 'acme'],
        ['consumers', 'resume', 'acme'],
        ['rotate', id],
        ['unban', id],
        ['revoke', id],
        ['consumers', 'delete', 'acme'],
      ]) {
        const r = await cli(...args);
        expect(withoutAudit(r.stderr), args.join(' ')).toBe('');
        expect(r.code, args.join(' ')).toBe(0);
      }
      const denied = await runCli(['keys', 'list', '--config', file], { env: { REDIS_PASSWORD: 'wrong' } });
      expect(denied.code).toBe(1);
      // The line naming the config and Redis (never the password), then the one error line.
      expect(withoutAudit(denied.stderr).split('\n')).toHaveLength(1);
      expect(denied.stderr).not.toContain('wrong');
      // No command of any key command was refused by the ACL (the wrong password is an auth failure, not a denial).
      const admin = redis.client();
      try {
        const log = (await admin.call('ACL', 'LOG')) as unknown[][];
        const reasons = log.map((entry) => entry[entry.indexOf('reason') + 1]);
        expect(reasons).toContain('auth');
        expect(reasons.filter((r) => r !== 'auth')).toEqual([]);
      } finally {
        admin.disconnect();
      }
    } finally {
      dir.remove();
    }
  });

  it('a server certificate the configured CA did not sign: the gateway never connects (it starts degraded)', async () => {
    const config = testConfig({ upstream: { url: up.url }, redis: redisSection({ tls: { caFile: certs.otherCaFile }, commandTimeoutMs: 100 }) });
    const g = await composeGateway({ config, logger: silentLogger });
    try {
      expect(g.redis?.isReady()).toBe(false);
    } finally {
      await g.close();
    }
  });
});
