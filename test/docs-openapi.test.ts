// docs/openapi.md against what it shows, so the page cannot drift from the code: its document and config pass
// `tollgate config check` with the line it quotes; run as written (the built CLI, two static keys added, the built pet
// store as the backend), every answer it shows comes back with the status, the header lines and the body it quotes;
// the brownout it shows is run with an interval written around now (its dates then differ, its shape may not); the
// shadow log line and the switch to enforce by SIGHUP happen as described; `openapi diff` prints what it quotes.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { generateKey, hashKey } from '../src/keys/format.js';
import { CliProcess, REPO, assertBuilt, runCli, startServe, tempDir } from './helpers/cli.js';
import { waitFor } from './helpers/wait.js';

const PAGE = readFileSync(join(REPO, 'docs/openapi.md'), 'utf8');

/** The page's fenced blocks, in order, each with its language. */
const FENCED = [...PAGE.matchAll(/```(\w*)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1]!, text: m[2]! }));
const yamlBlock = (first: string): string => FENCED.find((b) => b.lang === 'yaml' && b.text.startsWith(first))!.text;
const CATALOG = yamlBlock('# catalog.yaml');
const GATEWAY = yamlBlock('# gateway.yaml');

/** An answer as the page shows it: the curl line, the status line, header lines, and the body after a blank line. */
interface Shown {
  command: string;
  status: string;
  headers: string[];
  body: string;
}
const SHOWN: Shown[] = FENCED.filter((b) => b.lang === 'http').map((b) => {
  const [head, body = ''] = b.text.split('\n\n');
  const lines = head!.split('\n');
  const command = lines[0]!.startsWith('$ ')
    ? lines
        .splice(
          0,
          lines.findIndex((l) => l.startsWith('HTTP/1.1')),
        )
        .join('\n')
    : '';
  return { command, status: lines[0]!, headers: lines.slice(1).filter((l) => l !== ''), body: body.trim() };
});
const shown = (what: RegExp): Shown => {
  const s = SHOWN.find((x) => what.test(x.command) || what.test(x.body));
  if (!s) throw new Error(`the page shows no answer matching ${what}`);
  return s;
};

/** Header lines whose values move with time or the request: their names are checked, not their values. */
const MOVING = new Set(['x-ratelimit-reset', 'retry-after', 'ratelimit']);

const dir = tempDir();
const freeKey = generateKey();
const businessKey = generateKey();
let petstore: CliProcess;
let gateway: { proc: CliProcess; url: string };
let runConfig: string;

async function request(method: string, path: string, key: string | undefined, body?: string): Promise<{ status: string; headers: Headers; body: string }> {
  const headers: Record<string, string> = {};
  if (key) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${gateway.url}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  return { status: `HTTP/1.1 ${res.status} ${res.statusText}`, headers: res.headers, body: await res.text() };
}

/** The answer has the page's status and every header line it shows (moving ones by name), and its body. */
function matchesPage(got: { status: string; headers: Headers; body: string }, page: Shown, body: string = page.body): void {
  expect(got.status).toBe(page.status);
  for (const line of page.headers) {
    const name = line.slice(0, line.indexOf(':')).toLowerCase();
    const value = line.slice(line.indexOf(':') + 1).trim();
    if (MOVING.has(name)) expect(got.headers.get(name), name).not.toBeNull();
    else if (name === 'x-ratelimit-remaining') expect(Number(got.headers.get(name)), name).toBeGreaterThan(0);
    else expect(got.headers.get(name), name).toBe(value);
  }
  expect(got.body).toBe(body);
}

function writeRun(catalog: string, validate: 'shadow' | 'enforce'): void {
  writeFileSync(join(dir.dir, 'catalog.yaml'), catalog);
  const config = parse(GATEWAY) as { services: { catalog: { targets: string[]; openapi: { validate: string } } } } & Record<string, unknown>;
  config.services.catalog.targets = [petstoreUrl];
  config.services.catalog.openapi.validate = validate;
  config.server = { host: '127.0.0.1', port: 0 };
  config.keys = [
    { id: 'acme-free', plan: 'free', sha256: hashKey(freeKey) },
    { id: 'bigco', plan: 'business', sha256: hashKey(businessKey) },
  ];
  writeFileSync(runConfig, stringify(config));
}

let petstoreUrl = '';

beforeAll(async () => {
  assertBuilt();
  petstore = CliProcess.start(['petstore', '--port', '0', '--host', '127.0.0.1']);
  petstoreUrl = String((await petstore.waitForLog('petstore listening')).url);
  runConfig = join(dir.dir, 'run.yaml');
  writeRun(CATALOG, 'shadow');
  gateway = await startServe(runConfig, 60_000);
}, 120_000);
afterAll(async () => {
  await gateway?.proc.stop();
  await petstore?.stop();
  dir.remove();
}, 90_000);

describe('docs/openapi.md', () => {
  it("the page's document and config pass config check with the line it quotes", async () => {
    dir.write('gateway.yaml', GATEWAY);
    const r = await runCli(['config', 'check', '--config', join(dir.dir, 'gateway.yaml')]);
    const quoted = FENCED.find((b) => b.text.startsWith('$ tollgate config check'))!.text.split('\n')[1]!;
    expect([r.code, r.stderr]).toEqual([0, '']);
    expect(r.stdout.trim()).toBe(quoted.replace('gateway.yaml', join(dir.dir, 'gateway.yaml')));
  });

  it('the deprecated operation answers with the headers the page shows', async () => {
    matchesPage(await request('GET', '/v1/pets/1', freeKey), shown(/pets\/1/));
  });

  it('the stability gate refuses the free key as shown, before its quota, and lets the business key through', async () => {
    const before = Number((await request('GET', '/v1/categories/1', freeKey)).headers.get('x-ratelimit-remaining'));
    matchesPage(await request('POST', '/v1/categories', freeKey, '{"name":"Dog"}'), shown(/-d '\{"name":"Dog"\}'/));
    const after = Number((await request('GET', '/v1/categories/1', freeKey)).headers.get('x-ratelimit-remaining'));
    expect(before - after).toBe(1);
    const ok = await request('POST', '/v1/categories', businessKey, '{"name":"Dog"}');
    expect([ok.status, ok.headers.get('x-api-stability')]).toEqual(['HTTP/1.1 201 Created', 'experimental']);
  });

  it('shadow proxies an invalid request and logs the line the page shows; enforce after SIGHUP refuses it as shown', async () => {
    const shadow = await request('GET', '/v1/categories/0', businessKey);
    expect(shadow.status).toBe('HTTP/1.1 404 Not Found');
    const logShown = JSON.parse(FENCED.find((b) => b.text.startsWith('{"level":30,...'))!.text.replace('"level":30,...,', '')) as Record<string, unknown>;
    const logged = await gateway.proc.waitForLog(String(logShown.msg));
    for (const [k, v] of Object.entries(logShown)) expect(logged[k], k).toEqual(v);
    expect(JSON.stringify(logged)).not.toContain(businessKey);

    writeRun(CATALOG, 'enforce');
    gateway.proc.signal('SIGHUP');
    await waitFor(async () => (await request('GET', '/v1/categories/0', businessKey)).status === 'HTTP/1.1 400 Bad Request', 'the reload to enforce', 30_000);
    matchesPage(await request('GET', '/v1/categories/0', businessKey), shown(/categories\/0/));
    matchesPage(await request('POST', '/v1/categories', businessKey, '{"name":"","colour":"brown"}'), shown(/"colour":"brown"/));
  });

  it('a brownout answers as the page shows, with the interval around now', async () => {
    const page = shown(/browned out/);
    const start = new Date(Date.now() - 60_000).toISOString().replace(/\.\d+Z$/, 'Z');
    const brownedOut = CATALOG.replace(/x-brownouts: \[.*\]/, `x-brownouts: [${start}/PT1H]`);
    expect(brownedOut).not.toBe(CATALOG);
    writeRun(brownedOut, 'enforce');
    gateway.proc.signal('SIGHUP');
    await waitFor(async () => (await request('GET', '/v1/pets/1', freeKey)).status === 'HTTP/1.1 410 Gone', 'the reload with the brownout', 30_000);
    const until = new Date(Date.parse(start) + 3_600_000).toISOString();
    matchesPage(await request('GET', '/v1/pets/1', freeKey), page, page.body.replace('2027-03-02T15:00:00.000Z', until));
  });

  it('openapi diff prints what the page quotes', async () => {
    const block = FENCED.find((b) => b.text.startsWith('$ tollgate openapi diff'))!.text;
    dir.write('catalog.yaml', CATALOG);
    dir.write('gateway.yaml', GATEWAY);
    // The new version the page describes: createCategory beta, getPet's sunset three months earlier (and its
    // brownouts before it).
    dir.write(
      'catalog-1.5.yaml',
      CATALOG.replace('x-stability: experimental', 'x-stability: beta')
        .replace('x-sunset: 2027-06-01T00:00:00Z', 'x-sunset: 2027-03-01T00:00:00Z')
        .replace(/x-brownouts: \[.*\]/, 'x-brownouts: [2027-02-02T14:00:00Z/PT1H]'),
    );
    const r = await runCli(['openapi', 'diff', '--config', join(dir.dir, 'gateway.yaml'), join(dir.dir, 'catalog-1.5.yaml')]);
    expect(r.code).toBe(3);
    const expected = block.split('\n').slice(1).join('\n').replace('catalog-1.5.yaml', join(dir.dir, 'catalog-1.5.yaml'));
    expect(r.stdout).toBe(expected);
  });
});
