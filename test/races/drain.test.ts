/**
 * 10,000 jobs drained by 64 concurrent leasers (issue 5, item 2), at the
 * store level on every backend. Leasers take batches of 1 to 8, complete
 * most jobs (one by one or as a batch) and abandon about 3% as if they had
 * crashed; once the queue looks empty the store's clock is moved past the
 * lease and the leasers drain again, so abandoned jobs come back with a
 * higher epoch.
 *
 * Checked: no job is leased twice while a lease on it is live (each lease of
 * a job starts, by the store's clock, at or after the previous one expired,
 * and epochs rise by one); every job is completed exactly once; none is
 * missing or left queued or running. Prints the figures.
 */

import { performance } from 'node:perf_hooks';
import { afterAll, describe, expect, it } from 'vitest';
import type { CompleteOutcome, EnqueueParams, LeasedJob, Store } from '../../src/store/store.js';
import { backends, drainAfterAll, startCoordinator } from '../support/http-fixtures.js';
import { seededRandom } from '../../bench/seeded-random.js';

const JOBS = 10_000;
const LEASERS = 64;
const ABANDON_RATE = 0.03;
const TENANT = 'drain';

const lines: string[] = [];
afterAll(() => {
  for (const line of lines) console.log(line);
});

interface LeaseRecord {
  readonly epoch: number;
  readonly startsAt: number;
  readonly expiresAt: number;
  readonly workerId: string;
}

describe.each(backends)('drain ($name)', (backend) => {
  drainAfterAll(backend);

  it(`${JOBS} jobs, ${LEASERS} concurrent leasers: no job leased twice while its lease is live, none missing`, { timeout: 180_000 }, async () => {
    const h = await startCoordinator({}, { backend, manualClock: true });
    const store: Store = h.store;
    // SQLite moves a manual clock; PostgreSQL's clock is the server's, so its leases are short and the test waits them out.
    const leaseMs = backend.name === 'sqlite' ? 60_000 : 4_000;
    const seed = Date.now() % 1_000_000;
    const next = seededRandom(seed);
    try {
      const started = performance.now();
      for (let offset = 0; offset < JOBS; offset += 1000) {
        const batch: EnqueueParams[] = Array.from({ length: Math.min(1000, JOBS - offset) }, (_, i) => ({
          tenant: TENANT,
          owner: 'alice',
          idempotencyKey: `drain-${offset + i}`,
          requestHash: `drain-${offset + i}`,
          kind: 'drain',
          payload: { n: offset + i },
          maxAttempts: 10,
          priority: (offset + i) % 3,
          runAfter: null,
          deadlineMs: null,
          payloadBytes: 10,
        }));
        const outcomes = await store.jobEnqueueMany(batch);
        expect(outcomes.every((o) => o.kind === 'created')).toBe(true);
      }
      const enqueuedIn = performance.now() - started;

      const leases = new Map<string, LeaseRecord[]>();
      const completions = new Map<string, number>();
      let leaseCalls = 0;
      let abandoned = 0;
      let staleCompletes = 0;

      const record = (job: LeasedJob, workerId: string): void => {
        const list = leases.get(job.id) ?? [];
        list.push({ epoch: job.epoch, startsAt: job.leaseExpiresAt - leaseMs, expiresAt: job.leaseExpiresAt, workerId });
        leases.set(job.id, list);
      };
      const settle = (id: string, outcome: CompleteOutcome | undefined): void => {
        if (outcome?.kind === 'completed' && !outcome.replayed) completions.set(id, (completions.get(id) ?? 0) + 1);
        else if (outcome?.kind === 'rejected' && outcome.code === 'stale_lease') staleCompletes += 1;
        else throw new Error(`unexpected completion of ${id}: ${JSON.stringify(outcome)}`);
      };

      const leaser = async (index: number, abandonRate: number): Promise<void> => {
        const workerId = `w${index}`;
        for (let round = 0; ; round++) {
          leaseCalls += 1;
          const jobs = await store.jobLease({ tenant: TENANT, workerId, leaseMs, max: 1 + ((index + round) % 8) });
          if (jobs.length === 0) return;
          for (const job of jobs) record(job, workerId);
          const kept = jobs.filter(() => {
            const abandon = next() < abandonRate;
            if (abandon) abandoned += 1;
            return !abandon;
          });
          if (kept.length === 0) continue;
          if (round % 2 === 0) {
            const outcomes = await store.jobCompleteMany(kept.map((job) => ({ tenant: TENANT, id: job.id, token: job.token })));
            kept.forEach((job, i) => settle(job.id, outcomes[i]));
          } else {
            const outcomes = await Promise.all(kept.map((job) => store.jobComplete({ tenant: TENANT, id: job.id, token: job.token })));
            kept.forEach((job, i) => settle(job.id, outcomes[i]));
          }
        }
      };

      let phases = 0;
      for (;;) {
        phases += 1;
        await Promise.all(Array.from({ length: LEASERS }, (_, i) => leaser(i, phases === 1 ? ABANDON_RATE : 0)));
        const stats = await store.stats({ tenant: TENANT });
        if (stats.counts.running === 0 && stats.counts.queued === 0) break;
        if (phases >= 5) throw new Error(`still ${stats.counts.running} running and ${stats.counts.queued} queued after ${phases} phases`);
        // Abandoned leases run out: by the manual clock at once, by PostgreSQL's in real time.
        await h.time.advance(leaseMs + 50);
      }
      const seconds = (performance.now() - started) / 1000;

      let doubleLeases = 0;
      let releases = 0;
      for (const [id, list] of leases) {
        list.sort((a, b) => a.epoch - b.epoch);
        for (let i = 1; i < list.length; i++) {
          const before = list[i - 1] as LeaseRecord;
          const after = list[i] as LeaseRecord;
          releases += 1;
          if (after.epoch !== before.epoch + 1 || after.startsAt < before.expiresAt) {
            doubleLeases += 1;
            expect
              .soft(after.startsAt, `${id}: epoch ${after.epoch} (${after.workerId}) leased while epoch ${before.epoch} (${before.workerId}) was live`)
              .toBeGreaterThanOrEqual(before.expiresAt);
          }
        }
      }
      const missing = JOBS - leases.size;
      const completedTwice = [...completions.values()].filter((n) => n > 1).length;
      const stats = await store.stats({ tenant: TENANT });
      lines.push(
        `drain (${backend.name}): ${JOBS} jobs, ${LEASERS} leasers, ${leaseCalls} lease calls, ${abandoned} abandoned and ${releases} leased again after expiry, ` +
          `${staleCompletes} stale completes refused, ${doubleLeases} leased twice while live, ${missing} missing, ${completedTwice} completed twice, ` +
          `${phases} phases, enqueue ${(enqueuedIn / 1000).toFixed(1)} s, total ${seconds.toFixed(1)} s (seed ${seed})`,
      );
      expect(doubleLeases).toBe(0);
      expect(missing).toBe(0);
      expect(completions.size).toBe(JOBS);
      expect(completedTwice).toBe(0);
      expect(stats.counts.succeeded).toBe(JOBS);
      expect(releases).toBeGreaterThanOrEqual(abandoned);
      expect(abandoned).toBeGreaterThan(0);
    } finally {
      await h.close();
    }
  });
});
