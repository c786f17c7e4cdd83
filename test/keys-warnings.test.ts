// Unusual keys are warned about, never refused: an override (perMinute, perDay) below a configured route's cost (that
// route refuses every request of the key), and an imported plaintext no Bearer header can carry while bearer is among
// auth.sources. Checked on the admin API (POST /keys, PATCH /keys/{id}, POST /keys/import: `warnings`, against
// docs/admin.openapi.yaml), the built CLI (stderr) and per line of an import, on a private redis-server. Also the admin
// API's answer while another instance holds the import lock (409 import_in_progress).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { composeGateway } from '../src/compose.js';
import { startGateway } from '../src/server/gateway-server.js';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { Metrics } from '../src/observability/metrics.js';
import { assertBuilt, runCli, tempDir, withoutAudit, type CliResult } from './helpers/cli.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { CheckedApi } from './helpers/openapi.js';
import { useStack } from './helpers/stack.js';

const PREFIX = 'warn:';
const TOKEN = generateAdminToken();
let dir: ReturnType<typeof tempDir>;
let cliConfig: string;

const COST_MINUTE = 'perMinute 6 is below the cost of route bulk (cost 8): this key can never call it (403 cost_exceeds_limit)';
const COST_DAY_BOTH = 'perDay 4 is below the cost of routes POST /v1/reports (cost 5), bulk (cost 8): this key can never call them (403 cost_exceeds_limit)';
const NOT_BEARER =
  'key: holds characters a Bearer token cannot carry (token68: A-Z a-z 0-9 - . _ ~ + / then "=" at the end only): it can never be sent as "Authorization: Bearer"; send it through another of auth.sources';

const base = () => ({
  upstream: { url: s.up.url },
  redis: { url: s.redis.url, prefix: PREFIX },
  auth: { foreignKeys: true, sources: ['bearer', 'header:X-API-Key'] },
  plans: { free: { perMinute: 10, perDay: 100 } },
  routes: [
    { method: 'POST', path: '/v1/reports', cost: 5 },
    { path: '/v1/bulk/*', name: 'bulk', cost: 8 },
    // A public route never counts a key: its cost warns about nothing.
    { path: '/v1/public', auth: 'none', cost: 9 },
  ],
});

const api = new CheckedApi({ target: () => s.gw.adminUrl!, token: TOKEN });
const admin = (method: string, path: string, body: string) => api.call(method, path, { body });

const cli = (...args: string[]): Promise<CliResult> => runCli(['keys', ...args, '--config', cliConfig]);
const warningsOf = (r: CliResult) =>
  withoutAudit(r.stderr)
    .split('\n')
    .filter((l) => l.includes('arning'));

beforeAll(() => assertBuilt());

const s = useStack({
  redis: true,
  client: true,
  gateway: async ({ redis }) => {
    const config = testConfig({
      ...base(),
      server: { host: '127.0.0.1', port: 0 },
      redis: { url: redis.url, prefix: PREFIX, commandTimeoutMs: 1000 },
      admin: { port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] },
    });
    const gateway = await composeGateway({ config, logger: silentLogger, metrics: new Metrics(), env: {}, upstreamCheckTimeoutMs: 500 });
    return startGateway({ gateway, logger: silentLogger });
  },
});

beforeAll(() => {
  dir = tempDir();
  cliConfig = dir.write('gateway.yaml', base());
});

afterAll(() => dir?.remove());

