// The key store's Redis must keep keys across its own restart: a Redis with neither AOF nor RDB snapshots is reported
// at start-up (a warning, tollgate_redis_persistence_disabled 1); one with AOF or snapshots is not.
import { afterEach, describe, expect, it } from 'vitest';
import { testConfig } from './helpers/gateway.js';
import { captureLogger, metricValue, startLimitsGateway, type LimitsGateway } from './helpers/limits.js';
import { TestRedis } from './helpers/redis-server.js';
import { waitFor } from './helpers/wait.js';

const open: Array<{ close(): Promise<void> } | { stop(): Promise<void> }> = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await ('close' in o ? o.close() : o.stop());
});

async function start(redisArgs: string[]): Promise<{ gw: LimitsGateway; messages: () => string[] }> {
  const redis = await TestRedis.start(redisArgs);
  open.push(redis);
  const cap = captureLogger('info');
  const gw = await startLimitsGateway(testConfig({ upstream: { url: 'http://127.0.0.1:9' }, redis: { url: redis.url } }), { logger: cap.logger });
  open.push(gw);
  return { gw, messages: cap.messages };
}

const gauge = async (gw: LimitsGateway) => metricValue(await gw.metrics.registry.metrics(), 'tollgate_redis_persistence_disabled');
const WARNING = 'redis has neither AOF nor RDB persistence';

describe('Redis persistence at start-up', () => {
  it('neither AOF nor RDB: a warning naming the fix, and the gauge is 1', async () => {
    const { gw, messages } = await start([]);
    await waitFor(async () => (await gauge(gw)) === 1, 'tollgate_redis_persistence_disabled is 1');
    expect(messages().filter((m) => m.startsWith(WARNING))).toHaveLength(1);
  });

  it('AOF on, or RDB snapshots configured: no warning, the gauge is 0', async () => {
    for (const args of [
      ['--appendonly', 'yes'],
      ['--save', '3600 1'],
    ]) {
      const { gw, messages } = await start(args);
      await waitFor(() => messages().some((m) => m.startsWith('redis persistence: ')), `persistence read with ${args.join(' ')}`);
      expect(messages().find((m) => m.startsWith('redis persistence: '))).toBe(
        args[0] === '--appendonly' ? 'redis persistence: aof' : 'redis persistence: rdb',
      );
      expect(await gauge(gw)).toBe(0);
      expect(messages().filter((m) => m.startsWith(WARNING))).toEqual([]);
    }
  });
});
