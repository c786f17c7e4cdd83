// Creates the ioredis clients Tollgate uses, with the options that keep a Redis outage from stalling requests.
import { Redis } from 'ioredis';

export interface RedisClientOptions {
  url: string;
  /** A command with no answer in this time fails (a hung Redis must not hang requests). */
  commandTimeoutMs: number;
  /** Name shown in CLIENT LIST, handy when several instances share one Redis. */
  name?: string;
  /**
   * Request path clients fail at once while disconnected (enableOfflineQueue: false) rather than
   * queueing for the reconnect; one-shot CLI clients prefer to wait for the first connection.
   */
  failFast: boolean;
}

export function createRedisClient(opts: RedisClientOptions): Redis {
  const client = new Redis(opts.url, {
    // RESP2: replies as plain arrays, the shape rate-limiter-flexible's scripts expect.
    protocol: 2,
    commandTimeout: opts.commandTimeoutMs,
    connectTimeout: Math.max(1000, opts.commandTimeoutMs * 10),
    enableOfflineQueue: !opts.failFast,
    enableAutoPipelining: true,
    maxRetriesPerRequest: opts.failFast ? 0 : 1,
    // Reconnect quickly and keep trying: an outage should end the moment Redis is back.
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 5), 1000),
    connectionName: opts.name,
    lazyConnect: false,
  });
  // Without a listener ioredis logs "Unhandled error event" on every failed reconnect; callers observe state via events.
  client.on('error', () => {});
  return client;
}

/**
 * Resolves once the client is ready, or rejects after timeoutMs; with failOnError, also at the first
 * connection error (a one-shot command should say "unreachable" at once rather than retry).
 */
export function waitForReady(client: Redis, timeoutMs: number, opts: { failOnError?: boolean } = {}): Promise<void> {
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
