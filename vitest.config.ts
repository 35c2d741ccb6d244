import { defineConfig } from 'vitest/config';
import { decidePostgres, POSTGRES_NOTE_VARIABLE } from './test/support/postgres-probe.js';

/**
 * The open-loop overload test offers five times what a coordinator can serve,
 * from a generator on the same two cores: it measures queueing, and other
 * test files running beside it turned their CPU use into its latency (one CI
 * run in about ten). It runs alone, after everything else.
 */
const ALONE = ['test/overload/overload.test.ts'];

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
      globalSetup: ['test/support/global-setup.ts'],
      env: postgres.url === null ? {} : { DATABASE_URL: postgres.url },
      projects: [
        { extends: true, test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: ALONE, sequence: { groupOrder: 0 } } },
        { extends: true, test: { name: 'alone', include: ALONE, fileParallelism: false, sequence: { groupOrder: 1 } } },
      ],
    },
  };
});
