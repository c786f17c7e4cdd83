// After every test file (vitest setupFiles): kills the child processes it left running (and closes its in-process
// servers), those of a test that timed
// out or threw before it reached its finally (the helpers stop their own on every other path). Registered before the
// file's own hooks, so it runs after its afterAll hooks have had their chance.
import { afterAll } from 'vitest';
import { closeTrackedServers, killTracked } from './helpers/children.js';

afterAll(async () => {
  await closeTrackedServers();
  const pids = killTracked();
  if (pids.length > 0) process.stderr.write(`test reaper: killed ${pids.length} child process(es) this file left running: ${pids.join(', ')}\n`);
});
