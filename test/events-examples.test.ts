// The example bodies of docs/events.md ("### Example bodies") against what a gateway sends: a built `tollgate serve` on a
// redis-server of this file's own, one configured webhook taking every type, and a receiver on loopback. Each of the
// six event types is made the way an operator's traffic makes it (a key at 80% of its day and past a shadow limit, a
// ban, a suspension on the admin API, a deprecated route called, a key 3 days from its expiry); each body received is
// printed as is, then held against the documented example of its type: the same CloudEvents attributes in the same
// order, the same keys in `data`, and an id and subject of the form the table above it gives. So an example that no
// longer matches what is sent fails here.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { validateConfig } from '../src/config/load.js';
import { EVENT_TYPES } from '../src/events/types.js';
import { assertBuilt, cliOk, CliProcess, REPO, startServe, tempDir } from './helpers/cli.js';
import { useStack } from './helpers/stack.js';
import { waitFor } from './helpers/wait.js';

const TOKEN = generateAdminToken();
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const stack = useStack({ redis: true });
const dir = tempDir();

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}
const received: Received[] = [];
let receiver: Server;
let proc: CliProcess | undefined;

/** The id and subject of each type, as the table of docs/events.md gives them (key ids are key_ and 16 characters). */
const KEY = 'key_[A-Za-z0-9]{16}';
const SHAPES: Record<string, { id: RegExp; subject: RegExp }> = {
  'quota.threshold': { id: new RegExp(`^quota-threshold:(key:${KEY}|consumer:[\\w-]+):day:\\d{8}T\\d{4}Z:\\d+$`), subject: /^(key|consumer):/ },
  'quota.shadow_threshold': { id: new RegExp(`^quota-shadow-threshold:(key:${KEY}|consumer:[\\w-]+):day:shadow:\\d{8}T\\d{4}Z$`), subject: /^(key|consumer):/ },
  'key.banned': { id: new RegExp(`^key-banned:${KEY}:\\d+:\\d{10}$`), subject: /^(key|consumer):/ },
  'consumer.suspended': { id: /^consumer-suspended:[\w-]+:\d{13}$/, subject: /^consumer:[\w-]+$/ },
  'deprecated.called': { id: /^deprecated-called:(key|consumer):[\w-]+:[^.]+:\d{4}-\d{2}-\d{2}$/, subject: /^(key|consumer):/ },
  'key.expiring': { id: new RegExp(`^key-expiring:${KEY}:\\d{13}$`), subject: /^(key|consumer):/ },
};

beforeAll(async () => {
  assertBuilt();
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
});

afterAll(async () => {
  await proc?.stop(30_000);
  await CliProcess.killAll();
  await new Promise<void>((resolve) => receiver?.close(() => resolve()));
  dir.remove();
});

/** The body received of each type (the first, if one came twice). */
const sent = new Map<string, Received>();

