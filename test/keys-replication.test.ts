// Key changes and replication, on real redis-server processes: a primary with one replica (replicaof), and a
// standalone Redis without any. Every change (create, rotate, update, revoke, unban) waits for a replica and answers
// `replication: {expected, acked}`, through the built CLI (--json) and the admin API (checked against
// docs/admin.openapi.yaml). With the replica paused or gone, the answer says {expected: 1, acked: 0} and the CLI warns
// on stderr; without replicas, {expected: 0, acked: 0} and no warning.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { composeGateway } from '../src/compose.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { Metrics } from '../src/observability/metrics.js';
import { assertBuilt, runCli, tempDir, withoutAudit, type CliResult } from './helpers/cli.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { metricValue, waitFor } from './helpers/limits.js';
import { CheckedApi } from './helpers/openapi.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';

const TOKEN = generateAdminToken();
const PLANS = { free: { perMinute: 100, perDay: 1000 }, pro: { perMinute: 200, perDay: 2000 }, busy: { perMinute: 100_000, perDay: 1_000_000 } };

let primary: TestRedis;
let replica: TestRedis;
let lone: TestRedis;
let up: TestUpstream;
let gw: RunningGateway;
const metrics = new Metrics();
let dir: ReturnType<typeof tempDir>;
const adminApi = new CheckedApi({ target: () => gw.adminUrl!, token: TOKEN });

const fileFor = (url: string, extra: Record<string, unknown> = {}, name = `c-${url.replace(/\W/g, '')}-${Object.keys(extra).length}.yaml`) =>
  dir.write(name, { redis: { url, prefix: 'rep:', ...extra }, plans: PLANS });

async function linked(): Promise<boolean> {
  const c = replica.client();
  try {
    return /^master_link_status:up/m.test(await c.info('replication'));
  } finally {
    c.disconnect();
  }
}

beforeAll(async () => {
  assertBuilt();
  dir = tempDir();
  [primary, lone, up] = await Promise.all([TestRedis.start(), TestRedis.start(), TestUpstream.start()]);
  replica = await TestRedis.start(['--replicaof', '127.0.0.1', String(primary.port)]);
  await waitFor(linked, 'the replica linked to its primary', 30_000);
  const gateway = await composeGateway({
    config: testConfig({
      server: { host: '127.0.0.1', port: 0 },
      upstream: { url: up.url },
      // The request path's budget as a production config would set it: far below the second a WAIT may take.
      redis: { url: primary.url, prefix: 'rep:', commandTimeoutMs: 200, failMode: 'open' },
      admin: { port: 0, tokens: [{ id: 'portal', sha256: hashAdminToken(TOKEN) }] },
      plans: PLANS,
    }),
    logger: silentLogger,
    metrics,
    env: {},
    upstreamCheckTimeoutMs: 500,
  });
  gw = await startGateway({ gateway, logger: silentLogger });
}, 120_000);

afterAll(async () => {
  await gw?.shutdown();
  await Promise.all([primary?.stop(), replica?.stop(), lone?.stop(), up?.close()]);
  dir?.remove();
});

/** A `tollgate keys` command; its --json answer parsed when it printed one. */
async function keys(config: string, ...args: string[]): Promise<CliResult & { json: Record<string, unknown> }> {
  const r = await runCli(['keys', ...args, '--config', config]);
  if (r.code !== 0) throw new Error(`keys ${args.join(' ')} exited ${r.code}: ${r.stderr}${r.stdout}`);
  return { ...r, json: args.includes('--json') ? (JSON.parse(r.stdout) as Record<string, unknown>) : {} };
}

