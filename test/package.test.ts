// The installable package (docs: "Running it for real"): `npm pack` makes a tarball of only what a user needs
// (dist, the example configs, the admin API's OpenAPI document, README, LICENSE), and that tarball installed into an
// empty directory runs: `tollgate config check` on its own example config, `tollgate config schema`, and `tollgate dev`,
// whose printed demo key is answered by its gateway and whose dashboard page is served.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CliProcess, REPO } from './helpers/cli.js';
import { freePort } from './helpers/redis-server.js';

const run = promisify(execFile);
let dir: string;
let tarball: string;
let files: string[];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-pack-'));
  // dist/ is built by `npm test` before the suite; --ignore-scripts skips prepack's second build.
  const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], { cwd: REPO, timeout: 60_000 });
  const [info] = JSON.parse(packed.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
  tarball = join(dir, info!.filename);
  files = info!.files.map((f) => f.path);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'tollgate-install-test', private: true }));
  // From the npm cache when it has everything (CI's `npm ci` filled it); the registry otherwise.
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--omit=dev', tarball], { cwd: dir, timeout: 240_000 });
}, 300_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the npm package', () => {
  it('holds only what a user needs', () => {
    expect(files).toContain('dist/cli.js');
    expect(files).toContain('dist/dashboard/public/app.js');
    expect(files).toContain('dist/dashboard/public/views/key.js');
    expect(files).toContain('config/gateway.yaml');
    expect(files).toContain('config/gateway.schema.json');
    expect(files).toContain('docs/admin.openapi.yaml');
    // config/gateway.yaml and `tollgate dev` take the pet store's routes from it.
    expect(files).toContain('docs/petstore.openapi.yaml');
    expect(files).toContain('README.md');
    expect(files).toContain('LICENSE');
    const unwanted = files.filter(
      (f) => /^(src|test|bench|scripts|\.ci|deploy)\//.test(f) || f.endsWith('.map') || f.endsWith('.ts') || f === 'package-lock.json',
    );
    expect(unwanted).toEqual([]);
  });

  it('installed into an empty directory, its tollgate runs config check, config schema and dev', async () => {
    const bin = join(dir, 'node_modules', '.bin', 'tollgate');
    const check = await run(bin, ['config', 'check', '--config', join(dir, 'node_modules', 'tollgate', 'config', 'gateway.yaml')], {
      cwd: dir,
      timeout: 30_000,
    });
    expect(check.stdout).toMatch(/gateway\.yaml: OK \(4 plans, 5 routes/);
    const schema = await run(bin, ['config', 'schema'], { cwd: dir, timeout: 30_000 });
    expect(JSON.parse(schema.stdout).title).toBe('Tollgate gateway configuration');

    const port = await freePort();
    const dev = CliProcess.start(['dev', '--port', String(port)], {}, { cli: join(dir, 'node_modules', 'tollgate', 'dist', 'cli.js'), cwd: dir });
    try {
      await dev.waitForStdout(/Press Ctrl-C to stop/);
      const key = /^ {4}free\s+(tg_[0-9A-Za-z]+)$/m.exec(dev.stdout)![1]!;
      const res = await fetch(`http://127.0.0.1:${port}/v1/categories`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(5000) });
      expect(res.status).toBe(200);
      // The document's deprecated getPet, read from the installed package's docs/.
      const pet = await fetch(`http://127.0.0.1:${port}/v1/pets/1`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(5000) });
      expect(pet.headers.get('deprecation')).toBe('@1780272000');
      const admin = /Dashboard and admin API: (http:\/\/127\.0\.0\.1:\d+)\//.exec(dev.stdout)![1]!;
      const page = await fetch(`${admin}/`, { signal: AbortSignal.timeout(5000) });
      expect(await page.text()).toContain('<title>Tollgate</title>');
      // The page's modules and the libraries they import, served from the installed package's node_modules.
      for (const asset of ['app.js', 'views/keys.js', 'vendor/preact.js', 'vendor/htm.js', 'vendor/uplot.js', 'vendor/uPlot.min.css'])
        expect((await fetch(`${admin}/assets/${asset}`, { signal: AbortSignal.timeout(5000) })).status, asset).toBe(200);
    } finally {
      expect(await dev.stop()).toEqual({ code: 0, signal: null });
    }
  });
});
