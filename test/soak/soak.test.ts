/**
 * The chaos soak, short: about 35 s of enqueue load on SQLite while workers
 * and the coordinator are SIGKILLed and restarted, then the drain and the
 * audit of bench/soak.ts. The seed is fixed, so the order of the kills (one
 * coordinator kill in every three) is the same on every run; how many fit in
 * the time depends on the machine, hence floors rather than exact counts.
 * `npm run soak -- --minutes N` is the long version.
 */

import { expect, it } from 'vitest';
import { formatSummary, runSoak } from '../../bench/soak.js';

it('loses no acknowledged job and commits each result once while workers and the coordinator are killed (SQLite)', async () => {
  const summary = await runSoak({ durationMs: 24_000, seed: 42, killGapMs: [1_500, 3_000], drainTimeoutMs: 25_000 });
  // The table goes to the test output: the figures of this run, for the reliability notes.
  process.stdout.write(`${formatSummary(summary)}\n`);

  expect(summary.kills.coordinator).toBeGreaterThanOrEqual(2);
  expect(summary.kills.worker).toBeGreaterThanOrEqual(3);
  expect(summary.accepted).toBeGreaterThan(500);
  expect(summary.refused).toEqual({});
  expect(summary.unacknowledgedByProducer).toBe(0);

  expect(summary.lost).toBe(0);
  expect(summary.duplicateCommits).toBe(0);
  expect(summary.wrongFate).toBe(0);
  expect(summary.jobsSeen).toBe(summary.accepted);
  expect(summary.succeeded + summary.dead).toBe(summary.accepted);
  // Policy failures were exercised, and only they ended dead.
  expect(summary.deadExpectedByPolicy).toBeGreaterThan(0);
  expect(summary.dead).toBe(summary.deadExpectedByPolicy);
  // Every kill in the middle of work shows up in both independent counts of expired leases.
  expect(summary.leaseExpiries).toBe(summary.expiredAttempts);
  expect(summary.executions).toBeGreaterThanOrEqual(summary.accepted);
  expect(summary.unreadableLedgerLines).toBe(0);
  expect(summary.coordinatorInternalErrors).toBe(0);
  expect(summary.secretsChecked.leaseTokens).toBe(summary.accepted);
  expect(summary.logLinesWithSecrets).toBe(0);
  expect(summary.worker5xx['500'] ?? 0).toBe(0);
  expect(summary.unexpectedExits).toBe(0);
  expect(summary.ok).toBe(true);
}, 75_000);
