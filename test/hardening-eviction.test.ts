// Redis eviction and a full Redis: a maxmemory-policy that may evict keys destroys key records (allkeys-*) or
// bans and rate windows (volatile-*), so the gateway checks the policy at start-up and periodically, logs it,
// exposes it as tollgate_redis_eviction_unsafe and fails /readyz unless s.redis.allowEviction says the operator
// knows; a Redis that refuses writes (OOM under noeviction) is degraded mode and /readyz says so. One private
// redis-server for the file: CONFIG SET is only ever sent to it.
import { afterEach, describe, expect, it } from 'vitest';
import request from 'supertest';
import { ReplyError, type Redis } from 'ioredis';
import { Metrics } from '../src/observability/metrics.js';
import { MemoryPolicyWatcher, writeRefusal } from '../src/storage/memory-policy.js';
import { testConfig } from './helpers/gateway.js';
import { captureLogger, metricValue, startLimitsGateway, waitFor, type LimitsGateway } from './helpers/limits.js';
import { useStack } from './helpers/stack.js';

const PREFIX = 'evict:';

const s = useStack({ redis: true, client: true });

let gw: LimitsGateway | undefined;

function config(extra: { allowEviction?: boolean; url?: string } = {}) {
  return testConfig({
    upstream: { url: s.up.url, timeoutMs: 2000 },
    redis: {
      url: extra.url ?? s.redis.url,
      prefix: PREFIX,
      failMode: 'open',
      commandTimeoutMs: 200,
      ...(extra.allowEviction !== undefined ? { allowEviction: extra.allowEviction } : {}),
    },
    plans: { tiny: { perMinute: 50, perDay: 1000 } },
  });
}

async function unsafeGauge(g: LimitsGateway): Promise<number | undefined> {
  return metricValue((await request(g.url).get('/metrics')).text, 'tollgate_redis_eviction_unsafe');
}

/** CONFIG GET calls Redis has seen, including those it refused (ACL): each periodic check is one. */
async function configGets(): Promise<number> {
  const line = /^cmdstat_config\|get:(.*)$/m.exec(await s.client.info('commandstats'))?.[1] ?? '';
  const field = (name: string) => Number(new RegExp(`(?:^|,)${name}=(\\d+)`).exec(line)?.[1] ?? 0);
  return field('calls') + field('rejected_calls');
}

/** Waits until the gateway has run `n` more periodic policy checks. */
async function checksPass(n: number): Promise<void> {
  const before = await configGets();
  // Our own INFO is not a CONFIG GET; each check of the gateway is one.
  await waitFor(async () => (await configGets()) >= before + n, `${n} periodic policy checks`);
}

async function degradedGauge(g: LimitsGateway): Promise<number | undefined> {
  return metricValue((await request(g.url).get('/metrics')).text, 'tollgate_redis_degraded');
}

afterEach(async () => {
  await gw?.close();
  gw = undefined;
  await s.client.config('SET', 'maxmemory', '0');
  await s.client.config('SET', 'maxmemory-policy', 'noeviction');
});