/** Every change the CLI makes to one fresh key, with what each answered and warned. */
async function everyChangeByCli(config: string): Promise<Array<{ action: string; replication: unknown; warning: string }>> {
  const created = await keys(config, 'create', '--plan', 'free', '--json');
  const id = String(created.json.id);
  const results = [{ action: 'create', r: created }];
  results.push({ action: 'update', r: await keys(config, 'update', id, '--plan', 'pro', '--json') });
  results.push({ action: 'rotate', r: await keys(config, 'rotate', id, '--grace', '60', '--json') });
  results.push({ action: 'unban', r: await keys(config, 'unban', id, '--json') });
  results.push({ action: 'revoke', r: await keys(config, 'revoke', id, '--json') });
  return results.map(({ action, r }) => ({ action, replication: r.json.replication, warning: withoutAudit(r.stderr) }));
}

const admin = (method: string, path: string, body?: unknown) => adminApi.call(method, path, body === undefined ? {} : { body });

/** Every change the admin API makes to one fresh key: each answer's replication. */
async function everyChangeByApi(): Promise<Array<{ action: string; status: number; replication: unknown }>> {
  const created = await admin('POST', '/keys', { plan: 'free' });
  const id = String(created.body.id);
  const answers = [
    { action: 'create', a: created },
    { action: 'update', a: await admin('PATCH', `/keys/${id}`, { plan: 'pro' }) },
    { action: 'rotate', a: await admin('POST', `/keys/${id}/rotate`, { graceSeconds: 60 }) },
    { action: 'unban', a: await admin('POST', `/keys/${id}/unban`) },
    { action: 'revoke', a: await admin('POST', `/keys/${id}/revoke`) },
    { action: 'revoke again', a: await admin('POST', `/keys/${id}/revoke`) },
  ];
  return answers.map(({ action, a }) => ({ action, status: a.status, replication: a.body.replication }));
}

const ACTIONS = ['create', 'update', 'rotate', 'unban', 'revoke'];
const each = (replication: unknown, warning: string | RegExp) =>
  ACTIONS.map((action) => ({ action, replication, warning: typeof warning === 'string' ? warning : expect.stringMatching(warning) }));

