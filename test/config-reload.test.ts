// A reload must never take the gateway down: whatever the parser throws on a new file (an alias bomb makes the YAML
// library throw rather than return an error), the reload is rejected and the old config stays, in a single process
// and in a node:cluster primary with workers. A rejected file's content is never echoed into the log.
// Needs dist/ (npm test builds first); loopback only: a TestUpstream and, for workers, a private TestRedis.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfigText } from '../src/config/load.js';
import { generateKey, hashKey } from '../src/keys/format.js';
import { CliProcess, REPO, assertBuilt, cleanEnv } from './helpers/cli.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream, echo } from './helpers/upstream.js';
import { track } from './helpers/children.js';

/** The classic "billion laughs" in YAML: ten levels of nine aliases each. */
function aliasBomb(): string {
  const lines = [`x0: &a0 [${Array(9).fill('"lol"').join(', ')}]`];
  for (let i = 1; i <= 9; i++)
    lines.push(
      `x${i}: &a${i} [${Array(9)
        .fill(`*a${i - 1}`)
        .join(', ')}]`,
    );
  return `${lines.join('\n')}\n`;
}

const SECRET = 'hunter2-s3cret-redis-password';

describe('config parsing never throws', () => {
  it('an alias bomb is an error, not an exception', () => {
    const result = parseConfigText(`log:\n  level: info\n${aliasBomb()}`);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors).toHaveLength(1);
    expect(result.errors[0]).toMatch(/^YAML: .*alias/i);
  });

  it('errors quote at most a short, redacted excerpt of a value', () => {
    const key = generateKey();
    const long = 'x'.repeat(5000);
    const result = parseConfigText(
      ['server:', `  host: 7`, `  port: "redis://tollgate:${SECRET}@10.0.0.1:6379/0"`, 'upstream:', `  url: "${long}"`, 'log:', `  level: "${key}"`].join('\n'),
    );
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const text = result.errors.join('\n');
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(key);
    expect(text).not.toContain('x'.repeat(100));
    expect(text).toContain('server.port: expected number, got "redis://tollgate:***@');
    expect(text).toContain('log.level: expected one of');
    for (const line of result.errors) expect(line.length).toBeLessThan(300);
  });
});

describe('SIGHUP with a file the parser throws on', () => {
  let dir: string;
  let up: TestUpstream;
  let redis: TestRedis;
  const KEY = generateKey();

  beforeAll(async () => {
    assertBuilt();
    dir = mkdtempSync(join(tmpdir(), 'tollgate-reload-'));
    up = await TestUpstream.start();
    up.behaviour = echo;
    redis = await TestRedis.start();
  });

  afterAll(async () => {
    await CliProcess.killAll();
    await up?.close();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function yaml(opts: { workers?: number } = {}): string {
    return [
      'server:',
      '  host: 127.0.0.1',
      '  port: 0',
      `  workers: ${opts.workers ?? 1}`,
      'upstream:',
      `  url: ${up.url}`,
      ...(opts.workers && opts.workers > 1 ? ['redis:', `  url: ${redis.url}`] : []),
      'log:',
      '  level: info',
      'keys:',
      `  - { id: reload-test, plan: enterprise, sha256: "${hashKey(KEY)}" }`,
      '',
    ].join('\n');
  }

  async function status(url: string): Promise<number> {
    const res = await fetch(`${url}/v1/pets/1`, { headers: { authorization: `Bearer ${KEY}` }, signal: AbortSignal.timeout(5000) });
    await res.body?.cancel();
    return res.status;
  }

  it.each([1, 2])('with %i worker(s): rejected and logged without the file content; the gateway keeps serving', async (workers) => {
    const path = join(dir, `gateway-${workers}.yaml`);
    writeFileSync(path, yaml({ workers }));
    const proc = CliProcess.start(['serve', '--config', path]);
    try {
      const listening = await proc.waitForLog('tollgate gateway listening');
      const url = String(listening.url);
      expect(await status(url)).toBe(200);

      // The bomb, and a password in a field where it does not belong: the reload is refused, neither is echoed.
      writeFileSync(path, `${yaml({ workers })}upstream_password: "${SECRET}"\n${aliasBomb()}`);
      let mark = proc.logs.length;
      proc.signal('SIGHUP');
      const rejected = await proc.waitForLog('config reload rejected', { after: mark });
      expect(rejected.level).toBe(50); // error: logged as one, not fatal (the gateway keeps serving)
      expect(JSON.stringify(rejected.errors)).toMatch(/alias/i);
      expect(proc.stdout).not.toContain(SECRET);
      expect(proc.stdout).not.toContain('lol');

      // A bad value that would be quoted: quoted short and redacted.
      writeFileSync(path, yaml({ workers }).replace('  port: 0', `  port: "redis://u:${SECRET}@h:1"`));
      mark = proc.logs.length;
      proc.signal('SIGHUP');
      await proc.waitForLog('config reload rejected', { after: mark });
      expect(proc.stdout).not.toContain(SECRET);

      expect(proc.running).toBe(true);
      expect(await status(url)).toBe(200);
      // And a good file is still applied afterwards.
      writeFileSync(path, yaml({ workers }));
      mark = proc.logs.length;
      proc.signal('SIGHUP');
      await proc.waitForLog('config reloaded', { after: mark });
      expect(await status(url)).toBe(200);
      expect(proc.logs.filter((l) => typeof l.msg === 'string' && l.msg.includes('worker died'))).toEqual([]);
    } finally {
      proc.signal('SIGTERM');
      await proc.waitForExit();
    }
  });
});

describe('a bug that escapes every handler', () => {
  beforeAll(assertBuilt);

  it.each([
    ['uncaught exception', 'setTimeout(() => { throw new Error("boom in a timer"); }, 10);'],
    ['unhandled promise rejection', 'setTimeout(() => { Promise.reject(new Error("boom in a promise")); }, 10);'],
  ])('%s: logged as fatal with its message, the log flushed, exit 1', async (kind, trigger) => {
    const serverModule = pathToFileURL(join(REPO, 'dist', 'server', 'gateway-server.js')).href;
    const loggerModule = pathToFileURL(join(REPO, 'dist', 'observability', 'logger.js')).href;
    const script = [
      `const { exitOnFatalError } = await import(${JSON.stringify(serverModule)});`,
      `const { createLogger } = await import(${JSON.stringify(loggerModule)});`,
      `exitOnFatalError(createLogger('info'));`,
      // Keeps the process alive, as a listening server would.
      'setInterval(() => {}, 1000);',
      trigger,
    ].join('\n');
    const child = track(spawn(process.execPath, ['--input-type=module', '-e', script], { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] }));
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    clearTimeout(timer);
    expect(code).toBe(1);
    const line = JSON.parse(stdout.trim().split('\n').pop()!) as { level: number; msg: string; err: { message: string } };
    expect(line.level).toBe(60);
    expect(line.msg).toBe(`${kind}: exiting`);
    expect(line.err.message).toMatch(/^boom in a/);
  });
});
