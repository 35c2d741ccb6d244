/**
 * Group-commit observations (src/core/commit-report.ts): listeners get every
 * report until they unsubscribe, and commitsObserved says whether anyone listens.
 */

import { expect, it } from 'vitest';
import { commitsObserved, onCommit, reportCommit, type CommitReport } from '../../src/core/commit-report.js';

const REPORT: CommitReport = { backend: 'sqlite', operations: 3, durationMs: 1.5 };

it('calls every listener with each report until it unsubscribes, and says whether anyone listens', () => {
  expect(commitsObserved()).toBe(false);
  reportCommit(REPORT); // nobody listens: nothing to call
  const first: CommitReport[] = [];
  const second: CommitReport[] = [];
  const stopFirst = onCommit((r) => first.push(r));
  expect(commitsObserved()).toBe(true);
  const stopSecond = onCommit((r) => second.push(r));
  reportCommit(REPORT);
  expect(first).toEqual([REPORT]);
  expect(second).toEqual([REPORT]);
  expect(stopFirst()).toBe(true);
  reportCommit({ ...REPORT, operations: 7 });
  expect(first).toHaveLength(1);
  expect(second.map((r) => r.operations)).toEqual([3, 7]);
  expect(commitsObserved()).toBe(true);
  stopSecond();
  expect(commitsObserved()).toBe(false);
});
