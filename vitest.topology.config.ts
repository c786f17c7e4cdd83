// The Redis topology tests (test/topology/): a Redis Cluster and a Sentinel setup of real processes, each file alone,
// after the main suite (npm test runs both passes).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/topology/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
});
