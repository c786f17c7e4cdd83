// The Redis port: connectRedis() builds the connections Tollgate needs from the `redis` config section, and the
// stores see only RedisCommands, the narrow set of commands they send. Which client stands behind it (a standalone
// server's, a Sentinel-managed primary's or a Cluster client) is decided once, in connectRedis(): clusterClient() and
// singlePrimaryClient() answer the port's topology-dependent questions (every primary, a key's slot's connection,
// WAIT, silent primaries), and the stores and their callers ask the port, never the client's class. Stores never pipeline or run a transaction across hash slots (a cluster refuses it):
// every multi-key command or script touches keys of one slot (hash-tagged, see keyspace.ts).
import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import calculateSlot from 'cluster-key-slot';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { RedisConfig } from '../config/schema.js';
import type { Logger } from '../observability/logger.js';
import { giveCommandsDeadline } from './command-deadline.js';
import { connectionProblemLog } from './connection-problems.js';

/** The commands Tollgate's stores send; every ioredis client has them. */
export type RedisCommands = Pick<
  Redis,
  | 'get'
  | 'getdel'
  | 'getBuffer'
  | 'set'
  | 'del'
  | 'sadd'
  | 'srem'
  | 'sscan'
  | 'scard'
  | 'smembers'
  | 'pexpireat'
  | 'publish'
  | 'hmget'
  | 'hget'
  | 'hgetall'
  | 'hincrby'
  | 'hset'
  | 'hdel'
  | 'hkeys'
  | 'pexpire'
  | 'zrange'
  | 'incr'
  | 'multi'
  | 'ping'
  | 'time'
  | 'config'
  | 'info'
  | 'wait'
  | 'eval'
  | 'defineCommand'
  | 'xreadgroup'
  | 'xgroup'
  | 'xack'
  | 'xautoclaim'
>;

/** A connection in subscriber mode (pub/sub needs a socket of its own). */
export interface RedisSubscriber {
  subscribe(...channels: string[]): Promise<unknown>;
  on(event: 'ready', fn: () => void): unknown;
  on(event: 'message', fn: (channel: string, message: string) => void): unknown;
  disconnect(): void;
}

/**
 * What a connection is for: its client name in CLIENT LIST, and how it waits while Redis is away. 'admin' is the
 * gateway's second connection, for the admin API's reads and reports: their commands never queue on the request
 * path's socket, nor wait for its short timeout.
 */
export type RedisPurpose = 'gateway' | 'admin' | 'reports' | 'events' | 'cli' | 'petstore';

/** The parts of the `redis` config section that say where Redis is and how to reach it. */
export type RedisTopology = Pick<RedisConfig, 'url' | 'cluster' | 'sentinel' | 'username' | 'password' | 'tls'> & { replicas?: number | undefined };

export interface RedisConnectOptions {
  /** A standalone Redis's URL (shorthand for `redis: { url }`). */
  url?: string;
  /** Where Redis is: a standalone URL, a cluster's seed nodes, or a primary behind Sentinel, with credentials and TLS. */
  redis?: RedisTopology;
  /**
   * A command with no answer in this time fails (a hung Redis must not hang requests), once the event loop has had
   * one more chance to read its answer (command-deadline.ts): a late process keeps an answer that did arrive.
   */
  commandTimeoutMs: number;
  purpose: RedisPurpose;
  /** Where connection failures are logged: one error line per change of cause (connection-problems.ts). */
  logger?: Logger;
}

