import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    // Integration files each start their own redis-server and child processes; two cores, so two at a time.
    maxWorkers: 2,
  },
});
