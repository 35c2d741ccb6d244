/**
 * A store that fails 3% of its calls (seeded, printed), half of them after
 * the change was committed, under a real load: producers enqueue 300 jobs
 * with Idempotency-Keys, four workers lease, record each execution in an
 * effects ledger and complete with their lease token, everyone retrying
 * 503s at once. Every answer must be one the protocol allows (2xx, 409
 * stale_lease, 503 store_unavailable with Retry-After) and never a 500.
 * A retry after a failure that came after the commit gets the original
 * outcome: the enqueue is replayed with the same job, the complete answers
 * succeeded. At the end, with the faults off, every accepted job is there,
 * succeeded, and its result names one ledger execution under its final fence.
 */

import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { buildCoordinator } from '../../src/coordinator/app.js';
import { backends, type BackendInstance } from '../support/backends.js';
import { FlakyStore, faultSeed, type InjectedFault } from '../support/flaky-store.js';
import { bearer, createKey, errorCode } from '../support/http-fixtures.js';

const JOBS = 300;
const PRODUCERS = 4;
const WORKERS = 4;
const FAILURE_RATE = 0.03;
const LEASE_MS = 2_000;

interface Execution {
  readonly worker: string;
  readonly fence: number;
}

/** Every answer seen, by route, so the test can say which were allowed. */
class Answers {
  readonly byRoute = new Map<string, Map<string, number>>();
  readonly unexpected: string[] = [];

  record(route: string, response: LightMyRequestResponse, allowed: readonly string[]): string {
    const code = errorCode(response);
    const label = code === undefined ? String(response.statusCode) : `${response.statusCode} ${code}`;
    const counts = this.byRoute.get(route) ?? new Map<string, number>();
    counts.set(label, (counts.get(label) ?? 0) + 1);
    this.byRoute.set(route, counts);
    const unavailable = label === '503 store_unavailable' && response.headers['retry-after'] === '1';
    if (!unavailable && !allowed.includes(label)) this.unexpected.push(`${route}: ${label} ${response.body.slice(0, 200)}`);
    return label;
  }

  count(predicate: (label: string) => boolean): number {
    let total = 0;
    for (const counts of this.byRoute.values()) for (const [label, n] of counts) if (predicate(label)) total += n;
    return total;
  }
}