export interface RedisConnection {
  readonly client: RedisCommands;
  /** Where it connects, passwords removed: for logs and error messages. */
  readonly where: string;
  readonly topology: 'standalone' | 'cluster' | 'sentinel';
  /** Connected and past the ready check: commands are sent now (while not, the gateway's fail at once). */
  isReady(): boolean;
  /** Bytes read on the current socket(s): the breaker tells a late-reading process from a silent Redis by it. */
  bytesRead(): number;
  /** Every (re)connection that passed the ready check. */
  onReady(fn: () => void): void;
  /** Every connection loss (including the one close() causes). */
  onClose(fn: () => void): void;
  /** Resolves once ready, or rejects after timeoutMs; with failOnError also at the first connection error. */
  waitForReady(timeoutMs: number, opts?: { failOnError?: boolean }): Promise<void>;
  /**
   * A new subscriber connection: its SUBSCRIBE waits for a connection (Redis may be down at start-up) and is sent
   * again after every reconnect (on a cluster, to another node after a failover); no command timeout.
   */
  subscriber(): RedisSubscriber;
  /**
   * Waits (at most timeoutMs) until at least one replica of every primary holding these keys has acknowledged the
   * writes made so far on this connection (WAIT on each such primary). `expected`: the replicas that primary is meant
   * to have (ExpectedReplicas); `acked`: how many acknowledged in time. Reported for the primary that fared worst
   * (riskier). A primary with no replica connected is not waited on (acked 0 at once). Never rejects.
   */
  waitForReplicas(keys: readonly string[], timeoutMs: number): Promise<Replication>;
  /** The primaries commands that carry no key should go to each of (a cluster's every primary; else the client). */
  primaries(): RedisCommands[];
  /**
   * The connection to send a command on whose keys all share this key's hash slot: on a cluster, the connection to
   * the slot's primary as the client's slot table names it, when that connection is ready; otherwise (and on every
   * other topology) `client`. Sending there skips the cluster client's routing of each command (a slot worked out
   * for every key, a pipeline per node and turn): on the request path that routing cost the gateway about a tenth
   * more CPU per request than a standalone Redis (bench/README.md, scenario k). A slot that has moved since the
   * table was read answers MOVED or ASK (isRedirection): send the command again on `client`, which follows the
   * redirection and refreshes its table.
   */
  clientForSlotOf(key: string): RedisCommands;
  /**
   * A cluster's primaries that do not answer a PING within timeoutMs, each named by the slots it serves (not its
   * address: /readyz may be public); always empty for a standalone or Sentinel-managed Redis (one primary, which
   * the readiness write probe reaches).
   */
  silentPrimaries(timeoutMs: number): Promise<string[]>;
  /** Quits (waiting for replies in flight), then drops the socket: at once if QUIT fails, after 1 s if Redis does not answer. */
  close(): Promise<void>;
}

/** How far a write reached: `expected` replicas (see expectedReplicas), `acked` of them confirmed it in time. */
export interface Replication {
  expected: number;
  acked: number;
}

/** A primary's replicas connected now (INFO replication's connected_slaves). */
async function connectedReplicas(node: Pick<Redis, 'info'>): Promise<number> {
  return Number(/^connected_slaves:(\d+)/m.exec(await node.info('replication'))?.[1] ?? 0);
}

/**
 * The replicas a primary is meant to have, so that a write at risk is reported as such: a replica that dropped out
 * must still count, or the answer would say "nothing expected" exactly when nothing acknowledged. The most of:
 * `redis.replicas` when the config names it; the most this process has seen connected to that primary (at connect,
 * and at every wait since); on a cluster, the replicas the slot map lists for the primary; behind Sentinel, the
 * replicas the sentinels know of (they remember one that is down).
 */
class ExpectedReplicas {
  private readonly seen = new Map<string, number>();
  constructor(private readonly configured = 0) {}
  note(primary: string, count: number): void {
    if (count > (this.seen.get(primary) ?? 0)) this.seen.set(primary, count);
  }
  of(primary: string): number {
    return Math.max(this.configured, this.seen.get(primary) ?? 0);
  }
}

/**
 * WAIT for one replica on one primary, unless none is connected (WAIT would only sit out its timeout). Never throws:
 * the change is made by now, and a primary that refuses INFO (an ACL) or WAIT, or went away meanwhile, has simply
 * confirmed nothing (acked 0).
 */
async function waitOnPrimary(node: Pick<Redis, 'info' | 'wait'>, timeoutMs: number, primary: string, expected: ExpectedReplicas): Promise<Replication> {
  const connected = await connectedReplicas(node).catch(() => undefined);
  if (connected !== undefined) expected.note(primary, connected);
  const acked = connected === 0 ? 0 : await node.wait(1, timeoutMs).catch(() => 0);
  return { expected: expected.of(primary), acked };
}

