import { defineConfig } from 'vitest/config';

/**
 * The open-loop overload test offers five times what a coordinator can serve,
 * from a generator on the same two cores: it measures queueing, and other
 * test files running beside it turned their CPU use into its latency (one CI
 * run in about ten). It runs alone, after everything else.
 */
const ALONE = ['test/overload/overload.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: more parallel files only add contention to timing-sensitive e2e tests.
    maxWorkers: 2,
    pool: 'forks',
    projects: [
      { extends: true, test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: ALONE, sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: 'alone', include: ALONE, fileParallelism: false, sequence: { groupOrder: 1 } } },
    ],
  },
});
