// `serve --watch-config` (and server.watchConfig) with a real gateway process and the file laid out as the kubelet
// lays out a mounted ConfigMap: the file is a symlink through `..data`, itself a symlink to a timestamped directory,
// and an update swaps `..data` atomically (a new symlink under a temporary name, renamed over the old). Each swap
// reloads as SIGHUP does: new plan limits apply, a bad or missing file is rejected and logged while the old config
// stays, a burst of swaps is one reload, and with server.workers the primary watches and its workers apply. Then what
// must not be applied: a file caught mid-write, an empty one, one that drops a whole section (until SIGHUP); and a
// file under a swapped directory symlink is followed. Needs dist/ (npm test builds first); loopback only.
import { closeSync, mkdirSync, mkdtempSync, openSync, renameSync, rmSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey, hashKey } from '../src/keys/format.js';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { EMPTY_DOCUMENT_ERROR } from '../src/config/load.js';
import { CliProcess, assertBuilt, runCli } from './helpers/cli.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream, echo } from './helpers/upstream.js';
import { waitFor } from './helpers/wait.js';

/** A ConfigMap volume as the kubelet writes it, with `swap` doing what the kubelet does when the ConfigMap changes. */
class ConfigMapVolume {
  private current: string;
  private generation = 0;

  constructor(
    readonly dir: string,
    text: string,
  ) {
    this.current = this.writeGeneration(text);
    symlinkSync(this.current, join(dir, '..data'));
    symlinkSync(join('..data', 'gateway.yaml'), join(dir, 'gateway.yaml'));
  }

  get path(): string {
    return join(this.dir, 'gateway.yaml');
  }

  /** `null`: the new generation lacks the file, as when the key is removed from the ConfigMap. */
  swap(text: string | null): void {
    const next = this.writeGeneration(text);
    symlinkSync(next, join(this.dir, '..data_tmp'));
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
    rmSync(join(this.dir, this.current), { recursive: true, force: true });
    this.current = next;
  }

  private writeGeneration(text: string | null): string {
    this.generation++;
    const name = `..2026_11_26_14_00_${String(this.generation).padStart(2, '0')}.${this.generation}`;
    mkdirSync(join(this.dir, name));
    if (text !== null) writeFileSync(join(this.dir, name, 'gateway.yaml'), text);
    return name;
  }
}

