import { defineConfig } from 'vitest/config';
import { decidePostgres, POSTGRES_NOTE_VARIABLE } from './test/support/postgres-probe.js';

/**
 * The open-loop overload test offers five times what a coordinator can serve,
 * from a generator on the same two cores: it measures queueing, and other
 * test files running beside it turned their CPU use into its latency (one CI
 * run in about ten). It runs alone, after everything else.
 */
const ALONE = ['test/overload/overload.test.ts'];

/**
 * The long runs: the chaos soaks (24 s and 20 s of kills each, then an audit), the 3,000-job scale-out
 * over two coordinators, the shifted-clock workers (a lease left to expire for real), the fair-share
 * scenarios with real workers (makespans of several seconds each, on both backends) and the operator
 * commands run as processes against a coordinator (about 35 s of process starts). `npm test` leaves
 * them out to stay within its 10 minutes on two cores; `npm run test:long` (LEASEHOLD_SUITE=long) runs
 * only them, and CI runs both.
 */
const LONG = [
  'test/soak/soak.test.ts',
  'test/soak/embedded-soak.test.ts',
  'test/e2e/postgres-scale-out.test.ts',
  'test/soak/clock-skew.test.ts',
  'test/coordinator/groups-workers.test.ts',
  'test/cli/operator-commands.test.ts',
];
const longSuite = process.env['LEASEHOLD_SUITE'] === 'long';

export default defineConfig(async () => {
  // Probed once, before any file is collected: every file's PostgreSQL half reads DATABASE_URL.
  // vitest evaluates this file again for each project; the first decision stands.
  const postgres =
    process.env[POSTGRES_NOTE_VARIABLE] === undefined
      ? await decidePostgres()
      : { url: process.env['DATABASE_URL'] || null, note: process.env[POSTGRES_NOTE_VARIABLE] };
  if (process.env[POSTGRES_NOTE_VARIABLE] === undefined) {
    if (postgres.url !== null) process.env['DATABASE_URL'] = postgres.url;
    process.env[POSTGRES_NOTE_VARIABLE] = postgres.note;
    console.log(postgres.note);
  }
  return {
    test: {
      testTimeout: 60_000,
      hookTimeout: 60_000,
      // Two cores: more parallel files only add contention to timing-sensitive e2e tests.
      maxWorkers: 2,
      pool: 'forks',
      // Each worker process imports the project's modules once for all the files it runs, instead of once per file:
      // that import was about a second of every file's time (130 s of the suite's wall time on two cores). The
      // modules keep no state between tests that matters (crash points are read by the processes tests spawn), and
      // every file makes its own stores, coordinators and keys.
      isolate: false,
      globalSetup: ['test/support/global-setup.ts'],
      env: postgres.url === null ? {} : { DATABASE_URL: postgres.url },
      projects: longSuite
        ? [{ extends: true, test: { name: 'long', include: LONG } }]
        : [
            { extends: true, test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: [...ALONE, ...LONG], sequence: { groupOrder: 0 } } },
            { extends: true, test: { name: 'alone', include: ALONE, fileParallelism: false, sequence: { groupOrder: 1 } } },
          ],
    },
  };
});
