// The key store's Redis must keep keys across its own restart: a Redis with neither AOF nor RDB snapshots is reported
// at start-up (a warning, tollgate_redis_persistence_disabled 1); one with AOF or snapshots is not. A read that gets no
// answer in time (a proxy delays CONFIG GET save) is read again until it succeeds, at start-up and after a reconnect.
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
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

/**
 * A TCP proxy in front of redis-server that holds the first `delays` `CONFIG GET save` commands (and what follows on
 * that connection, so replies keep their order) for `delayMs`: the persistence read misses the gateway's 100 ms
 * command timeout, as it does on a loaded machine. `target` may be switched and `dropConnections()` forces a reconnect.
 */
class SlowConfigProxy {
  /** `CONFIG GET save` commands seen, delayed or not. */
  configGetSave = 0;
  private readonly sockets = new Set<Socket>();
  private constructor(
    private readonly server: Server,
    readonly port: number,
    public target: number,
    public delays: number,
    readonly delayMs: number,
  ) {}

  static async start(target: number, delays: number, delayMs = 400): Promise<SlowConfigProxy> {
    const ready: { proxy?: SlowConfigProxy } = {};
    const server = createServer((client) => ready.proxy!.handle(client));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    ready.proxy = new SlowConfigProxy(server, (server.address() as AddressInfo).port, target, delays, delayMs);
    return ready.proxy;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}/0`;
  }

  private handle(client: Socket): void {
    const upstream = connect(this.target, '127.0.0.1');
    this.sockets.add(client).add(upstream);
    for (const s of [client, upstream]) {
      s.on('error', () => {});
      s.on('close', () => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(s);
      });
    }
    upstream.pipe(client);
    let pending: Buffer = Buffer.alloc(0);
    // Commands go out in order; a delayed one holds the ones behind it.
    let chain = Promise.resolve();
    client.on('data', (chunk: Buffer) => {
      const { commands, rest } = takeCommands(Buffer.concat([pending, chunk]));
      pending = rest;
      for (const c of commands) {
        const isConfigGetSave = c.args[0] === 'config' && c.args[1] === 'get' && c.args[2] === 'save';
        if (isConfigGetSave) this.configGetSave++;
        const hold = isConfigGetSave && this.delays > 0;
        if (hold) this.delays--;
        chain = chain.then(async () => {
          if (hold) await sleep(this.delayMs);
          if (!upstream.destroyed) upstream.write(c.bytes);
        });
      }
    });
  }

  dropConnections(): void {
    for (const s of this.sockets) s.destroy();
  }

  async close(): Promise<void> {
    this.dropConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/** Splits complete RESP arrays (client commands) off the front of `buf`, each with its arguments (lower-cased). */
function takeCommands(buf: Buffer): { commands: Array<{ bytes: Buffer; args: string[] }>; rest: Buffer } {
  const commands: Array<{ bytes: Buffer; args: string[] }> = [];
  let pos = 0;
  outer: while (pos < buf.length) {
    const head = buf.indexOf('\r\n', pos);
    if (head < 0) break;
    const count = Number(buf.subarray(pos + 1, head).toString());
    let at = head + 2;
    const args: string[] = [];
    for (let k = 0; k < count; k++) {
      const lineEnd = buf.indexOf('\r\n', at);
      if (lineEnd < 0) break outer;
      const len = Number(buf.subarray(at + 1, lineEnd).toString());
      const end = lineEnd + 2 + len + 2;
      if (end > buf.length) break outer;
      args.push(
        buf
          .subarray(lineEnd + 2, lineEnd + 2 + len)
          .toString()
          .toLowerCase(),
      );
      at = end;
    }
    commands.push({ bytes: buf.subarray(pos, at), args });
    pos = at;
  }
  return { commands, rest: buf.subarray(pos) };
}

describe('Redis persistence read when Redis answers late', () => {
  it('a start-up read that misses the command timeout is read again until it succeeds: the gauge is 1', async () => {
    const redis = await TestRedis.start([]);
    open.push(redis);
    const proxy = await SlowConfigProxy.start(redis.port, 3);
    open.push(proxy);
    const cap = captureLogger('info');
    const gw = await startLimitsGateway(testConfig({ upstream: { url: 'http://127.0.0.1:9' }, redis: { url: proxy.url, commandTimeoutMs: 100 } }), {
      logger: cap.logger,
    });
    open.push(gw);
    await waitFor(async () => (await gauge(gw)) === 1, 'tollgate_redis_persistence_disabled is 1', 30_000);
    // Three reads got no answer in time; a later one did: the fourth, unless the machine is loaded too.
    expect(proxy.delays).toBe(0);
    // A bound: on a loaded machine a read the proxy did not hold can still miss the 100 ms timeout and be read again.
    expect(proxy.configGetSave).toBeGreaterThanOrEqual(4);
    expect(cap.messages().filter((m) => m.startsWith(WARNING))).toHaveLength(1);
    expect(cap.messages().filter((m) => m.startsWith('redis persistence settings not read'))).toHaveLength(1);
    expect(cap.messages().filter((m) => m === 'redis persistence: unknown')).toEqual([]);
  });

  it('a reconnect reads it again (another server may answer), again until it succeeds', async () => {
    const persistent = await TestRedis.start(['--appendonly', 'yes']);
    open.push(persistent);
    const bare = await TestRedis.start([]);
    open.push(bare);
    const proxy = await SlowConfigProxy.start(persistent.port, 0);
    open.push(proxy);
    const cap = captureLogger('info');
    const gw = await startLimitsGateway(testConfig({ upstream: { url: 'http://127.0.0.1:9' }, redis: { url: proxy.url, commandTimeoutMs: 100 } }), {
      logger: cap.logger,
    });
    open.push(gw);
    await waitFor(() => cap.messages().includes('redis persistence: aof'), 'persistence read as aof');
    expect(await gauge(gw)).toBe(0);

    // A failover, as the client sees it: the connection drops and the reconnect reaches a server without persistence,
    // whose first two answers are late.
    proxy.target = bare.port;
    proxy.delays = 2;
    proxy.dropConnections();
    await waitFor(async () => (await gauge(gw)) === 1, 'tollgate_redis_persistence_disabled is 1 after the reconnect', 30_000);
    expect(proxy.delays).toBe(0);
    expect(cap.messages().filter((m) => m.startsWith(WARNING))).toHaveLength(1);
  });
});
