// Events end to end, as an operator runs them: built `tollgate serve` processes on one real redis-server, and webhook
// receivers that are processes of their own (test/fixtures/webhook-receiver.mjs: killed and started again on the same
// port), each delivery checked with the Standard Webhooks library (`new Webhook(secret).verify(body, headers)`).
// A key crossing 80% and 100% of its day; an event made while the receiver is down and every gateway restarted, then
// delivered; a secret rotation (both secrets verify, then the old one no longer does); a 410 disabling its endpoint;
// a 302 never followed and retried; 64 deliveries hanging on a receiver leaving the proxy's p99 as it was; an endpoint
// registered by the admin API refused at 127.0.0.1 until events.allowTargets opens loopback, then getting its own
// consumer's events only; key.expiring sent once by two gateways; and the verification snippets of docs/events.md run
// (Node and Python) against a real delivery.
import { spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { assertBuilt, cliOk, CliProcess, REPO, startServe, tempDir } from './helpers/cli.js';
import { spawnReceiver } from './helpers/webhook-receiver.js';
import { useStack } from './helpers/stack.js';
import { TestUpstream } from './helpers/upstream.js';
import { waitFor } from './helpers/wait.js';

const TOKEN = generateAdminToken();
const secret = () => `whsec_${randomBytes(32).toString('base64')}`;

const stack = useStack({ redis: true, client: true });
const dir = tempDir();
const receivers: Receiver[] = [];
afterAll(async () => {
  // Receivers first: a gateway stopping waits for its attempts in flight, which a hanging receiver would hold.
  await Promise.all(receivers.map((r) => r.kill()));
  await CliProcess.killAll();
  dir.remove();
});

interface Delivery {
  at: number;
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** A receiver process: its deliveries are read from the file it appends to, so they outlive it. */
class Receiver {
  private constructor(
    private proc: ChildProcess,
    readonly port: number,
    readonly file: string,
    private readonly rules: string[],
  ) {}

  static async start(name: string, rules: string[] = []): Promise<Receiver> {
    const file = join(dir.dir, `${name}.jsonl`);
    const { proc, port } = await Receiver.spawn(0, file, rules);
    const r = new Receiver(proc, port, file, rules);
    receivers.push(r);
    return r;
  }

  private static spawn(port: number, file: string, rules: string[]): Promise<{ proc: ChildProcess; port: number }> {
    return spawnReceiver(port, file, rules);
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}/${path}`;
  }

  /** Started again on the same port, with the same behaviours and file. */
  async restart(): Promise<void> {
    this.proc = (await Receiver.spawn(this.port, this.file, this.rules)).proc;
  }

  async kill(): Promise<void> {
    const p = this.proc;
    if (p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await exited;
  }

  /** Every request it received so far on paths starting /<name>. */
  deliveries(name: string): Delivery[] {
    if (!existsSync(this.file)) return [];
    return readFileSync(this.file, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Delivery)
      .filter((d) => d.path === `/${name}` || d.path.startsWith(`/${name}/`));
  }

  async waitFor(name: string, n: number, what: string, timeoutMs = 30_000): Promise<Delivery[]> {
    await waitFor(() => this.deliveries(name).length >= n, `${what} (${n} request(s) on /${name})`, timeoutMs, 100);
    return this.deliveries(name);
  }
}

/** The CloudEvent of a delivery, having checked its signature with `secret` (throws if it does not verify). */
function verified(d: Delivery, withSecret: string): CloudEvent {
  return new Webhook(withSecret).verify(d.body, d.headers) as CloudEvent;
}

function verifies(d: Delivery, withSecret: string): boolean {
  try {
    verified(d, withSecret);
    return true;
  } catch {
    return false;
  }
}

interface CloudEvent {
  specversion: string;
  id: string;
  source: string;
  type: string;
  subject: string;
  time: string;
  datacontenttype: string;
  data: Record<string, unknown>;
}

/** One delivery per event id (delivery is at least once: a receiver dedupes by webhook-id). */
function distinct(ds: Delivery[]): Delivery[] {
  const seen = new Map<string, Delivery>();
  for (const d of ds) if (!seen.has(d.headers['webhook-id']!)) seen.set(d.headers['webhook-id']!, d);
  return [...seen.values()];
}

function config(prefix: string, events: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    server: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] },
    upstream: { url: stack.up.url },
    redis: { url: stack.redis.url, prefix, commandTimeoutMs: 2000 },
    plans: { small: { perMinute: 1000, perDay: 10 }, big: { perMinute: 1_000_000, perDay: 100_000_000 } },
    // Refusals past a limit would strike toward a ban: not what these tests are about.
    ban: { enabled: false },
    events: { source: 'urn:tollgate:e2e', thresholds: [80, 100], ...events },
    ...extra,
  };
}

interface Gw {
  proc: CliProcess;
  url: string;
  adminUrl: string;
  file: string;
}

async function serve(name: string, cfg: Record<string, unknown>): Promise<Gw> {
  const file = dir.write(`${name}.yaml`, cfg);
  const { proc, url } = await startServe(file);
  const admin = await proc.waitForLog('admin API listening');
  return { proc, url, adminUrl: String(admin.url), file };
}

async function createKey(file: string, args: string[]): Promise<{ key: string; id: string }> {
  const r = await cliOk(['keys', 'create', ...args, '--json', '--yes', '--quiet', '--config', file]);
  return JSON.parse(r.stdout) as { key: string; id: string };
}

/** `n` proxied requests of a key, one after the other; their statuses. */
async function hit(url: string, key: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await fetch(`${url}/v1/things`, { headers: { authorization: `Bearer ${key}` } });
    await r.arrayBuffer();
    out.push(r.status);
  }
  return out;
}

async function admin(gw: Gw, method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(`${gw.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

async function endpointView(gw: Gw, id: string): Promise<{ id: string; delivery: { disabled: boolean; disabledReason: string | null; queued: number } }> {
  const r = await admin(gw, 'GET', '/events/endpoints');
  expect(r.status).toBe(200);
  const found = (r.body.endpoints as Array<{ id: string; delivery: { disabled: boolean; disabledReason: string | null; queued: number } }>).find(
    (e) => e.id === id,
  );
  if (!found) throw new Error(`no endpoint ${id} in ${JSON.stringify(r.body)}`);
  return found;
}

/** The p99 of `n` proxied requests, `concurrency` at a time, in ms. */
async function p99(url: string, key: string, n = 400, concurrency = 4): Promise<number> {
  const times: number[] = [];
  let started = 0;
  const worker = async (): Promise<void> => {
    while (started < n) {
      started++;
      const t = performance.now();
      const r = await fetch(`${url}/v1/things`, { headers: { authorization: `Bearer ${key}` } });
      await r.arrayBuffer();
      times.push(performance.now() - t);
      if (r.status !== 200) throw new Error(`proxied request answered ${r.status}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  times.sort((a, b) => a - b);
  return times[Math.ceil(0.99 * times.length) - 1]!;
}

beforeAll(() => assertBuilt());

/** A real delivery for the docs' snippets, kept by the first test. */
let sample: { delivery: Delivery; secret: string } | undefined;

describe('a key crossing 80% and 100% of its day', () => {
  it('delivers exactly two signed quota.threshold CloudEvents with the right subject, type and data (filter.keys: to its key’s webhook only)', async () => {
    const rx = await Receiver.start('thresholds');
    const SECRET = secret();
    // The key first, so the webhooks can name it: one filtered to it, one to another key.
    const keysFile = dir.write('thresholds-keys.yaml', config('e2e1:', {}));
    const { key, id } = await createKey(keysFile, ['--plan', 'small']);
    const gw = await serve(
      'thresholds',
      config('e2e1:', {
        webhooks: [
          { id: 'billing', url: rx.url('hooks'), secret: SECRET, types: ['quota.threshold'], filter: { keys: [id] } },
          { id: 'other', url: rx.url('other'), secret: secret(), types: ['quota.threshold'], filter: { keys: ['key_notThisOne00000'] } },
        ],
      }),
    );
    expect(await hit(gw.url, key, 12)).toEqual([...Array<number>(10).fill(200), 429, 429]);

    await rx.waitFor('hooks', 2, 'both thresholds delivered');
    // Anything late (a duplicate) would be in by now.
    await sleep(1500);
    expect(rx.deliveries('other')).toEqual([]);
    const all = rx.deliveries('hooks');
    const events = distinct(all).map((d) => ({ d, ce: verified(d, SECRET) }));
    expect(events.map((e) => e.ce.data.percent).sort()).toEqual([100, 80]);
    for (const { d, ce } of events) {
      expect(d.headers['content-type']).toBe('application/cloudevents+json');
      expect(d.headers['webhook-id']).toBe(ce.id);
      expect(ce).toMatchObject({
        specversion: '1.0',
        source: 'urn:tollgate:e2e',
        type: 'quota.threshold',
        subject: `key:${id}`,
        datacontenttype: 'application/json',
      });
      const percent = ce.data.percent as number;
      expect(ce.id).toMatch(new RegExp(`^quota-threshold:key:${id}:day:\\d{8}T\\d{4}Z:${percent}$`));
      expect(ce.data).toMatchObject({ key: id, plan: 'small', window: 'day', limit: 10, used: percent / 10, threshold: percent / 10 });
    }
    const shown = events.find((e) => e.ce.data.percent === 80)!.d;
    const headers = Object.fromEntries(
      ['content-type', 'webhook-id', 'webhook-timestamp', 'webhook-signature', 'user-agent']
        .filter((h) => shown.headers[h] !== undefined)
        .map((h) => [h, shown.headers[h]]),
    );
    console.log(`one delivery as received (POST ${shown.path}):\n${JSON.stringify(headers, null, 2)}\n${shown.body}`);
    sample = { delivery: shown, secret: SECRET };
    await gw.proc.stop(30_000);
  }, 90_000);
});

describe('the verification snippets of docs/events.md, on that delivery', () => {
  const doc = readFileSync(join(REPO, 'docs/events.md'), 'utf8');
  const section = doc.slice(doc.indexOf('### Verifying a delivery'));
  const snippet = (lang: string): string => {
    const m = new RegExp('```' + lang + '\\n([\\s\\S]*?)```').exec(section);
    if (!m) throw new Error(`no ${lang} block under "### Verifying a delivery" in docs/events.md`);
    return m[1]!;
  };
  const python = spawnSync('python3', ['--version'], { encoding: 'utf8' });
  const hasPython = python.status === 0;

  it("Node: verify() gives the event with the webhook's secret and throws with another", () => {
    expect(sample, 'the first test keeps a delivery').toBeDefined();
    const run = (s: string) =>
      spawnSync(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `${snippet('js')}\nconst d = JSON.parse(process.env.DELIVERY);\nconsole.log(JSON.stringify(verify(d.secret, d.body, d.headers)));`,
        ],
        { cwd: REPO, encoding: 'utf8', env: { ...process.env, DELIVERY: JSON.stringify({ ...sample!.delivery, secret: s }) } },
      );
    const ok = run(sample!.secret);
    expect(ok.status, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout)).toEqual(JSON.parse(sample!.delivery.body));
    const wrong = run(secret());
    expect(wrong.status).not.toBe(0);
    expect(wrong.stderr).toMatch(/No matching signature found/);
  });

  it.skipIf(!hasPython)(
    `Python (python3 ${hasPython ? python.stdout.trim() : 'is not on this machine: skipped'}): verify() is True with the webhook's secret, False with another`,
    () => {
      expect(sample, 'the first test keeps a delivery').toBeDefined();
      const run = (s: string) =>
        spawnSync(
          'python3',
          ['-c', `${snippet('python')}\nimport json, os\nd = json.loads(os.environ["DELIVERY"])\nprint(verify(d["secret"], d["headers"], d["body"].encode()))`],
          { encoding: 'utf8', env: { ...process.env, DELIVERY: JSON.stringify({ ...sample!.delivery, secret: s }) } },
        );
      const ok = run(sample!.secret);
      expect(ok.status, ok.stderr).toBe(0);
      expect(ok.stdout.trim()).toBe('True');
      const wrong = run(secret());
      expect(wrong.status, wrong.stderr).toBe(0);
      expect(wrong.stdout.trim()).toBe('False');
    },
  );
});

describe('the receiver down and every gateway restarted', () => {
  it('the event made meanwhile is delivered once both are back (at least once), signed', async () => {
    const rx = await Receiver.start('restart');
    await rx.kill();
    const SECRET = secret();
    const prefix = 'e2e2:';
    const cfg = config(prefix, { webhooks: [{ id: 'restart', url: rx.url('hooks'), secret: SECRET, types: ['quota.threshold'] }] });
    const [a, b] = await Promise.all([serve('restart-a', cfg), serve('restart-b', cfg)]);
    const { key, id } = await createKey(a.file, ['--plan', 'small']);
    // 8 of 10, half on each: the 80% crossing.
    for (let i = 0; i < 4; i++) {
      expect(await hit(a.url, key, 1)).toEqual([200]);
      expect(await hit(b.url, key, 1)).toEqual([200]);
    }
    const ks = new Keyspace(prefix);
    await waitFor(
      async () => (await stack.client.hget(ks.endpointState('restart'), 'lastError')) !== null,
      'a failed attempt at the dead receiver',
      30_000,
      100,
    );
    const [eventId] = await stack.client.hkeys(ks.endpointEvents('restart'));
    expect(eventId).toMatch(new RegExp(`^quota-threshold:key:${id}:day:\\d{8}T\\d{4}Z:80$`));

    const exits = await Promise.all([a.proc.stop(30_000), b.proc.stop(30_000)]);
    expect(exits.map((e) => e.code)).toEqual([0, 0]);
    expect(rx.deliveries('hooks')).toEqual([]);
    const [a2, b2] = await Promise.all([serve('restart-a', cfg), serve('restart-b', cfg)]);
    await rx.restart();
    // The schedule's next retries: ~5 s, ~15 s, ~30 s after the attempts before (±20%).
    const got = await rx.waitFor('hooks', 1, 'the event delivered after the restarts', 75_000);
    const ce = verified(got[0]!, SECRET);
    expect(ce).toMatchObject({ id: eventId, type: 'quota.threshold', subject: `key:${id}`, data: { percent: 80 } });
    expect(distinct(got)).toHaveLength(1);
    await Promise.all([a2.proc.stop(30_000), b2.proc.stop(30_000)]);
  }, 180_000);
});

describe('rotation, 410 and 302 on one gateway', () => {
  const NEW = secret();
  const OLD = secret();
  let rx: Receiver;
  let target: TestUpstream;
  let gw: Gw;
  let key: string;
  const webhooks = (rotSecrets: string[]) => [
    { id: 'rot', url: rx.url('rot'), secrets: rotSecrets, types: ['quota.threshold'] },
    { id: 'gone', url: rx.url('gone'), secret: secret(), types: ['quota.threshold'] },
    { id: 'redir', url: rx.url('redir'), secret: secret(), types: ['quota.threshold'] },
  ];

  beforeAll(async () => {
    target = await TestUpstream.start();
    rx = await Receiver.start('rotation', ['gone=gone', `redir=redirect:${target.url}/stolen`]);
    gw = await serve('rotation', config('e2e3:', { webhooks: webhooks([NEW, OLD]) }));
    key = (await createKey(gw.file, ['--plan', 'small'])).key;
    // The 80% crossing.
    expect(await hit(gw.url, key, 8)).toEqual(Array<number>(8).fill(200));
  }, 90_000);
  afterAll(async () => {
    await gw?.proc.stop(30_000);
    await target?.close();
  });

  it('secrets [new, old]: each delivery verifies with the new secret alone and with the old alone', async () => {
    const got = await rx.waitFor('rot', 1, 'the 80% event at the rotating endpoint');
    for (const d of got) {
      expect(d.headers['webhook-signature']!.split(' ')).toHaveLength(2);
      expect(verified(d, NEW).data.percent).toBe(80);
      expect(verified(d, OLD).data.percent).toBe(80);
    }
  });

  it('410: the endpoint is disabled (GET /events/endpoints says so)', async () => {
    await rx.waitFor('gone', 1, 'the attempt answered 410');
    await waitFor(async () => (await endpointView(gw, 'gone')).delivery.disabled, 'the endpoint disabled', 15_000, 100);
    expect((await endpointView(gw, 'gone')).delivery.disabledReason).toMatch(/410/);
  });

  it('302: never followed (the other server sees nothing), retried (the attempts grow)', async () => {
    await rx.waitFor('redir', 2, 'a retry after the 302', 30_000);
    expect(target.seen).toEqual([]);
  });

  it('restarted with secrets [new]: a new delivery verifies with new, not old; the disabled endpoint is not attempted', async () => {
    await gw.proc.stop(30_000);
    gw = await serve('rotation', config('e2e3:', { webhooks: webhooks([NEW]) }));
    // The 100% crossing.
    expect(await hit(gw.url, key, 2)).toEqual([200, 200]);
    const got = await waitFor(
      () => rx.deliveries('rot').some((d) => d.headers['webhook-id']!.endsWith(':100')),
      'the 100% event at the rotating endpoint',
      30_000,
      100,
    ).then(() => rx.deliveries('rot').filter((d) => d.headers['webhook-id']!.endsWith(':100')));
    for (const d of got) {
      expect(d.headers['webhook-signature']!.split(' ')).toHaveLength(1);
      expect(verified(d, NEW).data.percent).toBe(100);
      expect(verifies(d, OLD)).toBe(false);
    }
    // The same event went to the disabled endpoint's queue, and stays there: one attempt in all, the 410.
    await sleep(3000);
    expect(rx.deliveries('gone')).toHaveLength(1);
    const view = await endpointView(gw, 'gone');
    expect(view.delivery.disabled).toBe(true);
    expect(view.delivery.queued).toBeGreaterThanOrEqual(2);
    expect(target.seen).toEqual([]);
  }, 90_000);
});

describe('a receiver that hangs', () => {
  it('64 deliveries hanging on it leave the gateway’s p99 as it was', async () => {
    // The outbound client holds at most 16 connections per origin: four hanging receiver processes, four endpoints on
    // each, 4 attempts in flight per endpoint: 64 connections held open, each until its attempt's 15 s are up.
    const rxs = await Promise.all([0, 1, 2, 3].map((i) => Receiver.start(`hang-${i}`, ['hang=hang'])));
    const webhooks = Array.from({ length: 16 }, (_, i) => ({
      id: `hang-${i}`,
      url: rxs[i % 4]!.url(`hang/${i}`),
      secret: secret(),
      types: ['quota.threshold'],
    }));
    const hanging = () => rxs.flatMap((r) => r.deliveries('hang'));
    const gw = await serve('hang', config('e2e4:', { webhooks }));
    const load = await createKey(gw.file, ['--plan', 'big']);
    const crossing = await Promise.all([0, 1].map(() => createKey(gw.file, ['--plan', 'small'])));
    await p99(gw.url, load.key, 100); // warm-up
    const before = await p99(gw.url, load.key);
    expect(hanging()).toEqual([]);
    // Two keys crossing 80% and 100%: four events, each to 16 endpoints.
    for (const k of crossing) expect(await hit(gw.url, k.key, 10)).toEqual(Array<number>(10).fill(200));
    await waitFor(() => hanging().length >= 50, 'deliveries hanging', 15_000, 100);
    const hangingFrom = Math.min(...hanging().map((d) => d.at));
    const during = await p99(gw.url, load.key);
    const held = hanging().length;
    // Every one of them still hanging: an attempt gives up after 15 s.
    expect(Date.now() - hangingFrom).toBeLessThan(15_000);
    console.log(`p99 of 400 proxied requests: before ${before.toFixed(1)} ms, during ${during.toFixed(1)} ms with ${held} deliveries hanging`);
    expect(held).toBeGreaterThanOrEqual(50);
    // What this guards against is a hanging receiver reaching the request path (a shared pool, a wait on a delivery):
    // that costs requests seconds. The margin is for the other test files sharing these 2 cores (a p99 of 400
    // requests moved by 10-30 ms between two runs of nothing but this file).
    expect(during).toBeLessThanOrEqual(Math.max(2 * before, before + 40));
    await Promise.all(rxs.map((r) => r.kill()));
    await gw.proc.stop(30_000);
  }, 120_000);
});

describe('an endpoint a consumer registers on the admin API', () => {
  it('at 127.0.0.1: refused without events.allowTargets, accepted with 127.0.0.0/8; then gets its consumer’s pooled events only', async () => {
    const rx = await Receiver.start('registered');
    const prefix = 'e2e5:';
    let gw = await serve('registered', config(prefix, {}, { portal: { webhooks: true } }));
    for (const c of ['acme', 'globex'])
      await cliOk(['consumers', 'create', '--id', c, '--name', c, '--plan', 'small', '--yes', '--quiet', '--config', gw.file]);
    const refused = await admin(gw, 'POST', '/consumers/acme/webhooks', { url: rx.url('reg') });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toMatch(/webhook_url_refused/);

    await gw.proc.stop(30_000);
    gw = await serve('registered', config(prefix, { allowTargets: ['127.0.0.0/8'] }, { portal: { webhooks: true } }));
    const created = await admin(gw, 'POST', '/consumers/acme/webhooks', { url: rx.url('reg'), types: ['quota.threshold'] });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const regSecret = created.body.secret as string;
    // No wait: the registration's change message makes the events thread read the registry again at once.
    const acmeKey = await createKey(gw.file, ['--plan', 'small', '--consumer', 'acme']);
    const globexKey = await createKey(gw.file, ['--plan', 'small', '--consumer', 'globex']);
    // globex's pool first: its events reach the outbox before acme's, so by acme's arrival they would have too.
    expect(await hit(gw.url, globexKey.key, 8)).toEqual(Array<number>(8).fill(200));
    expect(await hit(gw.url, acmeKey.key, 8)).toEqual(Array<number>(8).fill(200));
    const got = await rx.waitFor('reg', 1, 'acme’s 80% event at its registered endpoint');
    await sleep(2000);
    const events = distinct(rx.deliveries('reg')).map((d) => verified(d, regSecret));
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'quota.threshold', subject: 'consumer:acme', data: { consumer: 'acme', percent: 80, limit: 10 } });
    expect(got[0]!.headers['webhook-id']).toMatch(/^quota-threshold:consumer:acme:day:/);
    await gw.proc.stop(30_000);
  }, 150_000);

  it('its own thresholds: a 50% asked for is crossed and sent to it alone; a configured webhook keeps events.thresholds', async () => {
    const rx = await Receiver.start('own-thresholds');
    const CFG_SECRET = secret();
    const webhooks = [{ id: 'ops', url: rx.url('ops'), secret: CFG_SECRET, types: ['quota.threshold'] }];
    const gw = await serve('own-thresholds', config('e2e7:', { webhooks, allowTargets: ['127.0.0.0/8'] }, { portal: { webhooks: true } }));
    await cliOk(['consumers', 'create', '--id', 'acme', '--name', 'acme', '--plan', 'small', '--yes', '--quiet', '--config', gw.file]);
    const created = await admin(gw, 'POST', '/consumers/acme/webhooks', { url: rx.url('own'), types: ['quota.threshold'], thresholds: [50] });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const ownSecret = created.body.secret as string;
    const acmeKey = await createKey(gw.file, ['--plan', 'small', '--consumer', 'acme']);
    // perDay 10: the 5th request crosses 50%, the 8th 80%, the 10th 100%.
    expect(await hit(gw.url, acmeKey.key, 10)).toEqual(Array<number>(10).fill(200));
    await rx.waitFor('own', 1, 'the 50% event at the endpoint that asked for it');
    await rx.waitFor('ops', 2, 'the 80% and 100% events at the configured webhook');
    await sleep(2000);
    const own = distinct(rx.deliveries('own')).map((d) => verified(d, ownSecret));
    expect(own.map((e) => (e.data as { percent: number }).percent)).toEqual([50]);
    const ops = distinct(rx.deliveries('ops')).map((d) => verified(d, CFG_SECRET));
    expect(ops.map((e) => (e.data as { percent: number }).percent).sort((a, b) => a - b)).toEqual([80, 100]);
    await gw.proc.stop(30_000);
  }, 90_000);
});

describe('key.expiring', () => {
  it('a key expiring in 3 days: exactly one event delivered with two gateways running the pass', async () => {
    const rx = await Receiver.start('expiring');
    const SECRET = secret();
    const cfg = config('e2e6:', { webhooks: [{ id: 'expiring', url: rx.url('hooks'), secret: SECRET, types: ['key.expiring'] }] });
    const file = dir.write('expiring-keys.yaml', cfg);
    const expiresAt = new Date(Date.now() + 3 * 86_400_000);
    expiresAt.setUTCMilliseconds(0);
    const { id } = await createKey(file, ['--plan', 'small', '--expires', expiresAt.toISOString()]);
    const [a, b] = await Promise.all([serve('expiring-a', cfg), serve('expiring-b', cfg)]);
    // Each runs the pass 5 s after start.
    const got = await rx.waitFor('hooks', 1, 'the key.expiring event', 30_000);
    // Both passes ran at about the same time; a second delivery would be in by now.
    await sleep(4000);
    const all = rx.deliveries('hooks');
    expect(all).toHaveLength(1);
    const ce = verified(got[0]!, SECRET);
    expect(ce).toMatchObject({
      id: `key-expiring:${id}:${expiresAt.getTime()}`,
      type: 'key.expiring',
      subject: `key:${id}`,
      data: { key: id, plan: 'small', expiresAt: expiresAt.toISOString() },
    });
    await Promise.all([a.proc.stop(30_000), b.proc.stop(30_000)]);
  }, 90_000);
});
