// docker-compose.yml checked as CI checks it (no Docker engine here): scripts/check-compose.mjs passes on the
// repository's file and names the problem in variants whose Redis would lose or evict customers' keys.
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO, assertBuilt } from './helpers/cli.js';

const original = readFileSync(join(REPO, 'docker-compose.yml'), 'utf8');
// Variants sit beside the original: the file's relative paths (./config, ./deploy) resolve from its own directory.
const variant = join(REPO, `docker-compose.test-${process.pid}.yml`);

function check(file: string): { code: number | null; output: string } {
  const r = spawnSync(process.execPath, [join(REPO, 'scripts', 'check-compose.mjs'), file], { cwd: REPO, encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, output: r.stdout + r.stderr };
}

describe('check-compose', () => {
  beforeAll(assertBuilt);
  afterAll(() => rmSync(variant, { force: true }));

  it("the repository's docker-compose.yml passes", () => {
    const r = check(join(REPO, 'docker-compose.yml'));
    expect(r.output).toContain('OK (4 services');
    expect(r.code).toBe(0);
  });

  it.each([
    ['no volume for /data', (t: string) => t.replace('    volumes:\n      - redis-data:/data\n', ''), 'Redis keeps its data in /data, which must be a volume'],
    ['no append-only file', (t: string) => t.replace('"--appendonly", "yes", ', ''), 'must run with --appendonly yes'],
    ['an evicting policy', (t: string) => t.replace('"noeviction"', '"allkeys-lru"'), 'must run with --maxmemory-policy noeviction'],
    ['an undeclared named volume', (t: string) => t.replace(/\nvolumes:\n {2}redis-data:\n$/, '\n'), 'named volume "redis-data" is not declared'],
  ])('a Redis with %s fails, naming the problem', (_what, mutate, problem) => {
    const text = mutate(original);
    expect(text).not.toBe(original);
    writeFileSync(variant, text);
    const r = check(variant);
    expect(r.code).toBe(1);
    expect(r.output).toContain(problem);
  });
});
