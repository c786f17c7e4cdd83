// `serve --watch-config` (and server.watchConfig) with a real gateway process and the file laid out as the kubelet
// lays out a mounted ConfigMap: the file is a symlink through `..data`, itself a symlink to a timestamped directory,
// and an update swaps `..data` atomically (a new symlink under a temporary name, renamed over the old). Each swap
// reloads as SIGHUP does: new plan limits apply, a bad or missing file is rejected and logged while the old config
// stays, a burst of swaps is one reload, and with server.workers the primary watches and its workers apply.
// Needs dist/ (npm test builds first); loopback only.
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey, hashKey } from '../src/keys/format.js';
import { CliProcess, assertBuilt } from './helpers/cli.js';
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
      await proc.waitForLog('config reloaded', { after: mark, timeoutMs: 10_000 });
      expect(await statuses(url, 2)).toEqual([200, 429]);

      // Swap 2: a file that does not validate. Rejected and logged like a SIGHUP's; the limit of 3 stays.
      mark = proc.logs.length;
      volume.swap(yaml(3, { watchConfig: inFile }).replace('perMinute: 3', 'perMinute: "lots"'));
      const rejected = await proc.waitForLog('config reload rejected', { after: mark, timeoutMs: 10_000 });
      expect(rejected.level).toBeGreaterThanOrEqual(50);
      expect(JSON.stringify(rejected.errors)).toContain('plans.free.perMinute');
      expect(await statuses(url, 1)).toEqual([429]);

      // Swap 3: a good file again is applied: the plan back to 1000 a minute.
      mark = proc.logs.length;
      volume.swap(yaml(1000, { watchConfig: inFile }));
      await proc.waitForLog('config reloaded', { after: mark, timeoutMs: 10_000 });
      expect(await statuses(url, 2)).toEqual([200, 200]);

      // The ConfigMap's key removed (the file's symlink now dangles): rejected as a missing file, the old config stays;
      // the file back is applied.
      mark = proc.logs.length;
      volume.swap(null);
      const missing = await proc.waitForLog('config reload rejected', { after: mark, timeoutMs: 10_000 });
      expect(JSON.stringify(missing.errors)).toContain('file not found');
      expect(await statuses(url, 1)).toEqual([200]);
      mark = proc.logs.length;
      volume.swap(yaml(1000, { watchConfig: inFile }));
      await proc.waitForLog('config reloaded', { after: mark, timeoutMs: 10_000 });

      // A burst of swaps inside the debounce window: one reload, of the last file (a limit of 1: the next is 429).
      mark = proc.logs.length;
      for (const perMinute of [500, 400, 1]) volume.swap(yaml(perMinute, { watchConfig: inFile }));
      await proc.waitForLog('config reloaded', { after: mark, timeoutMs: 10_000 });
      await new Promise((r) => setTimeout(r, 600));
      expect(proc.logs.slice(mark).filter((l) => l.msg === 'config reloaded')).toHaveLength(1);
      expect(await statuses(url, 1)).toEqual([429]);

      // A file beside it that changes leaves the config alone: nothing is reloaded.
      mark = proc.logs.length;
      writeFileSync(join(dir, 'unrelated.txt'), 'x');
      await new Promise((r) => setTimeout(r, 1000));
      expect(proc.logs.slice(mark).filter((l) => String(l.msg).startsWith('config'))).toEqual([]);
      expect(proc.running).toBe(true);
    } finally {
      proc.signal('SIGTERM');
      await proc.waitForExit(10_000);
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
      await waitFor(() => proc.logs.filter((l) => l.msg === 'tollgate gateway listening').length === 2, 'both workers listening', 15_000);
      const url = String(proc.logs.find((l) => l.msg === 'tollgate gateway listening')!.url);
      expect(await statuses(url, 2)).toEqual([200, 200]);
      const mark = proc.logs.length;
      volume.swap(withWorkers(1));
      await waitFor(() => proc.logs.slice(mark).filter((l) => l.msg === 'config reloaded').length === 2, 'both workers reloaded', 10_000);
      expect(await statuses(url, 2)).toEqual([429, 429]);
      expect(proc.logs.filter((l) => String(l.msg).includes('worker died'))).toEqual([]);
    } finally {
      proc.signal('SIGTERM');
      await proc.waitForExit(15_000);
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
      const mark = proc.logs.length;
      volume.swap(yaml(1));
      await new Promise((r) => setTimeout(r, 1000));
      expect(proc.logs.slice(mark).filter((l) => String(l.msg).startsWith('config'))).toEqual([]);
      expect(await statuses(url, 2)).toEqual([200, 200]);
      proc.signal('SIGHUP');
      await proc.waitForLog('config reloaded', { after: mark });
      expect(await statuses(url, 1)).toEqual([429]);
    } finally {
      proc.signal('SIGTERM');
      await proc.waitForExit(10_000);
    }
  });
});
