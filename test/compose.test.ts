// docker-compose.yml checked as CI checks it (no Docker engine here): scripts/check-compose.mjs passes on the
// repository's file and names the problem in variants whose Redis would lose or evict customers' keys, and in
// Dockerfiles whose image would listen on loopback, run as root, lack a HEALTHCHECK or use an unmaintained Node.js.
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO, assertBuilt } from './helpers/cli.js';

const original = readFileSync(join(REPO, 'docker-compose.yml'), 'utf8');
// Variants sit beside the original: the file's relative paths (./config, ./deploy) resolve from its own directory.
const variant = join(REPO, `docker-compose.test-${process.pid}.yml`);
const dockerfile = readFileSync(join(REPO, 'Dockerfile'), 'utf8');
const dockerVariant = join(REPO, `Dockerfile.test-${process.pid}`);

function check(file: string): { code: number | null; output: string } {
  const r = spawnSync(process.execPath, [join(REPO, 'scripts', 'check-compose.mjs'), file], { cwd: REPO, encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, output: r.stdout + r.stderr };
}

describe('check-compose', () => {
  beforeAll(assertBuilt);
  afterAll(() => {
    rmSync(variant, { force: true });
    rmSync(dockerVariant, { force: true });
  });

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

  it.each([
    ['listens on loopback (no HOST)', (t: string) => t.replace('ENV HOST=0.0.0.0\n', ''), 'must set ENV HOST=0.0.0.0'],
    ['sets HOST to loopback', (t: string) => t.replace('ENV HOST=0.0.0.0', 'ENV HOST=127.0.0.1'), 'must set ENV HOST=0.0.0.0'],
    ['runs as root', (t: string) => t.replace(/^USER .*\n/m, ''), 'the final stage has no USER'],
    ['runs as a named user', (t: string) => t.replace(/^USER .*$/m, 'USER node'), 'USER node: expected a numeric non-root user'],
    ['runs as uid 0', (t: string) => t.replace(/^USER .*$/m, 'USER 0'), 'USER 0: expected a numeric non-root user'],
    ['has no HEALTHCHECK', (t: string) => t.replace(/^HEALTHCHECK [^\n]*\\\n[^\n]*\n/m, ''), 'the final stage has no HEALTHCHECK'],
    ['is built from an ended Node.js line', (t: string) => t.replaceAll('FROM node:24-', 'FROM node:20-'), 'Node.js 20 is not a maintained LTS line'],
    ['is built from an odd, short-lived line', (t: string) => t.replaceAll('FROM node:24-', 'FROM node:25-'), 'Node.js 25 is not a maintained LTS line'],
  ])('an image that %s fails, naming the problem', (_what, mutate, problem) => {
    const text = mutate(dockerfile);
    expect(text).not.toBe(dockerfile);
    writeFileSync(dockerVariant, text);
    // Both services that build the image build the variant.
    writeFileSync(variant, original.replaceAll('    build: .\n', `    build: { context: ., dockerfile: ${basename(dockerVariant)} }\n`));
    const r = check(variant);
    expect(r.output).toContain(problem);
    expect(r.code).toBe(1);
  });
});
