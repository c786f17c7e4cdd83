// Events and the metering export on a Redis Cluster of 3 primaries (real redis-server processes in cluster mode, on
// loopback), as an operator runs them: two built `tollgate serve` processes with an events section (a webhook to a
// receiver process, test/fixtures/webhook-receiver.mjs), a key crossing 80% and 100% of its day across both, each
// delivery checked with the Standard Webhooks library; then `tollgate usage export --to <file>` on the same config
// (the traffic's own hour is still open, so the hours it exports are two closed ones counted in the key's ledger by
// the test); then an endpoint registered on one gateway's admin API, reached through the change feed.
// The outbox ({outbox}), the endpoint's queue ({ep:<id>}), the key's ledger ({<key id>}) and the export's checkpoint
// ({<destination>}) are each in a slot of their own, so every script runs on one node and the commands go to several.
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import calculateSlot from 'cluster-key-slot';
import type { Cluster } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateAdminToken, hashAdminToken } from '../../src/admin/tokens.js';
import { keySubject } from '../../src/limits/subject.js';
import { hourOfDay } from '../../src/usage/store.js';
import { Keyspace } from '../../src/storage/keyspace.js';
import { dayOf, HOUR_MS } from '../../src/util/time.js';
import { assertBuilt, cliOk, CliProcess, startServe, tempDir } from '../helpers/cli.js';
import { TestRedisCluster } from '../helpers/redis-cluster.js';
import { TestUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';
import { spawnReceiver } from '../helpers/webhook-receiver.js';

const PREFIX = 'cev:';
const ks = new Keyspace(PREFIX);
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const TOKEN = generateAdminToken();

let cluster: TestRedisCluster;
let up: TestUpstream;
let admin: Cluster;
let receiver: ChildProcess | undefined;
let receiverPort = 0;
const dir = tempDir();
const received = join(dir.dir, 'received.jsonl');

interface Delivery {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** Starts the receiver process on any free port; resolves once it listens. */
async function startReceiver(): Promise<void> {
  const started = await spawnReceiver(0, received);
  receiver = started.proc;
  receiverPort = started.port;
}

/** The requests the receiver got on /<path>. */
function deliveries(path = 'hooks'): Delivery[] {
  if (!existsSync(received)) return [];
  return readFileSync(received, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Delivery)
    .filter((d) => d.path === `/${path}`);
}

/** One delivery per webhook-id (delivery is at least once). */
function distinct(ds: Delivery[]): Delivery[] {
  const seen = new Map<string, Delivery>();
  for (const d of ds) if (!seen.has(d.headers['webhook-id']!)) seen.set(d.headers['webhook-id']!, d);
  return [...seen.values()];
}

beforeAll(async () => {
  assertBuilt();
  [cluster, up] = await Promise.all([TestRedisCluster.start({ primaries: 3, replicas: 0 }), TestUpstream.start(), startReceiver()]);
  admin = cluster.client();
}, 90_000);

afterAll(async () => {
  if (receiver && receiver.exitCode === null && receiver.signalCode === null) {
    const exited = new Promise((r) => receiver!.once('exit', r));
    receiver.kill('SIGKILL');
    await exited;
  }
  await CliProcess.killAll();
  admin?.disconnect();
  await up?.close();
  await cluster?.stop();
  dir.remove();
});

function gatewayConfig(): Record<string, unknown> {
  return {
    server: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] },
    portal: { webhooks: true },
    upstream: { url: up.url },
    redis: { cluster: { nodes: cluster.urls }, prefix: PREFIX, commandTimeoutMs: 2000 },
    plans: { small: { perMinute: 1000, perDay: 10 } },
    // Refusals past the day's limit would strike toward a ban: not what this test is about.
    ban: { enabled: false },
    events: {
      source: 'urn:tollgate:cluster',
      thresholds: [80, 100],
      // The registered endpoint of the last test is the receiver, on loopback.
      allowTargets: ['127.0.0.0/8'],
      webhooks: [{ id: 'cluster-hook', url: `http://127.0.0.1:${receiverPort}/hooks`, secret: SECRET }],
    },
  };
}

