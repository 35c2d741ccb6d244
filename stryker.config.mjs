// @ts-check
/**
 * Mutation testing (`npm run mutation`, not part of `npm test`): mutates the
 * decision code in src/core/ and runs the tests of vitest.mutation.config.ts
 * against each mutant. The score and the survivors are in docs/RELIABILITY.md.
 * LEASEHOLD_MUTATE overrides the files to mutate (comma-separated globs).
 */
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
const config = {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts' },
  coverageAnalysis: 'perTest',
  mutate: (process.env['LEASEHOLD_MUTATE'] ?? 'src/core/**/*.ts').split(','),
  concurrency: Number(process.env['LEASEHOLD_MUTATION_CONCURRENCY'] ?? 1),
  // Under load on two shared cores a mutant that loops forever is told apart from a slow run by this margin.
  timeoutMS: 10_000,
  // Reruns retest only mutants whose code or covering tests changed (reports/mutation/incremental.json).
  incremental: true,
  incrementalFile: 'reports/mutation/incremental.json',
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: true,
  thresholds: { high: 90, low: 85, break: null },
};
export default config;