/**
 * Whether `a` is the outcome to report over `b`: a primary with replicas expected and none acknowledging first; then
 * one meant to have replicas over one that is not (nothing to wait for there); then fewer acks.
 */
function riskier(a: Replication, b: Replication): boolean {
  const atRisk = (r: Replication) => r.expected > 0 && r.acked === 0;
  if (atRisk(a) !== atRisk(b)) return atRisk(a);
  if (a.expected > 0 !== b.expected > 0) return a.expected > 0;
  return a.acked < b.acked || (a.acked === b.acked && a.expected > b.expected);
}

const SENTINEL_ASK_EVERY_MS = 60_000;

/** How many replicas the sentinels know for the primary (down ones included); 0 when none answers. */
async function sentinelReplicas(target: RedisTopology, timeoutMs: number): Promise<number> {
  const { masterName, sentinels } = target.sentinel!;
  for (const url of sentinels) {
    const u = new URL(url);
    const tls = tlsOptions(target.tls, url);
    const s = new Redis({
      host: u.hostname,
      port: Number(u.port || 26379),
      ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
      ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
      ...(tls ? { tls } : {}),
      connectTimeout: timeoutMs,
      commandTimeout: timeoutMs,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      lazyConnect: true,
    });
    s.on('error', () => {});
    try {
      await s.connect();
      const replicas = (await s.call('SENTINEL', 'REPLICAS', masterName)) as unknown[];
      return replicas.length;
    } catch {
      // this sentinel did not answer: ask the next
    } finally {
      s.disconnect();
    }
  }
  return 0;
}

/** Reconnect quickly and keep trying: an outage should end the moment Redis is back. */
const retryStrategy = (times: number): number => Math.min(50 * 2 ** Math.min(times, 5), 1000);

/** What every connection of one connectRedis() call is made with, whatever the topology. */
interface ClientSettings {
  /** ioredis options for each connection to a Redis server. */
  perConnection: RedisOptions;
  /** Commands fail at once while disconnected (the gateway's request path) rather than wait in the offline queue. */
  failFast: boolean;
  /** Each command's deadline (giveCommandsDeadline), set on every connection to a server. */
  commandTimeoutMs: number;
  /** The replicas each primary is meant to have, kept across the connection's life. */
  expected: ExpectedReplicas;
}

/**
 * What differs between the topologies behind the port: the client, and the port's answers that depend on how many
 * primaries there are and how keys map to them. clusterClient() and singlePrimaryClient() each build one; connectRedis()
 * chooses between them once and adds what is common.
 */
interface TopologyClient {
  client: Redis | Cluster;
  topology: RedisConnection['topology'];
  where: string;
  /** Calls fn with every connection error; tcpConnected when the socket was up (a TLS handshake then got no answer). */
  onConnectionError(fn: (err: unknown, tcpConnected?: boolean) => void): void;
  bytesRead(): number;
  primaries(): RedisCommands[];
  clientForSlotOf(key: string): RedisCommands;
  waitForReplicas(keys: readonly string[], timeoutMs: number): Promise<Replication>;
  silentPrimaries(timeoutMs: number): Promise<string[]>;
  /**
   * A duplicate of the client for subscribing: no command timeout, and maxRetriesPerRequest null, which keeps the
   * SUBSCRIBE queued until a connection exists (with the request-path client's 0 it was dropped at the first failed
   * connect when Redis was down at start-up, and never resent).
   */
  duplicateForSubscriber(): Redis | Cluster;
}

/** Bytes read on a connection's current socket (replaced on every reconnect; none before the first). */
const socketBytesRead = (node: Redis): number => (node.stream as { bytesRead?: number } | undefined)?.bytesRead ?? 0;

/** A cluster node's address as the cluster client's slot table names it. */
const nodeAddress = (node: Redis): string => `${node.options.host}:${node.options.port}`;

