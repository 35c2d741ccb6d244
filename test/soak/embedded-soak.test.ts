/**
 * The embedded chaos soak, short: about 30 s of an application process
 * enqueuing (half of it with enqueueInTransaction beside a row of its own)
 * and two openQueue + Worker processes on one SQLite file, each SIGKILLed and
 * restarted, the application also inside its own transaction and a worker
 * while it holds the write lock; then the drain and
 * the audit of bench/soak-embedded.ts. The seed is fixed, so the order of the
 * kills is the same on every run; how many fit in the time depends on the
 * machine, hence floors. `npm run soak -- --mode embedded --minutes N` is the
 * long version.
 */

import { expect, it } from 'vitest';
import { formatEmbeddedSummary, runEmbeddedSoak } from '../../bench/soak-embedded.js';

it('loses no accepted job and commits each result once while the application and two workers on one SQLite file are killed', async () => {
  // A held transaction stays open 300 ms, so a kill on its line lands inside it even on a loaded machine.
  const summary = await runEmbeddedSoak({ durationMs: 20_000, seed: 7, killGapMs: [1_000, 2_000], txHoldMs: 300, drainTimeoutMs: 30_000 });
  process.stdout.write(`${formatEmbeddedSummary(summary)}\n`);

  // The chaos happened: each kind of kill at least once (the seed puts all four in the first round of five).
  expect(summary.kills.app).toBeGreaterThanOrEqual(1);
  expect(summary.kills.worker).toBeGreaterThanOrEqual(2);
  expect(summary.kills.workerHoldingLock).toBeGreaterThanOrEqual(1);
  expect(summary.kills.appInsideTransaction).toBeGreaterThanOrEqual(1);
  // The application killed inside its transaction started again at that transaction's number: it had not committed.
  expect(summary.appKillsConfirmedInside).toBe(summary.kills.appInsideTransaction);
  expect(summary.accepted).toBeGreaterThan(400);
  expect(summary.acceptedInTransaction).toBeGreaterThan(200);

  expect(summary.lost).toBe(0);
  expect(summary.duplicateCommits).toBe(0);
  expect(summary.resultRowsNotOne).toBe(0);
  expect(summary.wrongFate).toBe(0);
  expect(summary.jobsWithoutTheirTransaction).toBe(0);
  expect(summary.rowsNamingAnotherJob).toBe(0);
  // A kill inside a hold rolled it back: its row never committed.
  expect(summary.holdsSurvivingTheirKill).toBe(0);
  expect(summary.holdsCommitted).toBeGreaterThan(0);
  expect(summary.succeeded + summary.dead).toBe(summary.accepted);
  expect(summary.jobsSeen).toBe(summary.accepted + summary.unrecordedEnqueues);
  expect(summary.deadExpectedByPolicy).toBeGreaterThan(0);
  expect(summary.dead).toBe(summary.deadExpectedByPolicy);
  expect(summary.leaseExpiries).toBe(summary.expiredAttempts);
  expect(summary.executions).toBeGreaterThanOrEqual(summary.accepted);
  expect(summary.unreadableLedgerLines).toBe(0);
  expect(summary.logLinesWithSecrets).toBe(0);
  expect(summary.unexpectedExits).toBe(0);
  expect(summary.ok).toBe(true);
}, 90_000);
