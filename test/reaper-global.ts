// The run's last reaper (vitest globalSetup, in the runner's own process): it gives the workers a pid ledger, and on
// teardown kills every child the ledger still lists, which only a worker that died without running its own reapers
// (killed, or crashed) can leave behind (test/helpers/children.ts has the other three).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LEDGER_ENV, reapLedger } from './helpers/children.js';

export function setup(): () => void {
  // Set before the workers start, so they inherit it (a nested run, as the reaper's own test makes, gets its own).
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-test-pids-'));
  process.env[LEDGER_ENV] = dir;
  const reap = () => {
    const pids = reapLedger(dir);
    if (pids.length > 0) process.stderr.write(`test reaper: killed ${pids.length} child process(es) left running: ${pids.join(', ')}\n`);
  };
  // Interrupted (Ctrl-C) or ended without a teardown: the ledger is reaped all the same.
  process.once('exit', reap);
  return () => {
    reap();
    rmSync(dir, { recursive: true, force: true });
  };
}
