/**
 * Coordinator kills under load, on every backend: eight producers enqueue
 * without pause, each with its own idempotency keys, while the coordinator is
 * killed three times — inside an enqueue transaction (SQLite group-commits
 * the enqueues in flight with it), after an enqueue commit before its 202,
 * and by a SIGKILL from outside at an arbitrary moment. After each kill a
 * coordinator over the same database must still hold every job it answered
 * 202 for (acknowledged, found, lost = 0). Requests cut off by a kill are in
 * doubt: retried with their keys at the end, each comes back as the job that
 * was committed (replayed) or is created then, and the queue ends with one job
 * per key, no more.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseholdNetworkError, type LeaseholdClient } from '../../src/client/index.js';
import { allJobs } from '../support/all-jobs.js';
import { CRASH_BACKENDS, startCrashDeployment, type CrashDeployment } from './crash-deployment.js';

const LANES = 8;
/** Acknowledged enqueues in a round before the test kills the coordinator from outside. */
const EXTERNAL_KILL_AFTER = 60;

/** How each round's coordinator dies: an armed point (the n-th pass), or the test's own SIGKILL. */
const KILLS = [
  { name: 'inside the enqueue transaction', crashAt: 'enqueue.before-commit:40' },
  { name: 'after an enqueue commit, before its 202', crashAt: 'enqueue.after-commit:50' },
  { name: 'SIGKILL from outside', crashAt: '' },
] as const;

interface Round {
  readonly acknowledged: Map<string, string>; // idempotency key → job id from the 202
  readonly inDoubt: string[];
  readonly unexpected: string[];
}

/** Enqueues on every lane until the coordinator is gone; each lane ends at its first cut-off request. */
async function enqueueUntilKilled(producer: LeaseholdClient, round: number, onAck: (acknowledged: number) => void): Promise<Round> {
  const result: Round = { acknowledged: new Map(), inDoubt: [], unexpected: [] };
  await Promise.all(
    Array.from({ length: LANES }, async (_, lane) => {
      for (let i = 0; ; i++) {
        const key = `r${round}-l${lane}-${i}`;
        try {
          const { job } = await producer.enqueue({ kind: 'load', payload: { round, lane, i } }, { idempotencyKey: key });
          result.acknowledged.set(key, job.id);
          onAck(result.acknowledged.size);
        } catch (error) {
          if (error instanceof LeaseholdNetworkError) result.inDoubt.push(key);
          else result.unexpected.push(`${key}: ${String(error)}`);
          return;
        }
      }
    }),
  );
  return result;
}

describe.each(CRASH_BACKENDS)('coordinator kills under enqueue load (%s)', (backend) => {
  let d: CrashDeployment;

  beforeAll(async () => {
    d = await startCrashDeployment(backend);
  });

  afterAll(async () => {
    await d?.stop();
  });

  it('loses no acknowledged enqueue across three kills, and in-doubt retries create no duplicates', async () => {
    const rounds: Round[] = [];
    const figures: string[] = [];
    await d.serve(KILLS[0].crashAt);
    for (const [index, kill] of KILLS.entries()) {
      const coordinator = d.coordinator;
      const external = kill.crashAt === '';
      const round = await enqueueUntilKilled(d.client(d.keys.producer), index, (acknowledged) => {
        if (external && acknowledged === EXTERNAL_KILL_AFTER) coordinator.child.kill('SIGKILL');
      });
      expect(await coordinator.exited).toBe('SIGKILL');
      expect(round.unexpected).toEqual([]);
      rounds.push(round);

      // The next round's coordinator (armed for its own kill, which reading does not reach) reads this round's jobs.
      await d.serve(KILLS[index + 1]?.crashAt ?? '');
      const jobs = await allJobs(d.client(d.keys.admin));
      const found = [...round.acknowledged.values()].filter((id) => jobs.has(id)).length;
      figures.push(
        `${kill.name}: acknowledged ${round.acknowledged.size}, found ${found}, lost ${round.acknowledged.size - found}, in doubt ${round.inDoubt.length}`,
      );
      expect(round.acknowledged.size).toBeGreaterThan(0);
      expect(found).toBe(round.acknowledged.size);
    }

    // Requests cut off by a kill: the same key again answers the committed job or creates it now, once.
    const producer = d.client(d.keys.producer);
    for (const [index, round] of rounds.entries()) {
      let committed = 0;
      for (const key of round.inDoubt) {
        const [, lane = '', i = ''] = /^r\d+-l(\d+)-(\d+)$/.exec(key) ?? [];
        const answer = await producer.enqueue({ kind: 'load', payload: { round: index, lane: Number(lane), i: Number(i) } }, { idempotencyKey: key });
        if (answer.replayed) committed++;
      }
      figures[index] += ` (${committed} committed before the kill, ${round.inDoubt.length - committed} created on retry)`;
      // The request that died after its commit is among them.
      if (KILLS[index]?.crashAt.startsWith('enqueue.after-commit')) expect(committed).toBeGreaterThanOrEqual(1);
    }
    const expected = rounds.reduce((sum, round) => sum + round.acknowledged.size + round.inDoubt.length, 0);
    const jobs = await allJobs(d.client(d.keys.admin));
    expect(jobs.size).toBe(expected);
    figures.push(`${jobs.size} jobs after the in-doubt retries: one per key`);
    console.log(`coordinator kills (${backend}):\n  ${figures.join('\n  ')}`);
  });

  it('answered no request with a 5xx: no coordinator logged a warning or an error', () => {
    expect(d.coordinatorWarnings()).toEqual([]);
  });
});
