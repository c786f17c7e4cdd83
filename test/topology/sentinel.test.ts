// Tollgate on a primary with a replica behind three sentinels (real processes on loopback): it follows the primary
// Sentinel names, and when that primary is killed under load it keeps answering by failMode, never a 500, follows the
// promoted replica by itself (no connection left on the old address or answering READONLY), and a key created just
// before the kill still authenticates afterwards.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, tempDir, withoutAudit } from '../helpers/cli.js';
import { testConfig } from '../helpers/gateway.js';
import { metricValue, startLimitsGateway, type LimitsGateway } from '../helpers/limits.js';
import { MASTER_NAME, TestRedisSentinel } from '../helpers/redis-sentinel.js';
import { TestUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';

let sentinel: TestRedisSentinel;
let up: TestUpstream;
let gw: LimitsGateway;

beforeAll(async () => {
  [sentinel, up] = await Promise.all([TestRedisSentinel.start({ downAfterMs: 1000 }), TestUpstream.start()]);
  gw = await startLimitsGateway(
    testConfig({
      upstream: { url: up.url },
      redis: { sentinel: { masterName: MASTER_NAME, sentinels: sentinel.urls }, commandTimeoutMs: 200, failMode: 'open' },
      plans: { free: { perMinute: 100_000, perDay: 1_000_000 } },
    }),
  );
}, 60_000);

afterAll(async () => {
  await gw?.close();
  await up?.close();
  await sentinel?.stop();
});

async function status(key: string): Promise<number> {
  const res = await fetch(`${gw.url}/v1/categories`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(5000) });
  await res.arrayBuffer();
  return res.status;
}

describe('Sentinel', () => {
  it('keys create and rotate wait for the replica to confirm the write, and say so when it does not in time', async () => {
    const dir = tempDir();
    try {
      const file = dir.write('gateway.yaml', { upstream: { url: up.url }, redis: { sentinel: { masterName: MASTER_NAME, sentinels: sentinel.urls } } });
      const cli = (...args: string[]) => runCli(['keys', ...args, '--config', file]);
      const created = JSON.parse((await cli('create', '--plan', 'free', '--json')).stdout) as { id: string; replication?: unknown };
      expect(created.replication).toEqual({ expected: 1, acked: 1 });
      const rotated = JSON.parse((await cli('rotate', created.id, '--json')).stdout) as { replication?: unknown };
      expect(rotated.replication).toEqual({ expected: 1, acked: 1 });
      // A replica that does not answer: the write stands, and the output says it is not confirmed.
      sentinel.replica.pause();
      let unconfirmed;
      try {
        unconfirmed = await cli('create', '--plan', 'free');
      } finally {
        sentinel.replica.resume();
      }
      expect(unconfirmed.code).toBe(0);
      expect(withoutAudit(unconfirmed.stderr)).toMatch(/^Warning: no replica confirmed this new key within 1 s \(1 expected\)/);
    } finally {
      dir.remove();
    }
  });

  it('follows the primary Sentinel names; after the primary is killed under load, follows the promoted replica', async () => {
    const before = await gw.createKey({ plan: 'free' });
    expect(await status(before.key)).toBe(200);
    // A key created just before the kill: once the replica has it (asynchronous replication), it survives the failover.
    const justBefore = await gw.createKey({ plan: 'free' });
    const primaryClient = sentinel.primary.client();
    const replicaClient = sentinel.replica.client();
    try {
      const offset = async (c: typeof primaryClient, field: string) => Number(new RegExp(`^${field}:(\\d+)`, 'm').exec(await c.info('replication'))?.[1]);
      const target = await offset(primaryClient, 'master_repl_offset');
      await waitFor(async () => (await offset(replicaClient, 'slave_repl_offset')) >= target, 'the replica has the new key', 30_000, 20);
    } finally {
      primaryClient.disconnect();
      replicaClient.disconnect();
    }

    const statuses: number[] = [];
    let slowest = 0;
    let running = true;
    const load = (async () => {
      for (let i = 0; running && i < 2000; i++) {
        const t = Date.now();
        statuses.push(await status(before.key).catch(() => 0));
        slowest = Math.max(slowest, Date.now() - t);
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    const killedAt = Date.now();
    await sentinel.primary.kill();
    await waitFor(async () => (await sentinel.primaryPort()) === sentinel.replica.port, 'Sentinel promoted the replica', 30_000, 100);
    const promotedAt = Date.now();
    // Back to normal by itself: degraded mode over, and the limit check reaches the new primary (a write: not READONLY).
    await waitFor(
      async () => metricValue(await gw.metrics.registry.metrics(), 'tollgate_redis_degraded') === 0 && gw.gateway.redis!.isReady(),
      'recovered',
      30_000,
      50,
    );
    const recoveredAt = Date.now();
    running = false;
    await load;

    // failMode open: answered from memory while Redis was away, never a 5xx; no request waited past the bound (the
    // Redis budget, 200 ms, plus the request's own work; a key lookup is not needed: the key is cached).
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(slowest).toBeLessThan(1000);
    expect(await status(justBefore.key)).toBe(200);
    const after = await gw.createKey({ plan: 'free' });
    expect(await status(after.key)).toBe(200);
    const text = await gw.metrics.registry.metrics();
    const errorsBefore = metricValue(text, 'tollgate_redis_errors_total', { op: 'limit_check' }) ?? 0;
    for (let i = 0; i < 20; i++) expect(await status(before.key)).toBe(200);
    // Every check after the recovery went to Redis and succeeded there.
    expect(metricValue(await gw.metrics.registry.metrics(), 'tollgate_redis_errors_total', { op: 'limit_check' }) ?? 0).toBe(errorsBefore);

    // The old primary is gone and the new one has no replica connected; the sentinels still list the old one as its
    // replica (down): a fresh CLI expects it, and says the revocation is unconfirmed.
    const dir = tempDir();
    try {
      const file = dir.write('gateway.yaml', { upstream: { url: up.url }, redis: { sentinel: { masterName: MASTER_NAME, sentinels: sentinel.urls } } });
      const revoked = await runCli(['keys', 'revoke', after.id, '--json', '--config', file]);
      expect(revoked.code, revoked.stderr).toBe(0);
      expect(JSON.parse(revoked.stdout)).toMatchObject({ id: after.id, status: 'revoked', replication: { expected: 1, acked: 0 } });
      expect(withoutAudit(revoked.stderr)).toMatch(/^Warning: no replica confirmed this revocation within 1 s \(1 expected\)/);
    } finally {
      dir.remove();
    }
    console.log(
      `sentinel failover: promoted after ${promotedAt - killedAt} ms, gateway recovered after ${recoveredAt - killedAt} ms; ${statuses.length} requests, all 200, slowest ${slowest} ms`,
    );
  }, 60_000);
});
