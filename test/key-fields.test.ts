// One rule per key field (src/config/key-fields.ts): the admin API (POST /keys), the CLI (`keys create`, run in
// process), an import (POST /keys/import, the path `keys import` takes too) and a static key in the config refuse the
// same bad value with the same message. A copy of a rule that drifts in any of the four fails here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { composeGateway } from '../src/compose.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { validateConfig } from '../src/config/load.js';
import { staticKeyMap } from '../src/keys/verifier.js';
import { runProgram } from '../src/program.js';
import { Metrics } from '../src/observability/metrics.js';
import { testConfig, silentLogger } from './helpers/gateway.js';
import { TestUpstream } from './helpers/upstream.js';

const TOKEN = generateAdminToken();
const sha = () => randomBytes(32).toString('hex');
const tooMuchMetadata = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`m${i}`, 'v']));

/** Field, bad value, the CLI option that carries it (as typed), and the message every way in gives. */
const CASES: Array<{ field: string; value: unknown; option: string; message: string }> = [
  { field: 'name', value: 'n'.repeat(201), option: `--name=${'n'.repeat(201)}`, message: 'expected a name of 1-200 characters' },
  { field: 'name', value: '', option: '--name=', message: 'expected a name of 1-200 characters' },
  { field: 'perMinute', value: -5, option: '--per-minute=-5', message: 'expected a whole number from 1 to 1000000000000' },
  { field: 'perDay', value: 1.5, option: '--per-day=1.5', message: 'expected a whole number from 1 to 1000000000000' },
  { field: 'perDay', value: 10 ** 13, option: `--per-day=${10 ** 13}`, message: 'expected a whole number from 1 to 1000000000000' },
  { field: 'metadata', value: tooMuchMetadata, option: `--metadata=${JSON.stringify(tooMuchMetadata)}`, message: 'at most 16 metadata entries' },
  {
    field: 'expiresAt',
    value: '2027-01-01',
    option: '--expires=2027-01-01',
    message: 'expected an ISO-8601 date-time with its offset, e.g. 2027-01-01T00:00:00Z',
  },
];

let up: TestUpstream;
let gw: RunningGateway;

beforeAll(async () => {
  up = await TestUpstream.start();
  const config = testConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url },
    admin: { port: 0, tokens: [{ id: 'portal', sha256: hashAdminToken(TOKEN) }] },
    plans: { free: { perMinute: 10, perDay: 100 } },
  });
  const gateway = await composeGateway({ config, logger: silentLogger, metrics: new Metrics(), env: {}, upstreamCheckTimeoutMs: 500 });
  gw = await startGateway({ gateway, logger: silentLogger });
});

afterAll(async () => {
  await gw?.shutdown();
  await up?.close();
});

