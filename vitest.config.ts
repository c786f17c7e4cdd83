import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Whole Redis topologies (six cluster nodes; a primary, a replica and three sentinels) run in their own pass, one
    // file at a time, after this one: beside other integration files on two cores their failovers time out.
    exclude: ['test/topology/**', '**/node_modules/**'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    // Integration files each start their own redis-server and child processes; two cores, so two at a time.
    maxWorkers: 2,
  },
});
