// `serve --watch-config` (and server.watchConfig) with a real gateway process and the file laid out as the kubelet
// lays out a mounted ConfigMap: the file is a symlink through `..data`, itself a symlink to a timestamped directory,
// and an update swaps `..data` atomically (a new symlink under a temporary name, renamed over the old). Each swap
// reloads as SIGHUP does: new plan limits apply, a bad file is rejected and logged while the old config stays.
// Needs dist/ (npm test builds first); loopback only.
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey, hashKey } from '../src/keys/format.js';
import { CliProcess, assertBuilt } from './helpers/cli.js';
import { TestUpstream, echo } from './helpers/upstream.js';

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

  swap(text: string): void {
    const next = this.writeGeneration(text);
    symlinkSync(next, join(this.dir, '..data_tmp'));
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
    rmSync(join(this.dir, this.current), { recursive: true, force: true });
    this.current = next;
  }

  private writeGeneration(text: string): string {
    this.generation++;
    const name = `..2026_11_26_14_00_0${this.generation}.00000000${this.generation}`;
    mkdirSync(join(this.dir, name));
    writeFileSync(join(this.dir, name, 'gateway.yaml'), text);
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
