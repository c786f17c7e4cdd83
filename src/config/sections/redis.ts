// redis: the shared Redis holding keys, windows, bans and the usage ledger; left out, every store is in memory (one
// instance). Exactly one of three topologies (url, cluster, sentinel), since each takes a different client; failMode
// and the command timeouts are here because they are how the request path lives with that Redis being slow or gone.
import { z } from 'zod';
import { positiveInt, type Ctx } from './fields.js';

const redisUrl = z.string().regex(/^rediss?:\/\//, 'expected a redis:// or rediss:// URL');

const redisTls = z.strictObject({
  caFile: z.string().min(1).optional().describe('PEM file of the CA certificate(s) that signed the servers\' certificates; else the system\'s trusted CAs.'),
  certFile: z.string().min(1).optional().describe('Client certificate and key (PEM files), for a Redis that requires clients to present one (mutual TLS).'),
  keyFile: z.string().min(1).optional().describe('The client certificate\'s private key (PEM file); goes with certFile.'),
  servername: z.string().min(1).optional().describe('The name the servers\' certificates must carry, when it is not the host in the URLs (SNI and verification).'),
  rejectUnauthorized: z.boolean().default(true).describe('false accepts any certificate: for a test setup only, never across a network you do not control.'),
});

export const redis = z
  .strictObject({
    url: redisUrl.optional().describe('A standalone Redis (or a proxy in front of one): redis:// or rediss:// URL.'),
    cluster: z.strictObject({ nodes: z.array(redisUrl).min(1).describe('Seed node URLs (redis:// or rediss://); the rest are discovered.') }).optional().describe('A Redis Cluster: seed nodes; the others are discovered from them.'),
    sentinel: z.strictObject({ masterName: z.string().min(1).describe('The name the sentinels monitor the primary by.'), sentinels: z.array(redisUrl).min(1).describe('The sentinels\' URLs (credentials in them are the sentinels\' own).') }).optional().describe('A primary with replicas behind Sentinel: the monitored primary\'s name and the sentinels to ask.'),
    username: z.string().min(1).optional().describe('ACL user and password (REDIS_USERNAME / REDIS_PASSWORD override them); they win over credentials in URLs.'),
    password: z.string().min(1).optional().describe('The ACL user\'s password (REDIS_PASSWORD overrides it, so it need not sit in the file). Never logged.'),
    tls: redisTls.optional().describe('TLS options for rediss:// URLs.'),
    replicas: z.number().int().min(0).max(16).optional().describe('How many replicas the key store\'s primary (each primary of a cluster) is meant to have. Key changes wait for one to acknowledge and report `replication: {expected, acked}`; without this, expected is what the topology shows (replicas seen connected since start, the slot map, the sentinels), which forgets a replica that was already gone when the process started.'),
    prefix: z.string().default('tollgate:').describe('Prepended to every Redis key Tollgate writes.'),
    failMode: z.enum(['open', 'closed']).default('open').describe('Redis unreachable: "open" serves on per-instance memory limits, "closed" answers 503.'),
    commandTimeoutMs: positiveInt().default(100).describe('No request waits longer than this on Redis in total.'),
    adminCommandTimeoutMs: positiveInt().default(5000).describe('The command timeout of the admin connection and of the report thread\'s: the admin API\'s reads and usage reports run on Redis connections of their own, never the request path\'s, and a command there fails after this long.'),
    allowEviction: z.boolean().default(false).describe('Accept a Redis whose maxmemory-policy may evict keys (anything but noeviction): eviction deletes key records (customers get 401) or bans and rate windows (bans and quotas reset), so by default such a Redis makes /readyz answer 503. true keeps the gateway ready and only warns, for an operator who knows the data fits.'),
  })
  .superRefine(oneRedisTopology);

/** Exactly one of url, cluster and sentinel; TLS options only with rediss:// URLs, and never half a client certificate. */
function oneRedisTopology(
  r: { url?: string | undefined; cluster?: { nodes: string[] } | undefined; sentinel?: { sentinels: string[] } | undefined; tls?: { certFile?: string | undefined; keyFile?: string | undefined } | undefined },
  ctx: Ctx,
): void {
  const given = (['url', 'cluster', 'sentinel'] as const).filter((k) => r[k] !== undefined);
  if (given.length !== 1) {
    ctx.addIssue({
      code: 'custom',
      path: given.length === 0 ? [] : [given[1]!],
      message:
        given.length === 0
          ? 'expected one of url (a standalone Redis), cluster.nodes (a Redis Cluster) or sentinel (a primary behind Sentinel)'
          : `only one of url, cluster and sentinel may be set; found ${given.join(' and ')}`,
    });
    return;
  }
  const urls = r.url !== undefined ? [r.url] : (r.cluster?.nodes ?? r.sentinel?.sentinels ?? []);
  const schemes = new Set(urls.map((u) => u.slice(0, u.indexOf(':'))));
  if (schemes.size > 1) ctx.addIssue({ code: 'custom', path: [given[0]!], message: 'mixes redis:// and rediss:// URLs: TLS is all or nothing' });
  if (r.tls && !schemes.has('rediss')) ctx.addIssue({ code: 'custom', path: ['tls'], message: 'TLS options are set but no URL is rediss://' });
  if (r.tls && (r.tls.certFile === undefined) !== (r.tls.keyFile === undefined))
    ctx.addIssue({ code: 'custom', path: ['tls', r.tls.certFile === undefined ? 'certFile' : 'keyFile'], message: 'certFile and keyFile go together' });
}

export type RedisConfig = z.output<typeof redis>;