describe('serve --watch-config with a ConfigMap-style symlinked file', () => {
  let root: string;
  let up: TestUpstream;
  const KEY = generateKey();

  beforeAll(async () => {
    assertBuilt();
    root = mkdtempSync(join(tmpdir(), 'tollgate-watch-'));
    up = await TestUpstream.start();
    up.behaviour = echo;
  });

  afterAll(async () => {
    await CliProcess.killAll();
    await up?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  function yaml(perMinute: number, opts: { watchConfig?: boolean } = {}): string {
    return [
      'server:',
      '  host: 127.0.0.1',
      '  port: 0',
      ...(opts.watchConfig ? ['  watchConfig: true'] : []),
      'upstream:',
      `  url: ${up.url}`,
      'log:',
      '  level: info',
      'plans:',
      `  free: { perMinute: ${perMinute}, perDay: 100000 }`,
      'keys:',
      `  - { id: watch-test, plan: free, sha256: "${hashKey(KEY)}" }`,
      '',
    ].join('\n');
  }

  async function statuses(url: string, n: number): Promise<number[]> {
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const res = await fetch(`${url}/v1/pets/1`, { headers: { authorization: `Bearer ${KEY}` }, signal: AbortSignal.timeout(5000) });
      await res.body?.cancel();
      out.push(res.status);
    }
    return out;
  }

  it.each([
    ['the --watch-config flag', ['--watch-config'], false],
    ['server.watchConfig: true', [], true],
  ])('%s: each swap reloads; a bad file is rejected, logged, and the old config stays', async (_how, flags, inFile) => {
    const dir = join(root, inFile ? 'field' : 'flag');
    mkdirSync(dir);
    const volume = new ConfigMapVolume(dir, yaml(1000, { watchConfig: inFile }));
    const proc = CliProcess.start(['serve', '--config', volume.path, ...flags]);
    try {
      const listening = await proc.waitForLog('tollgate gateway listening');
      const url = String(listening.url);
      await proc.waitForLog('watching the config file');
      expect(await statuses(url, 2)).toEqual([200, 200]);

      // Swap 1: the plan drops to 3 a minute (2 already spent): the next one passes, then 429.
      let mark = proc.logs.length;
      volume.swap(yaml(3, { watchConfig: inFile }));
      await proc.waitForLog('config reloaded', { after: mark });
      expect(await statuses(url, 2)).toEqual([200, 429]);

      // Swap 2: a file that does not validate. Rejected and logged like a SIGHUP's; the limit of 3 stays.
      mark = proc.logs.length;
      volume.swap(yaml(3, { watchConfig: inFile }).replace('perMinute: 3', 'perMinute: "lots"'));
      const rejected = await proc.waitForLog('config reload rejected', { after: mark });
      expect(rejected.level).toBe(50); // error: logged as one, not fatal (the gateway keeps serving)
      expect(JSON.stringify(rejected.errors)).toContain('plans.free.perMinute');
      expect(await statuses(url, 1)).toEqual([429]);

      // Swap 3: a good file again is applied: the plan back to 1000 a minute.
      mark = proc.logs.length;
      volume.swap(yaml(1000, { watchConfig: inFile }));
      await proc.waitForLog('config reloaded', { after: mark });
      expect(await statuses(url, 2)).toEqual([200, 200]);

      // The ConfigMap's key removed (the file's symlink now dangles): rejected as a missing file, the old config stays;
      // the file back is applied.
      mark = proc.logs.length;
      volume.swap(null);
      const missing = await proc.waitForLog('config reload rejected', { after: mark });
      expect(JSON.stringify(missing.errors)).toContain('file not found');
      expect(await statuses(url, 1)).toEqual([200]);
      mark = proc.logs.length;
      volume.swap(yaml(1000, { watchConfig: inFile }));
      await proc.waitForLog('config reloaded', { after: mark });

      // A burst of swaps inside the debounce window: one reload, of the last file (a limit of 1: the next is 429).
      mark = proc.logs.length;
      for (const perMinute of [500, 400, 1]) volume.swap(yaml(perMinute, { watchConfig: inFile }));
      const first = await proc.waitForLog('config reloaded', { after: mark });
      // No second reload within 600 ms after the first.
      expect(await proc.logsWithin('config', { after: proc.logs.indexOf(first) + 1, forMs: 600 })).toEqual([]);
      expect(proc.logs.slice(mark).filter((l) => l.msg === 'config reloaded')).toHaveLength(1);
      expect(await statuses(url, 1)).toEqual([429]);

      // A file beside it that changes leaves the config alone: nothing is reloaded within a second; then a SIGHUP's
      // reload, the marker, shows the process was logging all along: its line is the only config line since.
      mark = proc.logs.length;
      writeFileSync(join(dir, 'unrelated.txt'), 'x');
      expect(await proc.logsWithin('config', { after: mark, forMs: 1000 })).toEqual([]);
      proc.signal('SIGHUP');
      await proc.waitForLog('config reloaded', { after: mark });
      expect(
        proc.logs
          .slice(mark)
          .filter((l) => String(l.msg).startsWith('config'))
          .map((l) => l.msg),
      ).toEqual(['config reloaded']);
      expect(proc.running).toBe(true);
    } finally {
      proc.signal('SIGTERM');
      await proc.waitForExit();
    }
  });

  it('with server.workers 2: the primary watches and forwards, as for SIGHUP; each worker applies the new file', async () => {
    const redis = await TestRedis.start();
    const dir = join(root, 'workers');
    mkdirSync(dir);
    const withWorkers = (perMinute: number) =>
      yaml(perMinute).replace('  port: 0', '  port: 0\n  workers: 2').replace('log:', `redis:\n  url: ${redis.url}\nlog:`);
    const volume = new ConfigMapVolume(dir, withWorkers(1000));
    const proc = CliProcess.start(['serve', '--config', volume.path, '--watch-config']);
    try {
      await proc.waitForLog('tollgate primary started workers');
      await proc.waitForLog('watching the config file');
      // Both workers up (each logs its own "listening", and only then takes the primary's SIGHUP).
      await waitFor(() => proc.logs.filter((l) => l.msg === 'tollgate gateway listening').length === 2, 'both workers listening', 30_000);
      const url = String(proc.logs.find((l) => l.msg === 'tollgate gateway listening')!.url);
      expect(await statuses(url, 2)).toEqual([200, 200]);
      const mark = proc.logs.length;
      volume.swap(withWorkers(1));
      await waitFor(() => proc.logs.slice(mark).filter((l) => l.msg === 'config reloaded').length === 2, 'both workers reloaded', 30_000);
      expect(await statuses(url, 2)).toEqual([429, 429]);
      expect(proc.logs.filter((l) => String(l.msg).includes('worker died'))).toEqual([]);
    } finally {
      proc.signal('SIGTERM');
      await proc.waitForExit();
      await redis.stop();
    }
  });

  it('without the flag or the field, a swap reloads nothing (SIGHUP still does)', async () => {
    const dir = join(root, 'off');
    mkdirSync(dir);
    const volume = new ConfigMapVolume(dir, yaml(1000));
    const proc = CliProcess.start(['serve', '--config', volume.path]);
    try {
      const url = String((await proc.waitForLog('tollgate gateway listening')).url);
      // Startup is over: a watch, had one been set up, announced itself before the listening line.
      expect(proc.logs.filter((l) => String(l.msg).startsWith('watching the config file'))).toEqual([]);
      const mark = proc.logs.length;
      volume.swap(yaml(1));
      expect(await statuses(url, 2)).toEqual([200, 200]);
      proc.signal('SIGHUP');
      await proc.waitForLog('config reloaded', { after: mark });
      expect(await statuses(url, 1)).toEqual([429]);
      // The SIGHUP's reload is the only config event since the swap: no "config file changed" from a watcher.
      expect(
        proc.logs
          .slice(mark)
          .map((l) => String(l.msg))
          .filter((m) => m.startsWith('config')),
      ).toEqual(['config reloaded']);
    } finally {
      proc.signal('SIGTERM');
      await proc.waitForExit();
    }
  });
});

// A file caught mid-write, an empty file, a swapped directory symlink, and a file that drops whole sections: each as an
// operator meets it with a real `serve --watch-config` process.
describe('serve --watch-config: only a complete, stable file that keeps every section is applied', () => {
  let root: string;
  let up: TestUpstream;
  const KEY = generateKey();
  const ADMIN_TOKEN = generateAdminToken();

  beforeAll(async () => {
    assertBuilt();
    root = mkdtempSync(join(tmpdir(), 'tollgate-watch-safe-'));
    up = await TestUpstream.start();
    up.behaviour = echo;
  });

  afterAll(async () => {
    await CliProcess.killAll();
    await up?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  /** A gateway config; `admin: false` leaves out the admin section. The keys section comes last. */
  function yaml(perMinute: number, opts: { admin?: boolean } = {}): string {
    return [
      'server:',
      '  host: 127.0.0.1',
      '  port: 0',
      'upstream:',
      `  url: ${up.url}`,
      'log:',
      '  level: info',
      ...(opts.admin === false ? [] : ['admin:', '  host: 127.0.0.1', '  port: 0', `  tokens: [{ id: ops, sha256: "${hashAdminToken(ADMIN_TOKEN)}" }]`]),
      'plans:',
      `  free: { perMinute: ${perMinute}, perDay: 100000 }`,
      'keys:',
      `  - { id: watch-safe, plan: free, sha256: "${hashKey(KEY)}" }`,
      '',
    ].join('\n');
  }

  async function statuses(url: string, n: number): Promise<number[]> {
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const res = await fetch(`${url}/v1/pets/1`, { headers: { authorization: `Bearer ${KEY}` }, signal: AbortSignal.timeout(5000) });
      await res.body?.cancel();
      out.push(res.status);
    }
    return out;
  }

  async function serve(path: string): Promise<{ proc: CliProcess; url: string; adminUrl: string | undefined }> {
    const proc = CliProcess.start(['serve', '--config', path, '--watch-config']);
    const url = String((await proc.waitForLog('tollgate gateway listening')).url);
    const admin = proc.logs.find((l) => l.msg === 'admin API listening');
    await proc.waitForLog('watching the config file');
    return { proc, url, adminUrl: admin ? String(admin.url) : undefined };
  }

  const reloadLines = (proc: CliProcess, after: number) =>
    proc.logs
      .slice(after)
      .map((l) => String(l.msg))
      .filter((m) => m === 'config reloaded' || m.startsWith('config reload rejected') || m.startsWith('config change not applied'));

  it('`cmd > gateway.yaml`: a file truncated, then written in two parts 400 ms apart, is applied once, complete', async () => {
    const dir = join(root, 'truncate');
    mkdirSync(dir);
    const path = join(dir, 'gateway.yaml');
    writeFileSync(path, yaml(1000));
    const { proc, url } = await serve(path);
    try {
      expect(await statuses(url, 1)).toEqual([200]);
      const mark = proc.logs.length;
      // Truncated, then the first part (every section up to the keys: valid YAML on its own), a pause twice the
      // debounce (a watch that only debounces reloads the first part here) and well inside debounce + settle (1.2 s,
      // so a loaded machine's late timer cannot reach it), then the rest.
      const text = yaml(2);
      const cut = text.indexOf('keys:');
      const fd = openSync(path, 'w');
      writeSync(fd, text.slice(0, cut));
      await new Promise((r) => setTimeout(r, 400));
      const beforeRest = proc.logs.length;
      writeSync(fd, text.slice(cut));
      closeSync(fd);
      // Nothing was applied (nor refused) while the file was half written.
      expect(proc.logs.slice(mark, beforeRest).filter((l) => String(l.msg).startsWith('config'))).toEqual([]);
      await proc.waitForLog('config reloaded', { after: mark });
      // The complete file: the key is still known and its plan allows 2 a minute (1 spent).
      expect(await statuses(url, 2)).toEqual([200, 429]);
      expect(reloadLines(proc, mark)).toEqual(['config reloaded']);
    } finally {
      proc.signal('SIGTERM');
      await proc.waitForExit();
    }
  });

  it('an empty file is rejected and the old config stays; `config check` calls it an error', async () => {
    const dir = join(root, 'empty');
    mkdirSync(dir);
    const path = join(dir, 'gateway.yaml');
    writeFileSync(path, yaml(1000));
    const { proc, url, adminUrl } = await serve(path);
    try {
      const mark = proc.logs.length;
      writeFileSync(path, '');
      const rejected = await proc.waitForLog('config reload rejected', { after: mark });
      expect(rejected.errors).toEqual([EMPTY_DOCUMENT_ERROR]);
      expect(await statuses(url, 2)).toEqual([200, 200]);
      const admin = await fetch(`${adminUrl}/keys`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, signal: AbortSignal.timeout(5000) });
      await admin.body?.cancel();
      expect(admin.status).toBe(200);
      expect(reloadLines(proc, mark)).toEqual(['config reload rejected; the old config stays in force']);
    } finally {
      proc.signal('SIGTERM');
      await proc.waitForExit();
    }
    for (const text of ['', '# only a comment\n', 'null\n']) {
      writeFileSync(path, text);
      const check = await runCli(['config', 'check', '--config', path]);
      expect(check.code).toBe(1);
      expect(check.stdout).toBe('');
      expect(check.stderr).toBe(`${path}: invalid configuration (1 problem)\n  ${EMPTY_DOCUMENT_ERROR}\n`);
    }
  });

  it('a file under a swapped directory symlink (current -> release-2) is followed, then watched where it now points', async () => {
    const dir = join(root, 'releases');
    mkdirSync(join(dir, 'release-1'), { recursive: true });
    mkdirSync(join(dir, 'release-2'));
    writeFileSync(join(dir, 'release-1', 'gateway.yaml'), yaml(1000));
    writeFileSync(join(dir, 'release-2', 'gateway.yaml'), yaml(2));
    symlinkSync('release-1', join(dir, 'current'));
    const { proc, url } = await serve(join(dir, 'current', 'gateway.yaml'));
    try {
      expect(await statuses(url, 1)).toEqual([200]);
      // The release swapped atomically, as a deploy does: a new link under a temporary name renamed over the old.
      let mark = proc.logs.length;
      symlinkSync('release-2', join(dir, 'current.tmp'));
      renameSync(join(dir, 'current.tmp'), join(dir, 'current'));
      await proc.waitForLog('config reloaded', { after: mark });
      expect(await statuses(url, 2)).toEqual([200, 429]);
      // An edit in the release now current is seen too (the watch moved there), one in the old release is not.
      mark = proc.logs.length;
      writeFileSync(join(dir, 'release-1', 'gateway.yaml'), yaml(1));
      writeFileSync(join(dir, 'release-2', 'gateway.yaml'), yaml(1000));
      await proc.waitForLog('config reloaded', { after: mark });
      expect(await statuses(url, 2)).toEqual([200, 200]);
      expect(reloadLines(proc, mark)).toEqual(['config reloaded']);
    } finally {
      proc.signal('SIGTERM');
      await proc.waitForExit();
    }
  });

  it('a file that drops a whole section (admin) is not applied by the watch; SIGHUP applies it', async () => {
    const dir = join(root, 'dropped');
    mkdirSync(dir);
    const path = join(dir, 'gateway.yaml');
    writeFileSync(path, yaml(1000));
    const { proc, url, adminUrl } = await serve(path);
    const adminStatus = async () => {
      const res = await fetch(`${adminUrl}/keys`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, signal: AbortSignal.timeout(5000) });
      await res.body?.cancel();
      return res.status;
    };
    try {
      expect(await adminStatus()).toBe(200);
      let mark = proc.logs.length;
      // Written whole (a new file renamed over the old), so only the missing section can hold it back.
      writeFileSync(`${path}.tmp`, yaml(2, { admin: false }));
      renameSync(`${path}.tmp`, path);
      const refused = await proc.waitForLog('config change not applied', { after: mark });
      expect(refused.level).toBe(40);
      expect(refused.dropped).toEqual(['admin']);
      expect(refused.msg).toBe(
        `config change not applied: it drops the section admin of the config in force; if that is meant, apply it with SIGHUP (kill -HUP ${proc.proc.pid})`,
      );
      // The old config stays: the admin token still works, the plan is still 1000 a minute.
      expect(await adminStatus()).toBe(200);
      expect(await statuses(url, 3)).toEqual([200, 200, 200]);
      expect(reloadLines(proc, mark)).toEqual([refused.msg]);

      // The operator means it: SIGHUP applies the file (the admin API keeps its listener but has no token now).
      mark = proc.logs.length;
      proc.signal('SIGHUP');
      await proc.waitForLog('config reloaded', { after: mark });
      expect(await statuses(url, 1)).toEqual([429]);
      expect(await adminStatus()).toBe(401);

      // From then on that file is the reference: a later change without the admin section is applied by the watch.
      mark = proc.logs.length;
      writeFileSync(`${path}.tmp`, yaml(1000, { admin: false }));
      renameSync(`${path}.tmp`, path);
      await proc.waitForLog('config reloaded', { after: mark });
      expect(await statuses(url, 1)).toEqual([200]);
      expect(reloadLines(proc, mark)).toEqual(['config reloaded']);
    } finally {
      proc.signal('SIGTERM');
      await proc.waitForExit();
    }
  });
});