describe.each(backends)('$name', (factory) => {
  afterAll(() => factory.drain());

  it(`${factory.name}: answers ${FAILURE_RATE * 100}% injected store failures with 503 store_unavailable, never 500, and loses or repeats no committed outcome`, async () => {
    const instance: BackendInstance = await factory.create();
    const seed = faultSeed(`flaky store (${factory.name})`);
    const flaky = new FlakyStore(instance.store, { seed, failureRate: FAILURE_RATE });
    let app: FastifyInstance | undefined;
    try {
      const producerKey = await createKey(instance.store, 't1', 'alice', 'producer');
      const workerKey = await createKey(instance.store, 't1', 'worker', 'worker');
      const adminKey = await createKey(instance.store, 't1', 'root', 'admin');
      app = await buildCoordinator({ store: flaky, logger: false, config: { reaperIntervalMs: 0 } });
      const coordinator = app;
      const answers = new Answers();
      const startedAt = performance.now();

      /** Idempotency key -> the final 202 for it. */
      const acceptedByKey = new Map<string, { id: string; replayed: boolean }>();
      const produce = async (producer: number): Promise<void> => {
        for (let n = producer; n < JOBS; n += PRODUCERS) {
          const key = `job-${n}`;
          for (;;) {
            const response = await coordinator.inject({
              method: 'POST',
              url: '/jobs',
              headers: { ...bearer(producerKey), 'idempotency-key': key },
              payload: { kind: 'ledger', payload: { n } },
            });
            if (answers.record('enqueue', response, ['202']) !== '202') continue;
            acceptedByKey.set(key, { id: (response.json() as { id: string }).id, replayed: response.headers['idempotent-replayed'] === 'true' });
            break;
          }
        }
      };

      const ledger = new Map<string, Execution[]>();
      const succeeded = new Set<string>();
      /** `${id} ${token}` -> the answers to that lease's completes, in order. */
      const completes = new Map<string, string[]>();
      const work = async (worker: string): Promise<void> => {
        while (succeeded.size < JOBS) {
          if (performance.now() - startedAt > 40_000) throw new Error(`${worker} gave up with ${succeeded.size} of ${JOBS} jobs succeeded`);
          const leased = await coordinator.inject({
            method: 'POST',
            url: '/lease',
            headers: bearer(workerKey),
            payload: { workerId: worker, max: 5, leaseMs: LEASE_MS, waitMs: 200 },
          });
          if (answers.record('lease', leased, ['200', '204']) !== '200') continue;
          for (const job of (leased.json() as { jobs: { id: string; token: string; epoch: number }[] }).jobs) {
            const execution = { worker, fence: job.epoch };
            ledger.set(job.id, [...(ledger.get(job.id) ?? []), execution]);
            const seen: string[] = [];
            completes.set(`${job.id} ${job.token}`, seen);
            for (;;) {
              const response = await coordinator.inject({
                method: 'POST',
                url: `/jobs/${job.id}/complete`,
                headers: bearer(workerKey),
                payload: { token: job.token, result: execution },
              });
              const label = answers.record('complete', response, ['200', '409 stale_lease']);
              seen.push(label);
              if (label === '200') succeeded.add(job.id);
              if (label !== '503 store_unavailable') break;
            }
          }
        }
      };

      await Promise.all([...Array.from({ length: PRODUCERS }, (_, p) => produce(p)), ...Array.from({ length: WORKERS }, (_, w) => work(`w${w}`))]);
      const loadMs = performance.now() - startedAt;
      flaky.enabled = false;

      expect(answers.unexpected).toEqual([]);
      const faults = (method: string, phase: InjectedFault['phase']): InjectedFault[] => flaky.faults.filter((f) => f.method === method && f.phase === phase);
      expect(flaky.faults.filter((f) => f.phase === 'before').length).toBeGreaterThan(0);
      expect(flaky.faults.filter((f) => f.phase === 'after').length).toBeGreaterThan(0);

      // An enqueue committed before its 503 is replayed on retry, and only such an enqueue.
      const committedKeys = new Set(faults('jobEnqueue', 'after').map((f) => (f.params as { idempotencyKey: string }).idempotencyKey));
      const replayedKeys = new Set([...acceptedByKey].filter(([, answer]) => answer.replayed).map(([key]) => key));
      expect(replayedKeys).toEqual(committedKeys);
      // A complete committed before its 503 answers succeeded to the same token's retry, never stale_lease.
      for (const fault of faults('jobComplete', 'after')) {
        const params = fault.params as { id: string; token: string };
        const seen = completes.get(`${params.id} ${params.token}`) ?? [];
        expect(seen).not.toContain('409 stale_lease');
        expect(seen.at(-1)).toBe('200');
      }
      // A lease committed before its 503 never reached a worker: its jobs were leased again under a higher fence.
      const lostLeases = faults('jobLease', 'after').flatMap((f) => f.result as readonly { id: string; epoch: number }[]);

      // With the faults off: every accepted job, once, succeeded, its result one ledger execution under its final fence.
      const jobs = new Map<string, { status: string; epoch: number; result: Execution | null }>();
      let cursor: string | null = null;
      do {
        const page = await coordinator.inject({
          method: 'GET',
          url: `/jobs?limit=1000${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
          headers: bearer(adminKey),
        });
        expect(page.statusCode).toBe(200);
        const body = page.json() as { jobs: { id: string }[]; nextCursor: string | null };
        // A listing carries result summaries only: read each job for its result.
        for (const { id } of body.jobs) {
          const full = await coordinator.inject({ method: 'GET', url: `/jobs/${id}`, headers: bearer(adminKey) });
          jobs.set(id, full.json() as { status: string; epoch: number; result: Execution | null });
        }
        cursor = body.nextCursor;
      } while (cursor !== null);
      expect(jobs.size).toBe(JOBS);
      expect(new Set([...acceptedByKey.values()].map((a) => a.id))).toEqual(new Set(jobs.keys()));
      let reExecuted = 0;
      for (const [id, job] of jobs) {
        expect(job.status).toBe('succeeded');
        const runs = ledger.get(id) ?? [];
        if (runs.length > 1) reExecuted += 1;
        expect(job.result?.fence).toBe(job.epoch);
        expect(runs.filter((run) => run.worker === job.result?.worker && run.fence === job.result?.fence)).toHaveLength(1);
      }
      for (const lost of lostLeases) {
        expect(jobs.get(lost.id)?.epoch).toBeGreaterThan(lost.epoch);
        expect((ledger.get(lost.id) ?? []).some((run) => run.fence === lost.epoch)).toBe(false);
      }

      const unavailable = answers.count((label) => label.startsWith('503'));
      const byPhase = (phase: InjectedFault['phase']): string =>
        Object.entries(
          flaky.faults.filter((f) => f.phase === phase).reduce<Record<string, number>>((acc, f) => ({ ...acc, [f.method]: (acc[f.method] ?? 0) + 1 }), {}),
        )
          .map(([method, n]) => `${method} ${n}`)
          .join(', ');
      console.log(
        `flaky store (${factory.name}, seed ${seed}): ${JOBS} jobs in ${loadMs.toFixed(0)} ms; ${flaky.calls} store calls, ` +
          `${flaky.faults.length} failed (before: ${byPhase('before')}; after: ${byPhase('after')}); ` +
          `${answers.count(() => true)} answers, ${unavailable} were 503 store_unavailable, ${answers.count((l) => /^5/.test(l)) - unavailable} other 5xx; ` +
          `${replayedKeys.size} enqueues replayed after a committed 503; ${faults('jobComplete', 'after').length} completes answered succeeded after a committed 503; ` +
          `${lostLeases.length} jobs of committed-then-503 leases leased again later; ${reExecuted} jobs ran twice, each committed once; answers ${JSON.stringify(Object.fromEntries([...answers.byRoute].map(([route, counts]) => [route, Object.fromEntries(counts)])))}`,
      );
    } finally {
      await app?.close();
      await instance.cleanup();
    }
  });
});