async function post(path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${gw.adminUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function cli(...argv: string[]): Promise<{ code: number; err: string }> {
  let err = '';
  const code = await runProgram(argv, { out: () => {}, err: (s) => void (err += s) });
  return { code, err };
}

describe('a bad key field: one message from the admin API, the CLI, an import and a static key', () => {
  it.each(CASES)('$field = $value', async ({ field, value, option, message }) => {
    const created = await post('/keys', { plan: 'free', [field]: value });
    expect(created.status).toBe(400);
    expect(created.body.problems).toEqual([{ path: `body.${field}`, message }]);

    // Refused as a usage error before Redis is looked for (there is none here).
    const flag = option.slice(0, option.indexOf('='));
    const fromCli = await cli('keys', 'create', '--plan', 'free', option);
    expect(fromCli.code).toBe(2);
    expect(fromCli.err).toContain(`${flag}: ${message}`);

    const imported = await post('/keys/import', [{ plan: 'free', sha256: sha(), [field]: value }]);
    expect(imported.status).toBe(422);
    expect(imported.body.refused).toEqual([{ line: 1, reason: `${field}: ${message}` }]);

    const configured = validateConfig({ plans: { free: { perMinute: 10, perDay: 100 } }, keys: [{ id: 'k1', plan: 'free', sha256: sha(), [field]: value }] });
    expect(configured.ok).toBe(false);
    if (!configured.ok) expect(configured.errors).toEqual([expect.stringMatching(new RegExp(`^keys\\[0\\]\\.${field}: ${escape(message)}, got `))]);
  });

  it('an id: one message from an import and a static key (the admin API and the CLI issue ids themselves)', async () => {
    const message = 'expected 1-64 characters of A-Z a-z 0-9 _ -';
    for (const id of ['has space', 'dotted.id', 'x'.repeat(65)]) {
      const imported = await post('/keys/import', [{ id, plan: 'free', sha256: sha() }]);
      expect(imported.body.refused).toEqual([{ line: 1, reason: `id: ${message}` }]);
      const configured = validateConfig({ keys: [{ id, plan: 'free', sha256: sha() }] });
      expect(configured.ok ? [] : configured.errors).toEqual([expect.stringMatching(new RegExp(`^keys\\[0\\]\\.id: ${escape(message)}, got `))]);
    }
  });

  it("a CSV import's metadata.<name> columns take the metadata name rule", async () => {
    const csv = async (column: string) => {
      const res = await fetch(`${gw.adminUrl}/keys/import?dryRun=true`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'text/csv' },
        body: `plan,sha256,${column}\r\nfree,${sha()},v\r\n`,
      });
      return { status: res.status, body: (await res.json()) as { message?: string } };
    };
    expect((await csv('metadata.team_1.x')).status).toBe(200);
    for (const bad of ['metadata.bad name', `metadata.${'m'.repeat(65)}`, 'metadata.']) {
      const r = await csv(bad);
      expect(r.status).toBe(400);
      expect(r.body.message).toMatch(/^CSV header: unknown column/);
    }
  });

  it('a good value of each field passes all four, and a static key keeps its metadata sorted', async () => {
    const good = { name: 'Acme', perMinute: 5, perDay: 1_000_000_000_000, metadata: { z: '1', a: '2' }, expiresAt: '2031-01-01T00:00:00+02:00' };
    expect((await post('/keys', { plan: 'free', ...good })).status).toBe(201);
    expect((await post('/keys/import', [{ plan: 'free', sha256: sha(), ...good }])).status).toBe(200);
    const configured = validateConfig({ keys: [{ id: 'k1', plan: 'free', sha256: sha(), ...good }] });
    expect(configured.ok, configured.ok ? '' : configured.errors.join('\n')).toBe(true);
    if (!configured.ok) return;
    const [stored] = staticKeyMap(configured.config.keys, '2026-11-01T00:00:00.000Z').values();
    expect(Object.keys(stored!.metadata!)).toEqual(['a', 'z']);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

describe("a key's own monthly limit and when its own limits end: refused the same way by the admin API and the CLI", () => {
  const HOSTILE: Array<{ field: string; value: unknown; option: string; message: string }> = [
    { field: 'perMonth', value: 0, option: '--per-month=0', message: 'expected a whole number from 1 to 1000000000000' },
    { field: 'perMonth', value: 10 ** 13, option: `--per-month=${10 ** 13}`, message: 'expected a whole number from 1 to 1000000000000' },
    { field: 'perMonth', value: '10', option: '--per-month=1e3', message: 'expected a whole number from 1 to 1000000000000' },
    {
      field: 'limitsExpiresAt',
      value: 'next week',
      option: '--limits-expires-at=next week',
      message: 'expected an ISO-8601 date-time with its offset, e.g. 2027-01-01T00:00:00Z',
    },
    { field: 'limitsReason', value: '', option: '--limits-reason=', message: 'expected a reason of 1-200 characters' },
    { field: 'limitsReason', value: 'r'.repeat(201), option: `--limits-reason=${'r'.repeat(201)}`, message: 'expected a reason of 1-200 characters' },
  ];

  async function patch(id: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await fetch(`${gw.adminUrl}/keys/${id}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  async function keyRecord(id: string): Promise<Record<string, unknown>> {
    const res = await fetch(`${gw.adminUrl}/keys/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    // The record only: its live windows' resets move with the clock.
    const { windows: _w, ...record } = (await res.json()) as Record<string, unknown>;
    return record;
  }

  async function keyCount(): Promise<number> {
    const res = await fetch(`${gw.adminUrl}/keys?limit=1000`, { headers: { authorization: `Bearer ${TOKEN}` } });
    return ((await res.json()) as { keys: unknown[] }).keys.length;
  }

  it.each(HOSTILE)(
    '$field = $value: 400 on POST and PATCH, exit 2 in one line from keys create and update, nothing stored',
    async ({ field, value, option, message }) => {
      const before = await keyCount();
      const created = await post('/keys', { plan: 'free', [field]: value });
      expect([created.status, created.body.problems]).toEqual([400, [{ path: `body.${field}`, message }]]);
      expect(await keyCount()).toBe(before);

      const good = await post('/keys', { plan: 'free', perMonth: 500, limitsExpiresAt: '2031-01-01T00:00:00Z', limitsReason: 'launch' });
      expect(good.status).toBe(201);
      const id = good.body.id as string;
      const stored = await keyRecord(id);
      const patched = await patch(id, { [field]: value });
      expect([patched.status, patched.body.problems]).toEqual([400, [{ path: `body.${field}`, message }]]);
      expect(await keyRecord(id)).toEqual(stored);

      const flag = option.slice(0, option.indexOf('='));
      for (const argv of [
        ['keys', 'create', '--plan', 'free', option],
        ['keys', 'update', id, option],
      ]) {
        const fromCli = await cli(...argv);
        expect(fromCli.code).toBe(2);
        expect(fromCli.err.trimEnd().split('\n')).toHaveLength(1);
        expect(fromCli.err).toContain(`${flag}: ${message}`);
      }
    },
  );

  it('good values are stored as given; PATCH null removes each', async () => {
    const created = await post('/keys', { plan: 'free', perMonth: 9000, limitsExpiresAt: '2031-01-01T00:00:00+02:00', limitsReason: 'launch week' });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    expect(await keyRecord(id)).toMatchObject({ perMonth: 9000, limitsExpiresAt: '2031-01-01T00:00:00+02:00', limitsReason: 'launch week' });
    expect((await patch(id, { perMonth: null, limitsExpiresAt: null, limitsReason: null })).status).toBe(200);
    const after = await keyRecord(id);
    expect([after.perMonth, after.limitsExpiresAt, after.limitsReason]).toEqual([undefined, undefined, undefined]);
  });
});