/** Redis' clock (the one the limit script counts the ledger by), ms. */
async function redisNow(): Promise<number> {
  const [s, us] = await admin.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

interface HourCounts {
  admitted: number;
  refused: number;
}

describe('events and the metering export on a 3-primary cluster', () => {
  let configFile: string;
  let keyId: string;
  let trafficHour: number;
  /** The two gateways and their admin API's address. */
  let gws: Array<{ url: string; adminUrl: string }>;

  it('two gateways: a key crossing 80% and 100% of its day gives exactly two quota.threshold events, each delivered and verified', async () => {
    configFile = dir.write('gateway.yaml', gatewayConfig());
    const created = JSON.parse((await cliOk(['keys', 'create', '--plan', 'small', '--json', '--yes', '--quiet', '--config', configFile])).stdout) as {
      key: string;
      id: string;
    };
    keyId = created.id;
    // The outbox, the endpoint's queue and the key's own state each in a slot of its own: three scripts on (up to)
    // three nodes, none of them crossing slots.
    const slots = ['{outbox}', '{ep:cluster-hook}', `{${keyId}}`].map((t) => calculateSlot(t));
    const owners = await Promise.all(['{outbox}', '{ep:cluster-hook}', `{${keyId}}`].map(async (t) => (await cluster.primaryOf(t)).port));
    console.log(
      `slots on the cluster: outbox ${slots[0]} (port ${owners[0]}), endpoint queue ${slots[1]} (port ${owners[1]}), key ${slots[2]} (port ${owners[2]})`,
    );

    gws = await Promise.all(
      [0, 1].map(async () => {
        const { proc, url } = await startServe(configFile);
        return { url, adminUrl: String((await proc.waitForLog('admin API listening')).url) };
      }),
    );
    const [a, b] = [gws[0]!, gws[1]!];
    // The hour before and after the traffic (the same hour unless it crossed one): the ledger's counts are in them.
    const hourBefore = Math.floor((await redisNow()) / HOUR_MS) * HOUR_MS;
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) {
      const r = await fetch(`${(i % 2 ? b : a).url}/v1/things`, { headers: { authorization: `Bearer ${created.key}` }, signal: AbortSignal.timeout(10_000) });
      await r.arrayBuffer();
      statuses.push(r.status);
    }
    trafficHour = Math.floor((await redisNow()) / HOUR_MS) * HOUR_MS;
    const trafficHours = [...new Set([hourBefore, trafficHour])];
    expect(statuses).toEqual([...Array<number>(10).fill(200), 429, 429]);

    await waitFor(() => distinct(deliveries()).length >= 2, 'two distinct deliveries on /hooks', 60_000, 100);
    // Room for a duplicate or a third event to arrive, were there one.
    await sleep(3000);
    const all = deliveries();
    const events = distinct(all).map((d) => new Webhook(SECRET).verify(d.body, d.headers) as { id: string; type: string; data: Record<string, unknown> });
    for (const d of all) expect(() => new Webhook(SECRET).verify(d.body, d.headers)).not.toThrow();
    console.log(`deliveries on the cluster: ${all.length} request(s), ${events.length} distinct: ${events.map((e) => e.id).join(', ')}`);
    expect(events.map((e) => e.type)).toEqual(['quota.threshold', 'quota.threshold']);
    expect(events.map((e) => e.data.percent).sort()).toEqual([100, 80]);
    for (const e of events) {
      expect(e.data).toMatchObject({ key: keyId, plan: 'small', window: 'day', limit: 10 });
      expect(e.data.used).toBe(e.data.threshold);
    }
    // Each queued once, delivered, acknowledged in the outbox.
    const state = await admin.hgetall(`${PREFIX}events:{ep:cluster-hook}:state`);
    expect(Number(state.enqueued)).toBe(2);
    await waitFor(
      async () => Number((await admin.hget(`${PREFIX}events:{ep:cluster-hook}:state`, 'delivered')) ?? 0) === 2,
      'both recorded delivered',
      10_000,
      100,
    );
    expect(await admin.zcard(`${PREFIX}events:{ep:cluster-hook}:due`)).toBe(0);
    expect(await admin.xlen(`${PREFIX}events:{outbox}`)).toBe(2);
    const pending = (await admin.xpending(`${PREFIX}events:{outbox}`, 'dispatch')) as [number, ...unknown[]];
    expect(pending[0]).toBe(0);

    // The ledger of that hour: what the test sent.
    const ledger = { admitted: 0, refused: 0 };
    for (const hourMs of trafficHours) {
      const day = await admin.hgetall(ks.usageDay(keySubject(keyId), dayOf(hourMs)));
      const h = hourOfDay(hourMs);
      ledger.admitted += Number(day[`a${h}`] ?? 0);
      ledger.refused += Number(day[`r${h}`] ?? 0) + Number(day[`b${h}`] ?? 0);
    }
    expect(ledger).toEqual({ admitted: 10, refused: 2 });
  });

  it('usage export --to <file> writes exactly the closed hours of the ledger for that key; a second run writes nothing new', async () => {
    // The traffic above counted in the hour now running, which the export never reads (an hour is read once closed,
    // 10 minutes after its end): two closed hours of the same key, counted in its ledger the way the limit script
    // counts (a<h>, r<h> in the key's slot), are what the export has to find on the cluster.
    const closed = new Map<number, HourCounts>([
      [trafficHour - 2 * HOUR_MS, { admitted: 7, refused: 3 }],
      [trafficHour - 3 * HOUR_MS, { admitted: 4, refused: 0 }],
    ]);
    for (const [hourMs, c] of closed) {
      const k = ks.usageDay(keySubject(keyId), dayOf(hourMs));
      await admin.hincrby(k, `a${hourOfDay(hourMs)}`, c.admitted);
      if (c.refused) await admin.hincrby(k, `r${hourOfDay(hourMs)}`, c.refused);
    }
    const file = join(dir.dir, 'hours.jsonl');
    const run = async () =>
      JSON.parse((await cliOk(['usage', 'export', '--to', file, '--config', configFile, '--json', '--quiet'])).stdout) as {
        events: number;
        corrections: number;
      };
    const first = await run();
    const lines = () => readFileSync(file, 'utf8').trimEnd().split('\n');
    const written = lines().map((l) => JSON.parse(l) as { id: string; type: string; data: { key: string; start: string } & HourCounts });
    const got = new Map(written.map((e) => [Date.parse(e.data.start), { admitted: e.data.admitted, refused: e.data.refused }]));
    console.log(`usage export on the cluster: ${first.events} event(s): ${written.map((e) => e.id).join(', ')}`);
    expect(first.events).toBe(2);
    expect(written.map((e) => [e.type, e.data.key])).toEqual([
      ['usage.hour', keyId],
      ['usage.hour', keyId],
    ]);
    expect(got).toEqual(closed);
    expect([...got.keys()].every((hourMs) => hourMs < trafficHour - HOUR_MS)).toBe(true);

    const second = await run();
    expect(second).toMatchObject({ events: 0, corrections: 0 });
    expect(lines()).toHaveLength(2);
  });

  it("an endpoint registered on one gateway's admin API gets its consumer's next event, whichever gateway's events thread reads it (the change feed)", async () => {
    const [a, b] = [gws[0]!, gws[1]!];
    await cliOk(['consumers', 'create', '--id', 'acme', '--name', 'acme', '--plan', 'small', '--yes', '--quiet', '--config', configFile]);
    // Both events threads listen on the change feed (a channel: each listener on whichever node it connected to).
    const channel = ks.eventEndpointsChanged();
    const nodes = (await cluster.primaries()).map((p) => p.client());
    try {
      const listeners = async () =>
        (await Promise.all(nodes.map(async (n) => Number(((await n.pubsub('NUMSUB', channel)) as [string, number])[1])))).reduce((x, y) => x + y, 0);
      await waitFor(async () => (await listeners()) >= 2, 'both events threads subscribed to the change feed', 10_000, 100);
    } finally {
      for (const n of nodes) n.disconnect();
    }
    const r = await fetch(`${a.adminUrl}/consumers/acme/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `http://127.0.0.1:${receiverPort}/reg`, types: ['quota.threshold'] }),
      signal: AbortSignal.timeout(10_000),
    });
    const created = (await r.json()) as { secret: string };
    expect(r.status, JSON.stringify(created)).toBe(201);
    // No wait: the registration's message on the change feed makes each events thread read the registry again before
    // it queues the next outbox entries (its own periodic read is 10 s apart).
    const key = JSON.parse(
      (await cliOk(['keys', 'create', '--plan', 'small', '--consumer', 'acme', '--json', '--yes', '--quiet', '--config', configFile])).stdout,
    ) as { key: string };
    for (let i = 0; i < 8; i++) {
      const res = await fetch(`${(i % 2 ? b : a).url}/v1/things`, { headers: { authorization: `Bearer ${key.key}` }, signal: AbortSignal.timeout(10_000) });
      await res.arrayBuffer();
      expect(res.status).toBe(200);
    }
    await waitFor(() => deliveries('reg').length >= 1, "acme's 80% event at its registered endpoint", 30_000, 100);
    await sleep(1000);
    const events = distinct(deliveries('reg')).map(
      (d) => new Webhook(created.secret).verify(d.body, d.headers) as { subject: string; data: Record<string, unknown> },
    );
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ subject: 'consumer:acme', data: { consumer: 'acme', percent: 80, limit: 10 } });
  });
});
