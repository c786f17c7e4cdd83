// package.json's "test" script runs both vitest passes (main suite, topology suite) whatever the first one answered,
// and fails if either failed: run under `sh` with stand-ins for `npm` and `vitest` that record their calls.
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';

const script = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { scripts: { test: string } }).scripts.test;
const dir = mkdtempSync(join(tmpdir(), 'tollgate-npm-test-'));
const calls = join(dir, 'calls');

// Each stand-in appends its arguments to `calls` and exits with the code the test names for that call.
function standIn(name: string): void {
  const file = join(dir, name);
  writeFileSync(
    file,
    `#!/bin/sh\necho "${name} $*" >> "${calls}"\ncase "$*" in\n  *topology*) exit \${TOPOLOGY_EXIT:-0} ;;\n  run) exit \${MAIN_EXIT:-0} ;;\n  *lint*) exit \${LINT_EXIT:-0} ;;\n  *) exit 0 ;;\nesac\n`,
  );
  chmodSync(file, 0o755);
}
standIn('npm');
standIn('vitest');

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(env: Record<string, string>): { status: number | null; calls: string[] } {
  writeFileSync(calls, '');
  const r = spawnSync('sh', ['-c', script], { env: { PATH: `${dir}:/usr/bin:/bin`, ...env }, encoding: 'utf8', timeout: 10_000 });
  return { status: r.status, calls: readFileSync(calls, 'utf8').trim().split('\n') };
}

const bothPasses = ['vitest run', 'vitest run --config vitest.topology.config.ts'];
const checks = ['npm run lint --silent', 'npm run typecheck:test --silent', 'npm run build --silent'];

describe('npm test', () => {
  it('runs lint, typecheck and build first, then both passes, and succeeds when both pass', () => {
    const r = run({});
    expect(r.status).toBe(0);
    expect(r.calls).toEqual([...checks, ...bothPasses]);
  });

  it('still runs the topology suite when the main suite fails, and fails', () => {
    const r = run({ MAIN_EXIT: '1' });
    expect(r.calls).toEqual([...checks, ...bothPasses]);
    expect(r.status).toBe(1);
  });

  it('fails when only the topology suite fails', () => {
    const r = run({ TOPOLOGY_EXIT: '1' });
    expect(r.calls).toEqual([...checks, ...bothPasses]);
    expect(r.status).toBe(1);
  });

  it('runs no test when the lint fails', () => {
    const r = run({ LINT_EXIT: '1' });
    expect(r.calls).toEqual(['npm run lint --silent']);
    expect(r.status).toBe(1);
  });
});
