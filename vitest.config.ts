import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Whole Redis topologies (six cluster nodes; a primary, a replica and three sentinels) run in their own pass, one
    // file at a time, after this one: beside other integration files on two cores their failovers time out.
    exclude: ['test/topology/**', '**/node_modules/**'],
    // Ceilings, not expectations: every wait inside a test ends on its signal (a line printed, a port answering), and
    // the helpers' own ceilings (60 s for a child to start: test/helpers/cli.ts) sit below these, so that on a busy
    // machine a slow start is waited for and only a real hang fails, with the helper's message rather than the runner's.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Integration files each start their own redis-server and child processes; two cores, so two at a time.
    maxWorkers: 2,
    // Child processes are stopped whatever a test's outcome: after each file (reaper-setup.ts), and at the end of the
    // run for those of a worker that died (reaper-global.ts).
    setupFiles: ['test/reaper-setup.ts'],
    globalSetup: ['test/reaper-global.ts'],
  },
});