describe('one event of each type, from a gateway to a receiver', () => {
  it('is sent, signed, for each of the six types', async () => {
    const port = (receiver.address() as AddressInfo).port;
    const file = dir.write('examples.yaml', {
      server: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] },
      upstream: { url: stack.up.url },
      redis: { url: stack.redis.url, prefix: 'examples:', commandTimeoutMs: 2000 },
      plans: {
        small: { perMinute: 1000, perDay: 10, shadow: { perDay: 5 } },
        tiny: { perMinute: 1, perDay: 10_000 },
        pro: { perMinute: 1000, perDay: 100_000 },
      },
      ban: { threshold: 2, windowSeconds: 60, durationsSeconds: [300], resetAfterSeconds: 3600 },
      routes: [{ method: 'GET', path: '/v1/legacy-things', deprecation: '2026-06-01T00:00:00Z', sunset: '2027-06-01T00:00:00Z', successor: '/v1/things' }],
      events: { source: 'urn:tollgate:prod', thresholds: [80, 100], webhooks: [{ id: 'all', url: `http://127.0.0.1:${port}/tollgate`, secret: SECRET }] },
    });
    const cli = async (...args: string[]): Promise<string> => (await cliOk([...args, '--yes', '--quiet', '--config', file])).stdout;
    const key = async (...args: string[]): Promise<{ key: string; id: string }> =>
      JSON.parse(await cli('keys', 'create', ...args, '--json')) as { key: string; id: string };
    // Looked for 5 s after the gateway starts: made before it.
    const expires = new Date(Date.now() + 3 * 86_400_000);
    expires.setUTCMilliseconds(0);
    await key('--plan', 'pro', '--name', 'nightly-sync', '--expires', expires.toISOString());
    const started = await startServe(file);
    proc = started.proc;
    const adminUrl = String((await proc.waitForLog('admin API listening')).url);
    const call = async (k: string, path: string): Promise<number> => {
      const r = await fetch(`${started.url}${path}`, { headers: { authorization: `Bearer ${k}` } });
      await r.arrayBuffer();
      return r.status;
    };

    // quota.threshold (80% of 10) and quota.shadow_threshold (the shadow perDay of 5): 8 requests of a key.
    const small = await key('--plan', 'small');
    for (let i = 0; i < 8; i++) expect(await call(small.key, '/v1/things')).toBe(200);
    // key.banned: a limit of 1 a minute, refused twice.
    const tiny = await key('--plan', 'tiny');
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push(await call(tiny.key, '/v1/things'));
    expect(statuses).toEqual([200, 429, 429]);
    // deprecated.called by a key of a consumer, then consumer.suspended for that consumer.
    await cli('consumers', 'create', '--id', 'acme', '--name', 'Acme Inc', '--plan', 'pro');
    const acme = await key('--plan', 'pro', '--consumer', 'acme');
    expect(await call(acme.key, '/v1/legacy-things')).toBe(200);
    const suspended = await fetch(`${adminUrl}/consumers/acme/suspend`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(suspended.status, await suspended.text()).toBe(200);

    await waitFor(
      () => {
        for (const r of received) {
          const type = (JSON.parse(r.body) as { type: string }).type;
          if (!sent.has(type)) sent.set(type, r);
        }
        return EVENT_TYPES.every((t) => sent.has(t));
      },
      'one event of each type',
      30_000,
      100,
    );
    for (const type of EVENT_TYPES) {
      const r = sent.get(type)!;
      expect(new Webhook(SECRET).verify(r.body, r.headers as Record<string, string>)).toMatchObject({ type });
      console.log(`${type} (webhook-id ${String(r.headers['webhook-id'])}):\n${r.body}`);
    }
  }, 120_000);
});

describe('the example bodies of docs/events.md', () => {
  const doc = readFileSync(join(REPO, 'docs/events.md'), 'utf8');
  const start = doc.indexOf('### Example bodies');
  const section = doc.slice(start, doc.indexOf('\n## ', start));

  /** The example of a type: the first json block after its "#### `type`" heading. */
  const example = (type: string): Record<string, unknown> => {
    const m = new RegExp('#### `' + type.replace('.', '\\.') + '`[\\s\\S]*?```json\\n([\\s\\S]*?)\\n```').exec(section);
    if (!m) throw new Error(`no example of ${type} under "### Example bodies" in docs/events.md`);
    expect(m[1]!.split('\n'), `${type}: one line, as sent`).toHaveLength(1);
    return JSON.parse(m[1]!) as Record<string, unknown>;
  };

  it.each([...EVENT_TYPES])('%s: the same attributes and data keys as sent, an id and subject of its form', (type) => {
    expect(start, 'a section "### Example bodies"').toBeGreaterThan(0);
    const doc = example(type);
    const r = sent.get(type);
    expect(r, 'the test above received one').toBeDefined();
    const real = JSON.parse(r!.body) as Record<string, unknown>;
    expect(Object.keys(doc)).toEqual(Object.keys(real));
    expect(Object.keys(doc.data as object)).toEqual(Object.keys(real.data as object));
    expect(doc).toMatchObject({ specversion: '1.0', type, source: real.source, datacontenttype: 'application/json' });
    for (const ce of [doc, real]) {
      expect(ce.id).toMatch(SHAPES[type]!.id);
      expect(ce.subject).toMatch(SHAPES[type]!.subject);
    }
  });
});

describe('the configs of "## Wiring the exporter" in docs/events.md', () => {
  const doc = readFileSync(join(REPO, 'docs/events.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Wiring the exporter'));
  const blocks = [...section.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!);

  it('one for each of OpenMeter, Lago and Stripe, each valid in a config (beside upstream and redis)', () => {
    const formats = blocks.map((text) => {
      const raw = parse(text) as Record<string, unknown>;
      const result = validateConfig({ upstream: { url: 'http://127.0.0.1:8080' }, redis: { url: 'redis://127.0.0.1:6379' }, ...raw });
      expect(result.ok, JSON.stringify(result)).toBe(true);
      return result.ok ? result.config.events?.metering?.format : undefined;
    });
    expect(formats).toEqual(['openmeter', 'lago', 'stripe']);
  });
});
