// Watchdog forked by the bench (bench/run.mjs) and the soak (scripts/soak.mjs). The parent tells it the pid of
// every process it starts and its scratch directory; if the parent dies without cleaning up (SIGKILL, a crash no
// handler covers), the IPC channel drops and this process kills those pids (SIGTERM, then SIGKILL after 3 s) and
// removes the scratch directory. It ignores SIGINT/SIGTERM: a Ctrl-C reaches the whole process group, and the
// watchdog must outlive its parent.
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const pids = new Set();
let scratch;
process.on('SIGINT', () => {});
process.on('SIGTERM', () => {});
process.on('message', (m) => {
  if (typeof m?.add === 'number') pids.add(m.add);
  if (typeof m?.remove === 'number') pids.delete(m.remove);
  // Only ever a directory a Tollgate script made under the system temp dir.
  if (typeof m?.scratch === 'string' && m.scratch.startsWith(join(tmpdir(), 'tollgate-'))) scratch = m.scratch;
  if (m?.keepScratch) scratch = undefined;
});
const removeScratch = () => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
};
process.on('disconnect', () => {
  if (pids.size === 0) {
    removeScratch();
    process.exit(0);
  }
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {}
  }
  setTimeout(() => {
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    removeScratch();
    process.exit(0);
  }, 3000);
});
