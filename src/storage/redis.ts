// The Redis port: connectRedis() builds the connections Tollgate needs from the `redis` config section, and the
// stores see only RedisCommands, the narrow set of commands they send. Which client stands behind it (a standalone
// server's today; a Cluster or Sentinel client) is this file's business alone: the stores and their callers do not
// change with the topology. Stores never pipeline or run a transaction across hash slots (a cluster refuses it):
// every multi-key command or script touches keys of one slot (hash-tagged, see keyspace.ts).
import { Redis } from 'ioredis';

/** The commands Tollgate's stores send, and the one option the limit store sets; every ioredis client has them. */
export type RedisCommands = Pick<
  Redis,
  | 'get'
  | 'getBuffer'
  | 'set'
  | 'del'
  | 'sadd'
  | 'srem'
  | 'sscan'
  | 'smembers'
  | 'pexpireat'
  | 'publish'
  | 'hmget'
  | 'hget'
  | 'zrange'
  | 'incr'
  | 'multi'
  | 'ping'
  | 'time'
  | 'config'
  | 'eval'
  | 'defineCommand'
> & { options: { autoPipeliningIgnoredCommands?: string[] } };

/** A connection in subscriber mode (pub/sub needs a socket of its own). */
export type RedisSubscriber = Pick<Redis, 'subscribe' | 'on' | 'disconnect'>;

/** What a connection is for: its client name in CLIENT LIST, and how it waits while Redis is away. */
export type RedisPurpose = 'gateway' | 'cli' | 'petstore';

export interface RedisConnectOptions {
  url: string;
  /** A command with no answer in this time fails (a hung Redis must not hang requests). */
  commandTimeoutMs: number;
  purpose: RedisPurpose;
}

export interface RedisConnection {
  readonly client: RedisCommands;
  /** Where it connects, password removed: for logs and error messages. */
  readonly where: string;
  /** Connected and past the ready check: commands are sent now (while not, the gateway's fail at once). */
  isReady(): boolean;
  /** Bytes read on the current socket: the breaker tells a late-reading process from a silent Redis by it. */
  bytesRead(): number;
  /** Every (re)connection that passed the ready check. */
  onReady(fn: () => void): void;
  /** Every connection loss (including the one close() causes). */
  onClose(fn: () => void): void;
  /** Resolves once ready, or rejects after timeoutMs; with failOnError also at the first connection error. */
  waitForReady(timeoutMs: number, opts?: { failOnError?: boolean }): Promise<void>;
  /**
   * A new subscriber connection: its SUBSCRIBE waits for a connection (Redis may be down at start-up) and is sent
   * again after every reconnect; no command timeout (it waits for messages).
   */
  subscriber(): RedisSubscriber;
  /** Quits (waiting for replies in flight), then drops the socket: at once if QUIT fails, after 1 s if Redis does not answer. */
  close(): Promise<void>;
}

export function connectRedis(opts: RedisConnectOptions): RedisConnection {
  // The gateway's requests fail at once while disconnected (enableOfflineQueue: false) rather than queueing for the
  // reconnect; the CLI and the pet store prefer to wait for the connection.
  const failFast = opts.purpose === 'gateway';
  const client = new Redis(opts.url, {
    // RESP2: replies as plain arrays, the shape rate-limiter-flexible's scripts expect.
    protocol: 2,
    commandTimeout: opts.commandTimeoutMs,
    connectTimeout: Math.max(1000, opts.commandTimeoutMs * 10),
    enableOfflineQueue: !failFast,
    enableAutoPipelining: true,
    maxRetriesPerRequest: failFast ? 0 : 1,
    // Reconnect quickly and keep trying: an outage should end the moment Redis is back.
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 5), 1000),
    connectionName: `tollgate-${opts.purpose}`,
    lazyConnect: false,
  });
  // Without a listener ioredis logs "Unhandled error event" on every failed reconnect; callers observe state via events.
  client.on('error', () => {});
  return {
    client,
    where: redactRedisUrl(opts.url),
    isReady: () => client.status === 'ready',
    // The socket is replaced on every reconnect; before the first connection there is none.
    bytesRead: () => (client.stream as { bytesRead?: number } | undefined)?.bytesRead ?? 0,
    onReady: (fn) => void client.on('ready', fn),
    onClose: (fn) => void client.on('close', fn),
    waitForReady: (timeoutMs, o) => waitForReady(client, timeoutMs, o),
    subscriber() {
      // maxRetriesPerRequest: null keeps the SUBSCRIBE queued until a connection exists: with the request-path
      // client's 0 it was dropped at the first failed connect when Redis was down at start-up, and never resent.
      const sub = client.duplicate({ enableOfflineQueue: true, commandTimeout: undefined, maxRetriesPerRequest: null });
      sub.on('error', () => {});
      return sub;
    },
    async close() {
      // QUIT waits for a reply that a dead Redis never sends: capped.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([client.quit().catch(() => undefined), new Promise((r) => (timer = setTimeout(r, 1000)))]);
      clearTimeout(timer);
      client.disconnect();
    },
  };
}

function waitForReady(client: Redis, timeoutMs: number, opts: { failOnError?: boolean } = {}): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`Redis did not become ready within ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = () => {
      cleanup();
      resolve();
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const cleanup = () => {
      clearTimeout(timer);
      client.off('ready', onReady);
      client.off('error', onError);
    };
    client.on('ready', onReady);
    if (opts.failOnError) client.on('error', onError);
  });
}

/** Redis URL with any password removed, for logs and error messages. */
export function redactRedisUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'redis://(unparseable url)';
  }
}
