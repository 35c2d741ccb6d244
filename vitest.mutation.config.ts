import { defineConfig } from 'vitest/config';

/**
 * The tests `npm run mutation` runs against each mutant: the unit and
 * conformance tests, the stale-token race tests, the group-commit and
 * log-redaction tests, in process (SQLite only unless DATABASE_URL is set).
 * Left out: tests that spawn processes (they run dist/, which Stryker does
 * not mutate), the two statistical races (lease-race, drain) and the
 * model-based race test: each takes seconds per run, and one run per mutant
 * did not fit beside other work on two cores; they test the store's locking
 * and sequencing, which the conformance tests cover decision by decision.
 */
export default defineConfig({
  test: {
    include: [
      'test/unit/**/*.test.ts',
      'test/conformance/**/*.test.ts',
      'test/races/stale-token.test.ts',
      'test/store/group-commit.test.ts',
      'test/coordinator/log-redaction.test.ts',
      'test/crash/fault-points.test.ts',
    ],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 1,
  },
});
