// A test that times out, throws, or takes its worker down leaves no child process behind: a nested vitest runs such
// tests (test/fixtures/reaper/) with the suite's reapers, and every process they started must be gone when it ends.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stillRunning, track } from './helpers/children.js';
import { assertBuilt, cleanEnv, REPO } from './helpers/cli.js';

const VITEST = join(REPO, 'node_modules', 'vitest', 'vitest.mjs');
const CONFIG = join(REPO, 'test', 'fixtures', 'reaper', 'vitest.config.ts');

interface Recorded {
  pid: number;
  startTime: string;
}

let pidsDir: string;
let nested: { code: number | null; output: string };
let recorded: Recorded[];

/** The processes the nested run recorded that are still running now (the same process: pid and start time). */
const survivors = () => recorded.filter((r) => stillRunning(r.pid, r.startTime));

beforeAll(async () => {
  assertBuilt();
  pidsDir = mkdtempSync(join(tmpdir(), 'tollgate-reaper-test-'));
  // The nested run gets a ledger of its own from its own global setup: not this run's.
  const env = cleanEnv({ REAPER_PIDS: pidsDir, REAPER_TEST_TIMEOUT_MS: '5000' });
  delete env.TOLLGATE_TEST_PID_LEDGER;
  delete env.VITEST;
  delete env.VITEST_WORKER_ID;
  delete env.VITEST_POOL_ID;
  nested = await new Promise((resolve, reject) => {
    const child = track(spawn(process.execPath, [VITEST, 'run', '--config', CONFIG], { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] }));
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, output }));
  });
  recorded = readdirSync(pidsDir).map((name) => ({ pid: Number(name), startTime: readFileSync(join(pidsDir, name), 'utf8') }));
});

afterAll(() => {
  // Whatever the verdict, nothing the nested run started outlives this file.
  for (const r of recorded ?? []) if (stillRunning(r.pid, r.startTime)) process.kill(r.pid, 'SIGKILL');
  if (pidsDir) rmSync(pidsDir, { recursive: true, force: true });
});

describe('the reapers', () => {
  it('the nested run failed as its tests meant to (a timeout, a throw, a dead worker), having started three children', () => {
    expect(nested.code, nested.output).not.toBe(0);
    expect(nested.output).toMatch(/Test timed out in 5000ms/);
    expect(nested.output).toMatch(/a failure before the test reached its stop/);
    // Two tollgate children (one in the worker that died) and a redis-server, each recorded once it was running.
    expect(recorded, nested.output).toHaveLength(3);
    expect(recorded.every((r) => r.startTime !== '')).toBe(true);
  });

  it('every child is gone when the run ends: the timed-out test’s tollgate, the failed test’s redis-server, the dead worker’s tollgate', () => {
    expect(survivors(), nested.output).toEqual([]);
    // The dead worker's child was found by the run's own teardown, which says so.
    expect(nested.output).toMatch(/test reaper: killed 1 child process\(es\) left running: \d+/);
  });
});