/**
 * A Redis Cluster: commands routed by slot, every primary reached for the commands that carry no key, WAIT sent to
 * each primary holding a changed key, and the request path's commands sent straight to their slot's primary.
 */
function clusterClient(target: RedisTopology & { cluster: NonNullable<RedisTopology['cluster']> }, settings: ClientSettings): TopologyClient {
  const { perConnection, failFast, commandTimeoutMs, expected } = settings;
  const nodes = target.cluster.nodes;
  const first = new URL(nodes[0]!);
  const tls = tlsOptions(target.tls, nodes[0]!);
  const c = new Cluster(
    nodes.map((u) => ({ host: new URL(u).hostname, port: Number(new URL(u).port || 6379) })),
    {
      redisOptions: {
        ...perConnection,
        // For the commands clientForSlotOf() sends straight to a node: one write per turn of the event loop, as on
        // a standalone Redis. (The cluster client's own commands reach a node through sendCommand, which this
        // option leaves alone.)
        enableAutoPipelining: true,
        // Credentials from the seed URL unless the config names them.
        ...(target.username === undefined && first.username ? { username: decodeURIComponent(first.username) } : {}),
        ...(target.password === undefined && first.password ? { password: decodeURIComponent(first.password) } : {}),
        ...(tls ? { tls } : {}),
      },
      enableOfflineQueue: !failFast,
      enableAutoPipelining: true,
      clusterRetryStrategy: retryStrategy,
      slotsRefreshTimeout: Math.max(1000, commandTimeoutMs * 10),
      // Every command goes to the primary of its slot: limits are read-modify-write, never from a lagging replica.
      scaleReads: 'master',
    },
  );
  // The node connections by "host:port", the form the slot table names them in; kept by the client's events.
  const nodeByAddress = new Map<string, Redis>();
  // The seed nodes' connections were made in the constructor, before these listeners. Every command, the cluster
  // client's and those sent straight to a node, is written by a node's connection: each gets the command deadline.
  for (const node of c.nodes('all')) {
    giveCommandsDeadline(node, commandTimeoutMs);
    nodeByAddress.set(nodeAddress(node), node);
  }
  c.on('+node', (node: Redis) => {
    giveCommandsDeadline(node, commandTimeoutMs);
    nodeByAddress.set(nodeAddress(node), node);
  });
  c.on('-node', (node: Redis) => {
    if (nodeByAddress.get(nodeAddress(node)) === node) nodeByAddress.delete(nodeAddress(node));
  });
  return {
    client: c,
    topology: 'cluster',
    where: `cluster ${nodes.map(redactRedisUrl).join(', ')}`,
    onConnectionError(fn) {
      c.on('error', (err: unknown) => fn(err, false));
      c.on('node error', (err: unknown) => fn(err));
    },
    bytesRead: () => c.nodes().reduce((n, node) => n + socketBytesRead(node), 0),
    primaries: () => c.nodes('master'),
    clientForSlotOf(key) {
      const owner = c.slots[calculateSlot(key)]?.[0];
      const node = owner === undefined ? undefined : nodeByAddress.get(owner);
      return node?.status === 'ready' ? node : c;
    },
    async waitForReplicas(keys, timeoutMs) {
      // WAIT counts the replicas of the primary it is sent to, so it goes to each primary holding one of the keys.
      const primaries = new Set<string>();
      for (const key of keys) {
        const owners = c.slots[calculateSlot(key)];
        if (!owners?.[0]) continue;
        primaries.add(owners[0]);
        expected.note(owners[0], owners.length - 1);
      }
      let worst: Replication | undefined;
      for (const owner of primaries) {
        const node = c.nodes('master').find((n) => nodeAddress(n) === owner);
        // The slot's primary is not reachable: nothing could acknowledge there.
        const r = node ? await waitOnPrimary(node, timeoutMs, owner, expected) : { expected: expected.of(owner), acked: 0 };
        if (!worst || riskier(r, worst)) worst = r;
      }
      return worst ?? { expected: 0, acked: 0 };
    },
    async silentPrimaries(timeoutMs) {
      const ranges = slotRanges(c.slots);
      // The owners the slot table names: a primary whose connection ended has left the client's node list, but its
      // slots still point at it until a replica takes them over.
      const byAddress = new Map<string, Redis>(c.nodes('all').map((n) => [nodeAddress(n), n]));
      const silent = await Promise.all(
        [...ranges.keys()].map(async (key) => {
          const node = byAddress.get(key);
          let timer: NodeJS.Timeout | undefined;
          const answered =
            node !== undefined &&
            (await Promise.race([
              node.ping().then(
                () => true,
                () => false,
              ),
              new Promise<boolean>((r) => (timer = setTimeout(() => r(false), timeoutMs))),
            ]));
          clearTimeout(timer);
          return answered ? undefined : `the primary of slots ${ranges.get(key)}`;
        }),
      );
      return silent.filter((x): x is string => x !== undefined);
    },
    duplicateForSubscriber: () =>
      c.duplicate(undefined, {
        enableOfflineQueue: true,
        redisOptions: { ...c.options.redisOptions, commandTimeout: undefined, maxRetriesPerRequest: null },
      }),
  };
}