describe('the admin API warns, and still does what it was asked', () => {
  it('POST /keys and PATCH /keys/{id}: an override below a route cost is in warnings, naming the window and the routes', async () => {
    const created = await admin('POST', '/keys', JSON.stringify({ plan: 'free', perMinute: 6 }));
    expect(created.status).toBe(201);
    expect(created.body.warnings).toEqual([COST_MINUTE]);
    expect(created.body.perMinute).toBe(6);
    const id = String(created.body.id);
    const patched = await admin('PATCH', `/keys/${id}`, JSON.stringify({ perMinute: null, perDay: 4 }));
    expect(patched.status).toBe(200);
    expect(patched.body.warnings).toEqual([COST_DAY_BOTH]);
    const fine = await admin('PATCH', `/keys/${id}`, JSON.stringify({ perDay: 50 }));
    expect(fine.body.warnings).toEqual([]);
  }, 60_000);

  it('POST /keys/import: each warning with its line; the records are imported', async () => {
    const odd = `legacy@${randomBytes(8).toString('hex')}:x`;
    const body = [
      { plan: 'free', key: `fine_${randomBytes(12).toString('hex')}` },
      { plan: 'free', key: odd },
      { plan: 'free', sha256: randomBytes(32).toString('hex'), perMinute: 6 },
    ];
    const r = await admin('POST', '/keys/import', JSON.stringify(body));
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      imported: 3,
      unchanged: 0,
      refused: [],
      dryRun: false,
      warnings: [
        { line: 2, warning: NOT_BEARER },
        { line: 3, warning: COST_MINUTE },
      ],
    });
    expect(JSON.stringify(r.body)).not.toContain(odd);
  }, 60_000);

  it('POST /keys/import while another instance holds the import lock: 409 import_in_progress, nothing written', async () => {
    const c = s.client;
    await c.set(`${PREFIX}keys:import:lock`, 'another-instance', 'PX', 30_000);
    const sha256 = randomBytes(32).toString('hex');
    const r = await admin('POST', '/keys/import', JSON.stringify([{ plan: 'free', sha256 }]));
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({ code: 'import_in_progress', status: 409 });
    expect(await c.get(`${PREFIX}keyhash:${sha256}`)).toBeNull();
    // Its holder's lock is left alone.
    expect(await c.get(`${PREFIX}keys:import:lock`)).toBe('another-instance');
    await c.del(`${PREFIX}keys:import:lock`);
    expect((await admin('POST', '/keys/import', JSON.stringify([{ plan: 'free', sha256 }]))).status).toBe(200);
  }, 60_000);

  it('every answer matched the OpenAPI document', () => {
    expect(api.problems).toEqual([]);
  });
});

describe('the CLI warns on stderr, and still does what it was asked', () => {
  it('keys create and keys update: one Warning line per window; keys import: per line', async () => {
    const created = await cli('create', '--plan', 'free', '--per-minute', '6', '--json');
    expect(created.code).toBe(0);
    expect(warningsOf(created)).toEqual([`Warning: ${COST_MINUTE}`]);
    const id = (JSON.parse(created.stdout) as { id: string }).id;
    const updated = await cli('update', id, '--per-day', '4');
    expect(updated.code).toBe(0);
    expect(warningsOf(updated)).toEqual([`Warning: ${COST_MINUTE}`, `Warning: ${COST_DAY_BOTH}`]);
    const odd = `a"quoted"key-${randomBytes(8).toString('hex')}`;
    const lines = [
      { plan: 'free', sha256: randomBytes(32).toString('hex'), perDay: 4 },
      { plan: 'free', key: odd },
    ];
    const file = dir.write('warn.jsonl', lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    const imported = await cli('import', file);
    expect(imported.code).toBe(0);
    expect(imported.stdout).toContain('Imported 2, unchanged 0.');
    expect(warningsOf(imported)).toEqual([`line 1: warning: ${COST_DAY_BOTH}`, `line 2: warning: ${NOT_BEARER}`]);
    expect(imported.stderr + imported.stdout).not.toContain(odd);
  }, 60_000);

  it('no Bearer warning when bearer is not among auth.sources', async () => {
    const headerOnly = dir.write('header-only.yaml', { ...base(), auth: { foreignKeys: true, sources: ['header:X-API-Key'] } });
    const file = dir.write('header.jsonl', `${JSON.stringify({ plan: 'free', key: `b@d:${randomBytes(10).toString('hex')}` })}\n`);
    const r = await runCli(['keys', 'import', file, '--config', headerOnly]);
    expect(r.code).toBe(0);
    expect(warningsOf(r)).toEqual([]);
  }, 60_000);
});