describe('key changes wait for a replica and say how far they reached', () => {
  it('a primary with a replica: every change answers {expected: 1, acked: 1} (CLI and admin API), and no warning', async () => {
    expect(await everyChangeByCli(fileFor(primary.url))).toEqual(each({ expected: 1, acked: 1 }, ''));
    const api = await everyChangeByApi();
    expect(api.map((a) => a.status)).toEqual([201, 200, 200, 200, 200, 200]);
    for (const a of api) expect(a, a.action).toMatchObject({ replication: { expected: 1, acked: 1 } });
    expect(adminApi.problems).toEqual([]);
  }, 60_000);

  it('standalone without replicas: {expected: 0, acked: 0} at once, and no warning', async () => {
    expect(await everyChangeByCli(fileFor(lone.url))).toEqual(each({ expected: 0, acked: 0 }, ''));
    // Nothing to wait for: no WAIT was sent (it would sit out its whole second on a primary without replicas).
    const c = lone.client();
    try {
      expect(await c.info('commandstats')).not.toMatch(/^cmdstat_wait:/m);
      expect(await c.info('commandstats')).toMatch(/^cmdstat_info:/m);
    } finally {
      c.disconnect();
    }
  }, 60_000);

  it('the replica paused (connected, silent): {expected: 1, acked: 0} and a warning on stderr for each change', async () => {
    replica.pause();
    try {
      expect(await everyChangeByCli(fileFor(primary.url))).toEqual(each({ expected: 1, acked: 0 }, /^Warning: no replica confirmed this .* \(1 expected\)/));
      const api = await everyChangeByApi();
      for (const a of api) expect(a, a.action).toMatchObject({ replication: { expected: 1, acked: 0 } });
      expect(adminApi.problems).toEqual([]);
    } finally {
      replica.resume();
    }
  }, 60_000);

  it("a change waiting out its second for a silent replica holds up no request: the request path's Redis never times out", async () => {
    const user = await admin('POST', '/keys', { plan: 'busy' });
    const errors = async () => {
      const text = await metrics.registry.metrics();
      return {
        limitCheckErrors: metricValue(text, 'tollgate_redis_errors_total', { op: 'limit_check' }) ?? 0,
        degraded: metricValue(text, 'tollgate_redis_degraded_transitions_total', { to: 'degraded' }) ?? 0,
      };
    };
    const before = await errors();
    replica.pause();
    const statuses: number[] = [];
    let running = true;
    const load = (async () => {
      for (let i = 0; running && i < 2000; i++) {
        const res = await fetch(`${gw.url}/v1/categories`, {
          headers: { authorization: `Bearer ${String(user.body.key)}` },
          signal: AbortSignal.timeout(5000),
        });
        await res.arrayBuffer();
        statuses.push(res.status);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    try {
      const api = await everyChangeByApi();
      for (const a of api) expect(a, a.action).toMatchObject({ replication: { expected: 1, acked: 0 } });
    } finally {
      running = false;
      await load;
      replica.resume();
    }
    expect(statuses.length).toBeGreaterThan(10);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    // The limit checks reached Redis in their 200 ms budget, though each change held a connection for a second: on a
    // shared connection every check made during those seconds would time out (dozens of them). One or two late ones
    // are the machine's load, not the connection (a loaded two-core machine can delay any 200 ms reply).
    const after = await errors();
    expect(after.degraded).toBe(before.degraded);
    expect(after.limitCheckErrors - before.limitCheckErrors).toBeLessThanOrEqual(2);
  }, 60_000);

  it('the replica gone: the gateway, which saw it, still expects it; the CLI expects it when redis.replicas says so', async () => {
    await replica.kill();
    // The primary notices the closed link at once: no replica is connected any more.
    await waitFor(
      async () => {
        const c = primary.client();
        try {
          return /^connected_slaves:0/m.test(await c.info('replication'));
        } finally {
          c.disconnect();
        }
      },
      'the primary without its replica',
      30_000,
    );
    const api = await everyChangeByApi();
    for (const a of api) expect(a, a.action).toMatchObject({ replication: { expected: 1, acked: 0 } });
    expect(adminApi.problems).toEqual([]);
    // A fresh CLI process never saw the replica: the config says how many there should be.
    const configured = fileFor(primary.url, { replicas: 1 });
    expect(await everyChangeByCli(configured)).toEqual(each({ expected: 1, acked: 0 }, /^Warning: no replica confirmed this .* \(1 expected\)/));
    // Without it, the CLI can only say what it sees: no replica.
    expect(await everyChangeByCli(fileFor(primary.url))).toEqual(each({ expected: 0, acked: 0 }, ''));
  }, 60_000);

  it('redis.replicas takes a whole number from 0 to 16; anything else is refused naming the field', async () => {
    for (const bad of [-1, 1.5, 'two', 17, null]) {
      const r = await runCli(['config', 'check', '--config', dir.write(`bad-${String(bad)}.yaml`, { redis: { url: lone.url, replicas: bad }, plans: PLANS })]);
      expect(r.code, String(bad)).toBe(1);
      expect(r.stderr, String(bad)).toMatch(/redis\.replicas/);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
    expect((await runCli(['config', 'check', '--config', dir.write('good.yaml', { redis: { url: lone.url, replicas: 0 }, plans: PLANS })])).code).toBe(0);
  }, 60_000);

  it('the plain CLI output carries the same warning, on stderr only', async () => {
    const configured = fileFor(primary.url, { replicas: 1 }, 'plain.yaml');
    const created = await keys(configured, 'create', '--plan', 'free');
    expect(created.stdout).not.toMatch(/Warning/);
    expect(withoutAudit(created.stderr)).toMatch(/^Warning: no replica confirmed this new key within 1 s \(1 expected\)/);
    const id = /Created key (\S+) /.exec(created.stdout)![1]!;
    const revoked = await keys(configured, 'revoke', id);
    expect(revoked.stdout.trim()).toBe(`Revoked key ${id}.`);
    expect(withoutAudit(revoked.stderr)).toMatch(/^Warning: no replica confirmed this revocation .* the revocation is undone/);
  }, 120_000);
});