/**
 * One primary: a standalone Redis at a URL, or the primary a set of sentinels names (asked again after a failover).
 * Every command, keyed or not, goes to it; WAIT too.
 */
function singlePrimaryClient(target: RedisTopology, settings: ClientSettings): TopologyClient {
  const { perConnection, failFast, commandTimeoutMs, expected } = settings;
  let c: Redis;
  let where: string;
  if (target.sentinel) {
    const { masterName, sentinels } = target.sentinel;
    const first = new URL(sentinels[0]!);
    const tls = tlsOptions(target.tls, sentinels[0]!);
    c = new Redis({
      ...perConnection,
      sentinels: sentinels.map((u) => ({ host: new URL(u).hostname, port: Number(new URL(u).port || 26379) })),
      name: masterName,
      ...(first.username ? { sentinelUsername: decodeURIComponent(first.username) } : {}),
      ...(first.password ? { sentinelPassword: decodeURIComponent(first.password) } : {}),
      ...(tls ? { tls, sentinelTLS: tls, enableTLSForSentinelMode: true } : {}),
      enableOfflineQueue: !failFast,
      enableAutoPipelining: true,
      retryStrategy,
      sentinelRetryStrategy: retryStrategy,
      // A primary demoted by a failover answers writes with READONLY: reconnect (asking Sentinel for the new one).
      reconnectOnError: (err) => err.message.startsWith('READONLY'),
      lazyConnect: false,
    });
    where = `sentinel ${masterName} via ${sentinels.map(redactRedisUrl).join(', ')}`;
  } else {
    const url = target.url!;
    const tls = tlsOptions(target.tls, url);
    c = new Redis(url, {
      ...perConnection,
      ...(tls ? { tls } : {}),
      enableOfflineQueue: !failFast,
      enableAutoPipelining: true,
      retryStrategy,
      // A primary demoted behind a fixed address (a managed service's failover) answers writes with READONLY.
      reconnectOnError: (err) => err.message.startsWith('READONLY'),
      lazyConnect: false,
    });
    where = redactRedisUrl(url);
  }
  giveCommandsDeadline(c, commandTimeoutMs);
  // The primary's replicas as seen at every (re)connection, so one that drops out later still counts.
  const PRIMARY = 'primary';
  c.on('ready', () => {
    connectedReplicas(c).then(
      (n) => expected.note(PRIMARY, n),
      () => {},
    );
  });
  let sentinelsAskedAt = -Infinity;
  return {
    client: c,
    topology: target.sentinel ? 'sentinel' : 'standalone',
    where,
    onConnectionError: (fn) => void c.on('error', (err: unknown) => fn(err, (c.stream as { connecting?: boolean } | undefined)?.connecting === false)),
    bytesRead: () => socketBytesRead(c),
    primaries: () => [c],
    clientForSlotOf: () => c,
    async waitForReplicas(_keys, timeoutMs) {
      // The sentinels' view, asked at most once a minute: a connection of its own each time.
      if (target.sentinel && Date.now() - sentinelsAskedAt > SENTINEL_ASK_EVERY_MS) {
        sentinelsAskedAt = Date.now();
        expected.note(PRIMARY, await sentinelReplicas(target, Math.min(timeoutMs, 1000)));
      }
      return waitOnPrimary(c, timeoutMs, PRIMARY, expected);
    },
    // One primary, which the readiness write probe reaches.
    silentPrimaries: async () => [],
    duplicateForSubscriber: () => c.duplicate({ enableOfflineQueue: true, commandTimeout: undefined, maxRetriesPerRequest: null }),
  };
}