describe('maxmemory-policy at start-up', () => {
  for (const [policy, destroys] of [
    ['allkeys-lru', /API key/],
    ['volatile-lru', /ban/],
  ] as const) {
    it(`${policy}: /readyz answers 503 naming the policy, tollgate_redis_eviction_unsafe is 1, an error is logged`, async () => {
      await s.client.config('SET', 'maxmemory-policy', policy);
      const cap = captureLogger('info');
      gw = await startLimitsGateway(config(), { logger: cap.logger, metrics: new Metrics() });

      const ready = await request(gw.url).get('/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body).toMatchObject({ code: 'service_unavailable', status: 503, checks: { redis: 'down', upstream: 'up' } });
      expect(ready.body.message).toContain(`maxmemory-policy ${policy}`);
      expect(ready.body.message).toContain('noeviction');
      expect(ready.body.message).toMatch(destroys);
      expect(ready.body.reasons.redis).toContain(`maxmemory-policy ${policy}`);
      expect(JSON.stringify(ready.body)).not.toContain('127.0.0.1');

      expect(await unsafeGauge(gw)).toBe(1);
      const errors = cap.lines.filter((l) => l.level === 50 && String(l.msg).includes('maxmemory-policy'));
      expect(errors).toHaveLength(1);
      expect(errors[0]!.policy).toBe(policy);
      expect(String(errors[0]!.msg)).toMatch(destroys);
      // Keyed traffic itself is still served: the check reports, it does not refuse.
      const { key } = await gw.createKey({ plan: 'tiny' });
      expect((await request(gw.url).get('/v1/categories').set('authorization', `Bearer ${key}`)).status).toBe(200);
    });
  }

  it('allkeys-lru with s.redis.allowEviction: true: /readyz 200, the gauge still 1, a warning instead of an error', async () => {
    await s.client.config('SET', 'maxmemory-policy', 'allkeys-lru');
    const cap = captureLogger('info');
    gw = await startLimitsGateway(config({ allowEviction: true }), { logger: cap.logger, metrics: new Metrics() });

    const ready = await request(gw.url).get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.checks).toEqual({ redis: 'up', upstream: 'up' });
    expect(await unsafeGauge(gw)).toBe(1);
    const lines = cap.lines.filter((l) => String(l.msg).includes('maxmemory-policy'));
    expect(lines).toHaveLength(1);
    expect(lines[0]!.level).toBe(40);
    expect(lines[0]!.policy).toBe('allkeys-lru');
  });

  it('noeviction: /readyz 200 and the gauge 0, nothing logged about the policy', async () => {
    const cap = captureLogger('info');
    gw = await startLimitsGateway(config(), { logger: cap.logger, metrics: new Metrics() });
    expect((await request(gw.url).get('/readyz')).status).toBe(200);
    expect(await unsafeGauge(gw)).toBe(0);
    expect(cap.messages().filter((m) => m.includes('maxmemory-policy'))).toEqual([]);
  });

  it('CONFIG forbidden (an ACL user without it): one warning that the policy could not be checked, /readyz still 200', async () => {
    await s.client.call('ACL', 'SETUSER', 'noconfig', 'on', '>s3cret-pw', '~*', '&*', '+@all', '-config');
    const cap = captureLogger('info');
    try {
      gw = await startLimitsGateway(config({ url: `redis://noconfig:s3cret-pw@127.0.0.1:${s.redis.port}/0` }), {
        logger: cap.logger,
        metrics: new Metrics(),
        memoryPolicyCheckMs: 50,
      });
      const ready = await request(gw.url).get('/readyz');
      expect(ready.status).toBe(200);
      expect(ready.body.checks).toEqual({ redis: 'up', upstream: 'up' });
      // The periodic check runs every 50 ms here; the warning is still said once.
      await checksPass(3);
      const warnings = cap.lines.filter((l) => String(l.msg).includes('maxmemory-policy could not be checked'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.level).toBe(40);
      expect(String(warnings[0]!.msg)).toContain('noeviction');
      expect(JSON.stringify(cap.lines)).not.toContain('s3cret-pw');
      expect(await unsafeGauge(gw)).toBe(0);
    } finally {
      await s.client.call('ACL', 'DELUSER', 'noconfig');
    }
  });
});

describe('maxmemory-policy changed while running', () => {
  it('the periodic check notices it (gauge 1, one error line however many checks), /readyz says 503; back to noeviction: 200, gauge 0', async () => {
    const cap = captureLogger('info');
    gw = await startLimitsGateway(config(), { logger: cap.logger, metrics: new Metrics(), memoryPolicyCheckMs: 50 });
    const g = gw;
    expect(await unsafeGauge(g)).toBe(0);

    await s.client.config('SET', 'maxmemory-policy', 'volatile-lfu');
    // Without any /readyz call: the periodic check alone.
    await waitFor(async () => (await unsafeGauge(g)) === 1, 'gauge 1 after the policy changed');
    await waitFor(() => cap.lines.some((l) => l.level === 50 && l.policy === 'volatile-lfu'), 'the error line');
    const errorsAt = () => cap.lines.filter((l) => l.level === 50 && String(l.msg).includes('maxmemory-policy')).length;
    const ready = await request(g.url).get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.message).toContain('maxmemory-policy volatile-lfu');
    // Several more periodic checks: still one error line for this policy.
    await checksPass(3);
    expect(errorsAt()).toBe(1);

    await s.client.config('SET', 'maxmemory-policy', 'noeviction');
    await waitFor(async () => (await unsafeGauge(g)) === 0, 'gauge 0 after noeviction');
    expect((await request(g.url).get('/readyz')).status).toBe(200);
  });

  it('/readyz reads the policy itself: a change is reported at once, before the next periodic check', async () => {
    const cap = captureLogger('info');
    gw = await startLimitsGateway(config(), { logger: cap.logger, metrics: new Metrics() });
    await s.client.config('SET', 'maxmemory-policy', 'allkeys-random');
    const ready = await request(gw.url).get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.reasons.redis).toContain('maxmemory-policy allkeys-random');
    expect(await unsafeGauge(gw)).toBe(1);
    expect(cap.lines.filter((l) => l.level === 50 && l.policy === 'allkeys-random')).toHaveLength(1);
  });
});

