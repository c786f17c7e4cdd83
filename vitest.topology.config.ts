// The Redis topology tests (test/topology/): a Redis Cluster and a Sentinel setup of real processes, each file alone,
// after the main suite (npm test runs both passes).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/topology/**/*.test.ts'],
    // Ceilings for a busy machine, as in vitest.config.ts.
    testTimeout: 180_000,
    hookTimeout: 180_000,
    fileParallelism: false,
    // The same reapers as the main pass (vitest.config.ts).
    setupFiles: ['test/reaper-setup.ts'],
    globalSetup: ['test/reaper-global.ts'],
  },
});