export function connectRedis(opts: RedisConnectOptions): RedisConnection {
  const target: RedisTopology = opts.redis ?? { url: opts.url };
  // The gateway's requests fail at once while disconnected (enableOfflineQueue: false) rather than queueing for the
  // reconnect; key administration, the CLI and the pet store prefer to wait for the connection.
  const failFast = opts.purpose === 'gateway';
  const settings: ClientSettings = {
    perConnection: {
      // RESP2: replies as plain arrays, the shape rate-limiter-flexible's scripts expect.
      protocol: 2,
      // No commandTimeout: ioredis's drops an answer that arrived while this process was late to read it. Each
      // command's deadline is Tollgate's own (command-deadline.ts), set on every connection the client makes.
      connectTimeout: Math.max(1000, opts.commandTimeoutMs * 10),
      maxRetriesPerRequest: failFast ? 0 : 1,
      connectionName: `tollgate-${opts.purpose}`,
      ...(target.username !== undefined ? { username: target.username } : {}),
      ...(target.password !== undefined ? { password: target.password } : {}),
    },
    failFast,
    commandTimeoutMs: opts.commandTimeoutMs,
    expected: new ExpectedReplicas(target.replicas ?? 0),
  };
  // The one place that tells a cluster from a single primary: everything below, and every caller, asks the port.
  const cluster = target.cluster;
  const t = cluster ? clusterClient({ ...target, cluster }, settings) : singlePrimaryClient(target, settings);
  const c = t.client;
  // Without a listener ioredis logs "Unhandled error event" on every failed reconnect. With a logger, why it fails is
  // logged when the cause changes (refused, timeout, not Redis, auth, TLS), never once per retry.
  const usesTls = (target.cluster?.nodes[0] ?? target.sentinel?.sentinels[0] ?? target.url ?? '').startsWith('rediss:');
  const secrets = [target.password ?? '', ...[target.url, ...(target.cluster?.nodes ?? []), ...(target.sentinel?.sentinels ?? [])].map(urlPassword)];
  const problems = opts.logger ? connectionProblemLog(opts.logger, t.where, usesTls, secrets) : undefined;
  t.onConnectionError((err, tcpConnected) => problems?.error(err, tcpConnected));
  c.on('ready', () => problems?.connected());
  return {
    client: c,
    where: t.where,
    topology: t.topology,
    isReady: () => c.status === 'ready',
    bytesRead: t.bytesRead,
    waitForReplicas: t.waitForReplicas,
    primaries: t.primaries,
    clientForSlotOf: t.clientForSlotOf,
    silentPrimaries: t.silentPrimaries,
    onReady: (fn) => void c.on('ready', fn),
    onClose: (fn) => void c.on('close', fn),
    waitForReady: (timeoutMs, o) => waitForReady(c, timeoutMs, o),
    subscriber() {
      const sub = t.duplicateForSubscriber();
      sub.on('error', () => {});
      return sub as RedisSubscriber;
    },
    async close() {
      // Not connected: nothing in flight to wait for, and a connection with an offline queue would only queue the QUIT.
      if (c.status !== 'ready') return void c.disconnect();
      // QUIT waits for a reply that a dead Redis never sends: capped.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([c.quit().catch(() => undefined), new Promise((r) => (timer = setTimeout(r, 1000)))]);
      clearTimeout(timer);
      c.disconnect();
    },
  };
}

