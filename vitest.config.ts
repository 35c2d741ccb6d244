import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: more parallel files only add contention to timing-sensitive e2e tests.
    maxWorkers: 2,
    pool: 'forks',
  },
});