describe('a full Redis (noeviction, maxmemory reached)', () => {
  it('keyed requests are served in degraded mode (failMode open), /readyz says redis refuses writes (OOM), and it recovers by itself', async () => {
    const cap = captureLogger('info');
    gw = await startLimitsGateway(config(), { logger: cap.logger, metrics: new Metrics() });
    const g = gw;
    const { key } = await g.createKey({ plan: 'tiny' });
    const get = () => request(g.url).get('/v1/categories').set('authorization', `Bearer ${key}`).timeout(3000);
    expect((await get()).status).toBe(200);
    expect(await degradedGauge(g)).toBe(0);

    await s.client.config('SET', 'maxmemory', '1');
    const res = await get();
    expect(res.status).toBe(200);
    expect(await degradedGauge(g)).toBe(1);
    const degradedLine = cap.lines.find((l) => String(l.msg).includes('degraded mode ('));
    expect(degradedLine?.level).toBe(40);
    expect(String(degradedLine?.msg)).toContain('redis refuses writes (OOM');
    expect(String(degradedLine?.msg)).not.toContain('unreachable');

    const ready = await request(g.url).get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.checks).toEqual({ redis: 'down', upstream: 'up' });
    expect(ready.body.reasons.redis).toBe('redis refuses writes (OOM: maxmemory reached)');
    expect(ready.body.message).toContain('redis refuses writes (OOM: maxmemory reached)');

    await s.client.config('SET', 'maxmemory', '0');
    // Keyed traffic is what probes Redis again (one probe per breaker cool-down).
    await waitFor(
      async () => {
        expect((await get()).status).toBe(200);
        return (await degradedGauge(g)) === 0;
      },
      'degraded mode over once Redis takes writes again',
      30_000,
      100,
    );
    expect((await request(g.url).get('/readyz')).status).toBe(200);
    expect(cap.messages().some((m) => m.includes('degraded mode over'))).toBe(true);
  });
});

describe('MemoryPolicyWatcher in process', () => {
  function watcher(replies: Array<unknown>) {
    const cap = captureLogger('info');
    const metrics = new Metrics();
    const client = {
      async config() {
        const r = replies.shift();
        if (r instanceof Error) throw r;
        return r;
      },
    } as unknown as Redis;
    const w = new MemoryPolicyWatcher({ client, allowEviction: false, logger: cap.logger, metrics, where: 'redis://127.0.0.1:1/0' });
    return { w, cap, metrics };
  }

  it('a busy or loading Redis is not "CONFIG forbidden": no warning, and /readyz keeps reading the policy', async () => {
    const { w, cap } = watcher([
      new ReplyError('LOADING Redis is loading the dataset in memory'),
      new ReplyError('BUSY Redis is busy running a script.'),
      ['maxmemory-policy', 'allkeys-lfu'],
    ]);
    await w.check();
    await w.check();
    expect(w.readable).toBe(true);
    expect(cap.lines).toEqual([]);
    await w.check();
    expect(w.problem).toBe('maxmemory-policy allkeys-lfu may evict API keys, bans and rate windows; Tollgate needs noeviction');
  });

  it('a renamed CONFIG (unknown command) or an empty reply: one warning, the policy reported unreadable, no readiness problem', async () => {
    const { w, cap, metrics } = watcher([
      new ReplyError("ERR unknown command 'CONFIG', with args beginning with: 'GET' 'maxmemory-policy'"),
      [],
      new ReplyError('ERR unknown command'),
    ]);
    for (let i = 0; i < 3; i++) await w.check();
    expect(w.readable).toBe(false);
    expect(w.problem).toBeUndefined();
    expect(cap.lines.map((l) => [l.level, l.msg])).toEqual([[40, expect.stringContaining('maxmemory-policy could not be checked') as unknown]]);
    expect((await metrics.evictionUnsafe.get()).values[0]?.value).toBe(0);
  });

  it('names write refusals by their Redis error code, and nothing else', () => {
    expect(writeRefusal("OOM command not allowed when used memory > 'maxmemory'. script: abc, on @user_script:1.")).toBe(
      'redis refuses writes (OOM: maxmemory reached)',
    );
    expect(writeRefusal("READONLY You can't write against a read only replica.")).toContain('READONLY');
    expect(writeRefusal('MISCONF Redis is configured to save RDB snapshots')).toContain('MISCONF');
    expect(writeRefusal('Command timed out')).toBeUndefined();
    expect(writeRefusal('connect ECONNREFUSED 10.0.0.5:6379')).toBeUndefined();
  });
});
