/**
 * LEASEHOLD_REQUIRE: a comma-separated list of what must be available where
 * the suite runs (`.ci/run` sets it). A test whose requirement is listed
 * fails instead of skipping when it is missing. Kept free of vitest imports
 * so that vitest.config.ts can read it too.
 */

export const REQUIRE_VARIABLE = 'LEASEHOLD_REQUIRE';

export type Requirement = 'postgres' | 'tmpfs' | 'strace' | 'device-mapper' | 'chromium';

export function requiredHere(name: Requirement, env: NodeJS.ProcessEnv = process.env): boolean {
  return (env[REQUIRE_VARIABLE] ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .includes(name);
}
