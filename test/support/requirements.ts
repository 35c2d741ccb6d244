/**
 * Tests that need something of the machine (a tmpfs mount, strace, device
 * mapper, PostgreSQL) and cannot create their fault without it. Such a test
 * never passes through a stand-in: where the requirement is missing it is
 * reported as skipped, with the reason in its title and on stdout. Where the
 * requirement is named in LEASEHOLD_REQUIRE (comma-separated; `.ci/run` sets
 * it), the same test runs and fails with the reason instead, so CI cannot go
 * green on a skip.
 */

import { it } from 'vitest';
import { REQUIRE_VARIABLE, requiredHere, type Requirement } from './require-env.js';

export { REQUIRE_VARIABLE, requiredHere, type Requirement };

type Body = () => Promise<void> | void;

/**
 * `it` when `missing` is null; otherwise a skipped test whose title carries the
 * reason, or (when the requirement is demanded) a test that fails with it.
 */
export function itNeeds(name: Requirement, missing: string | null): (title: string, body: Body, timeoutMs?: number) => void {
  if (missing === null) return (title, body, timeoutMs) => it(title, body, timeoutMs);
  if (requiredHere(name)) {
    return (title) =>
      it(title, () => {
        throw new Error(`${REQUIRE_VARIABLE} names "${name}", but it is unavailable here: ${missing}`);
      });
  }
  return (title) => {
    console.log(`SKIPPED (${name} unavailable: ${missing}): ${title}`);
    it.skip(`${title} [skipped: ${name} unavailable: ${missing}]`, () => undefined);
  };
}
