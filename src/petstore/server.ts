// Starts the petstore upstream: picks the store (Redis when a URL is given, else memory), listens,
// and on close() drains the HTTP server and closes the store.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../observability/logger.js';
import { connectRedis, type RedisTopology } from '../storage/redis.js';
import { buildPetstoreApp } from './app.js';
import { expressPrototypes } from '../server/http-server.js';
import { MemoryCategoryStore, RedisCategoryStore, type CategoryStore } from './store.js';

export interface PetstoreOptions {
  host: string;
  /** 0 picks a free port; the chosen one is in the result. */
  port: number;
  /** Where Redis is (any topology); absent: the in-memory store. */
  redis?: RedisTopology;
  /** Redis key prefix, e.g. "tollgate:"; keys live under `${prefix}petstore:`. */
  prefix?: string;
  logger: Logger;
}

export interface RunningPetstore {
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function startPetstore(opts: PetstoreOptions): Promise<RunningPetstore> {
  let store: CategoryStore;
  if (opts.redis) {
    // Not failFast: while Redis (re)connects, requests wait for it up to the command timeout, then get 503.
    const redis = connectRedis({ redis: opts.redis, commandTimeoutMs: 2000, purpose: 'petstore' });
    store = new RedisCategoryStore(redis, opts.prefix ?? 'tollgate:');
    opts.logger.info({ redis: redis.where }, 'petstore: using Redis category store');
  } else {
    store = new MemoryCategoryStore();
    opts.logger.info('petstore: using in-memory category store');
  }

  const app = buildPetstoreApp({ store, logger: opts.logger });
  const server = createServer(expressPrototypes(app), app);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port, opts.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    await store.close();
    throw err;
  }

  const port = (server.address() as AddressInfo).port;
  const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  const url = `http://${host}:${port}`;
  opts.logger.info({ url }, 'petstore: listening');

  let closing: Promise<void> | undefined;
  return {
    url,
    port,
    close() {
      closing ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          // Idle keep-alive sockets (a gateway's pool) would otherwise hold close() open until they time out.
          server.closeIdleConnections();
        });
        await store.close();
      })();
      return closing;
    },
  };
}