/**
 * Whether the server is the topology the config names, asked before the gateway serves: a `url` that reaches a
 * cluster node would fail every limit check with MOVED, and cluster seed nodes without cluster support would never
 * connect. Asks one node (the url, or each seed in turn) with a short-lived plain connection: INFO cluster. Returns
 * the problem, naming the field; undefined when the topology matches or no node answered (the gateway then starts
 * degraded and connects when Redis is back). Sentinel is asked for its primary by the client itself.
 */
export async function topologyMismatch(target: RedisTopology, timeoutMs: number): Promise<string | undefined> {
  const probes = target.cluster ? target.cluster.nodes : target.url !== undefined ? [target.url] : [];
  for (const [i, url] of probes.entries()) {
    const tls = tlsOptions(target.tls, url);
    const probe = new Redis(url, {
      ...(target.username !== undefined ? { username: target.username } : {}),
      ...(target.password !== undefined ? { password: target.password } : {}),
      ...(tls ? { tls } : {}),
      connectTimeout: timeoutMs,
      commandTimeout: timeoutMs,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      lazyConnect: true,
    });
    probe.on('error', () => {});
    try {
      await probe.connect();
      const enabled = /^cluster_enabled:1\s*$/m.test(await probe.info('cluster'));
      if (target.cluster && !enabled)
        return `redis.cluster.nodes[${i}] (${redactRedisUrl(url)}) is not a cluster node (cluster support disabled): for a standalone Redis set redis.url instead`;
      if (!target.cluster && enabled) return `redis.url (${redactRedisUrl(url)}) is a Redis Cluster node: set redis.cluster.nodes instead`;
      return undefined;
    } catch {
      // Not reachable (or refused INFO): try the next seed; none answering is an outage, not a mismatch.
    } finally {
      probe.disconnect();
    }
  }
  return undefined;
}

/** Slot ranges per node ("0-5460", "5461-10922,12000"), from the cluster client's slot table. */
function slotRanges(slots: ReadonlyArray<readonly string[] | undefined>): Map<string, string> {
  const out = new Map<string, string[]>();
  let start = 0;
  for (let slot = 1; slot <= slots.length; slot++) {
    const owner = slots[start]?.[0];
    if (slot < slots.length && slots[slot]?.[0] === owner) continue;
    if (owner) {
      const list = out.get(owner) ?? [];
      list.push(start === slot - 1 ? String(start) : `${start}-${slot - 1}`);
      out.set(owner, list);
    }
    start = slot;
  }
  return new Map([...out].map(([k, v]) => [k, v.join(',')]));
}

/** Node TLS options from the config's `tls` section, for a rediss:// URL; undefined for redis://. */
function tlsOptions(tls: RedisTopology['tls'], url: string): ConnectionOptions | undefined {
  if (!url.startsWith('rediss:')) return undefined;
  return {
    ...(tls?.caFile ? { ca: readFileSync(tls.caFile) } : {}),
    ...(tls?.certFile ? { cert: readFileSync(tls.certFile) } : {}),
    ...(tls?.keyFile ? { key: readFileSync(tls.keyFile) } : {}),
    ...(tls?.servername ? { servername: tls.servername } : {}),
    rejectUnauthorized: tls?.rejectUnauthorized ?? true,
  };
}

function waitForReady(client: Redis | Cluster, timeoutMs: number, opts: { failOnError?: boolean } = {}): Promise<void> {
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

/**
 * Whether a cluster answered that a slot is served elsewhere (MOVED, ASK), is being moved (TRYAGAIN) or is not served
 * now (CLUSTERDOWN): the command did not run, and the cluster client, which follows these, may send it again.
 */
export function isRedirection(err: unknown): boolean {
  return err instanceof Error && /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /.test(err.message);
}

/** The password a Redis URL carries ('' for none). */
function urlPassword(url: string | undefined): string {
  try {
    return url === undefined ? '' : decodeURIComponent(new URL(url).password);
  } catch {
    return '';
  }
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
