/**
 * Conformance: the counters behind GET /stats equal a recount of the stored
 * jobs and attempts after random histories (fast-check): enqueues of several
 * kinds, leases with and without a kinds filter, completions with results,
 * retried and dead failures, progress, checkpoints, cancels, requeues,
 * reconciles of unknown jobs and lease expiries, with children of earlier jobs
 * and keyed jobs among them (waiting, released, failed with dependency_failed),
 * results over the kind's limit, queued jobs that pass their deadline, and
 * retention deleting finished jobs with their attempts. Counts per status, the wait,
 * run, completion and attempt-run means, lease expirations, and the stored bytes.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { JobStatus } from '../../src/core/states.js';
import { JOB_STATUSES } from '../../src/core/states.js';
import type { JobListItem, LeasedJob, Store, TenantStats } from '../../src/store/store.js';
import { backends, enqueueParams, ERROR, IMMEDIATE_BACKOFF, TENANT, useBackend, waitUntilStoreTimePasses } from './harness.js';

const KINDS = ['a', 'b', 'c'] as const;
const PAYLOAD_BYTES = enqueueParams('any').payloadBytes;

type Step =
  | { readonly op: 'enqueue'; readonly kind: (typeof KINDS)[number]; readonly count: number; readonly flow: 'none' | 'parent' | 'key'; readonly pick: number }
  | { readonly op: 'lease'; readonly kinds: readonly string[]; readonly max: number; readonly shortLease: boolean }
  | { readonly op: 'handoff'; readonly kind: (typeof KINDS)[number]; readonly flow: 'none' | 'key'; readonly pick: number }
  | { readonly op: 'complete'; readonly pick: number; readonly resultBytes: number }
  | { readonly op: 'fail'; readonly pick: number; readonly retryable: boolean }
  | { readonly op: 'progress'; readonly pick: number }
  | { readonly op: 'checkpoint'; readonly pick: number }
  | { readonly op: 'effect'; readonly pick: number }
  | { readonly op: 'cancel'; readonly pick: number }
  | { readonly op: 'requeue'; readonly pick: number }
  | { readonly op: 'reconcile'; readonly pick: number; readonly outcome: 'succeeded' | 'dead' | 'requeue' }
  | { readonly op: 'expire' }
  | { readonly op: 'completeMany'; readonly count: number; readonly stale: boolean; readonly resultBytes: number }
  | { readonly op: 'tooLarge'; readonly pick: number }
  | { readonly op: 'deadline'; readonly kind: (typeof KINDS)[number] }
  | { readonly op: 'purge'; readonly status: 'succeeded' | 'cancelled' | 'dead'; readonly limit: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    op: fc.constant('enqueue' as const),
    kind: fc.constantFrom(...KINDS),
    count: fc.integer({ min: 1, max: 4 }),
    flow: fc.constantFrom('none' as const, 'parent' as const, 'key' as const),
    pick: fc.nat(),
  }),
  fc.record({ op: fc.constant('lease' as const), kinds: fc.subarray([...KINDS]), max: fc.integer({ min: 1, max: 3 }), shortLease: fc.boolean() }),
  fc.record({ op: fc.constant('handoff' as const), kind: fc.constantFrom(...KINDS), flow: fc.constantFrom('none' as const, 'key' as const), pick: fc.nat() }),
  fc.record({ op: fc.constant('complete' as const), pick: fc.nat(), resultBytes: fc.integer({ min: 0, max: 64 }) }),
  fc.record({ op: fc.constant('fail' as const), pick: fc.nat(), retryable: fc.boolean() }),
  fc.record({ op: fc.constant('progress' as const), pick: fc.nat() }),
  fc.record({ op: fc.constant('checkpoint' as const), pick: fc.nat() }),
  fc.record({ op: fc.constant('effect' as const), pick: fc.nat() }),
  fc.record({ op: fc.constant('cancel' as const), pick: fc.nat() }),
  fc.record({ op: fc.constant('requeue' as const), pick: fc.nat() }),
  fc.record({ op: fc.constant('reconcile' as const), pick: fc.nat(), outcome: fc.constantFrom('succeeded' as const, 'dead' as const, 'requeue' as const) }),
  fc.constant({ op: 'expire' as const }),
  fc.record({
    op: fc.constant('completeMany' as const),
    count: fc.integer({ min: 1, max: 4 }),
    stale: fc.boolean(),
    resultBytes: fc.integer({ min: 0, max: 64 }),
  }),
  fc.record({ op: fc.constant('tooLarge' as const), pick: fc.nat() }),
  fc.record({ op: fc.constant('deadline' as const), kind: fc.constantFrom(...KINDS) }),
  fc.record({
    op: fc.constant('purge' as const),
    status: fc.constantFrom('succeeded' as const, 'cancelled' as const, 'dead' as const),
    limit: fc.integer({ min: 1, max: 3 }),
  }),
);

async function allJobs(store: Store): Promise<JobListItem[]> {
  const jobs: JobListItem[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.jobList({ scope: { tenant: TENANT }, limit: 100, ...(cursor === undefined ? {} : { cursor }) });
    jobs.push(...page.jobs);
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined);
  return jobs;
}

const mean = (values: readonly number[]): number | null => (values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length);

/** The figures of TenantStats that a recount of the stored rows gives. */
async function recount(
  store: Store,
): Promise<Pick<TenantStats, 'counts' | 'meanWaitMs' | 'meanRunMs' | 'meanTimeToCompletionMs' | 'meanAttemptRunMs' | 'leaseExpirations' | 'storageBytes'>> {
  const jobs = await allJobs(store);
  const counts = Object.fromEntries(JOB_STATUSES.map((status) => [status, 0])) as Record<JobStatus, number>;
  const waits: number[] = [];
  const runs: number[] = [];
  const completions: number[] = [];
  const attemptRuns: number[] = [];
  let expirations = 0;
  let storage = 0;
  const jsonBytes = (value: unknown): number => (value === null || value === undefined ? 0 : Buffer.byteLength(JSON.stringify(value)));
  for (const job of jobs) {
    counts[job.status]++;
    // Stored bytes: the payload, checkpoint state and progress as JSON text, and the result's body.
    const record = await store.jobGet({ scope: { tenant: TENANT }, id: job.id });
    storage += PAYLOAD_BYTES + jsonBytes(record?.checkpoint?.state) + jsonBytes(record?.progress) + (record?.result?.body.length ?? 0);
    if (job.startedAt !== null) waits.push(job.startedAt - job.createdAt);
    if (job.status === 'succeeded' && job.startedAt !== null && job.finishedAt !== null) {
      runs.push(job.finishedAt - job.startedAt);
      completions.push(job.finishedAt - job.createdAt);
    }
    for (const attempt of (await store.jobAttempts({ scope: { tenant: TENANT }, id: job.id })) ?? []) {
      if (attempt.endedAt !== null) attemptRuns.push(attempt.endedAt - attempt.startedAt);
      // Every attempt the reaper ended is a lease that ran out: 'expired', or 'cancelled' (a cancel asked while it
      // ran) and 'deadline' (its deadline passed with it); no other ending stores those two outcomes (lease-endings.ts).
      if (attempt.outcome === 'expired' || attempt.outcome === 'cancelled' || attempt.outcome === 'deadline') expirations++;
    }
  }
  return {
    counts,
    meanWaitMs: mean(waits),
    meanRunMs: mean(runs),
    meanTimeToCompletionMs: mean(completions),
    meanAttemptRunMs: mean(attemptRuns),
    leaseExpirations: expirations,
    storageBytes: storage,
  };
}

function expectClose(actual: number | null, expected: number | null, label: string): void {
  if (expected === null) expect(actual, label).toBeNull();
  else expect(actual, label).toBeCloseTo(expected, 6);
}

describe.each(backends)('store conformance ($label): counters', (factory) => {
  const backend = useBackend(factory);

  it('keeps counts and sums equal to a recount of the stored jobs after random histories', async () => {
    let history = 0;
    // Lease expirations are a running count that retention does not take back; the recount reads them from attempts,
    // which retention deletes: what each purge took from the recount is added back.
    let purgedExpirations = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 5, maxLength: 30 }), async (steps) => {
        const store = backend.store;
        const run = history++;
        const leases: LeasedJob[] = [];
        const ids: string[] = [];
        const pickLease = (pick: number): LeasedJob | undefined => (leases.length === 0 ? undefined : leases.splice(pick % leases.length, 1)[0]);
        const peekLease = (pick: number): LeasedJob | undefined => leases[pick % Math.max(1, leases.length)];
        const pickId = (pick: number): string | undefined => ids[pick % Math.max(1, ids.length)];
        let enqueued = 0;
        for (const s of steps) {
          switch (s.op) {
            case 'enqueue': {
              // Waiting jobs too: children of an earlier job (released, or failed with dependency_failed) and keyed jobs.
              const parent = pickId(s.pick);
              const flow =
                s.flow === 'parent' && parent !== undefined ? { dependsOn: [parent] } : s.flow === 'key' ? { concurrencyKey: `key-${s.pick % 2}` } : {};
              const batch = Array.from({ length: s.count }, () => enqueueParams(`h${run}-${enqueued++}`, { kind: s.kind, maxAttempts: 2, ...flow }));
              for (const outcome of await store.jobEnqueueMany(batch)) if (outcome.kind === 'created') ids.push(outcome.job.id);
              break;
            }
            case 'handoff': {
              // An enqueue leased at once to a waiting poll, where the store has it (a keyed job is queued instead).
              const params = enqueueParams(`h${run}-${enqueued++}`, {
                kind: s.kind,
                maxAttempts: 2,
                ...(s.flow === 'key' ? { concurrencyKey: `key-${s.pick % 2}` } : {}),
              });
              const answer = store.jobEnqueueLeased === undefined ? null : await store.jobEnqueueLeased(params, { workerId: 'w', leaseMs: 60_000 });
              const outcome = answer === null ? await store.jobEnqueue(params) : answer.outcome;
              if (outcome.kind === 'created') ids.push(outcome.job.id);
              if (answer?.leased != null) leases.push(answer.leased);
              break;
            }
            case 'lease':
              leases.push(
                ...(await store.jobLease({
                  tenant: TENANT,
                  workerId: 'w',
                  leaseMs: s.shortLease ? 1 : 60_000,
                  max: s.max,
                  ...(s.kinds.length > 0 ? { kinds: s.kinds } : {}),
                })),
              );
              break;
            case 'complete': {
              const lease = pickLease(s.pick);
              if (lease !== undefined)
                await store.jobComplete({
                  tenant: TENANT,
                  id: lease.id,
                  token: lease.token,
                  result: { contentType: 'text/plain', body: Buffer.alloc(s.resultBytes, 120) },
                });
              break;
            }
            case 'fail': {
              const lease = pickLease(s.pick);
              if (lease !== undefined)
                await store.jobFail({ tenant: TENANT, id: lease.id, token: lease.token, error: ERROR, retryable: s.retryable, backoff: IMMEDIATE_BACKOFF });
              break;
            }
            case 'progress': {
              const lease = peekLease(s.pick);
              if (lease !== undefined)
                await store.jobRenew({ tenant: TENANT, id: lease.id, token: lease.token, leaseMs: 60_000, progress: { done: s.pick % 100 } });
              break;
            }
            case 'checkpoint': {
              const lease = peekLease(s.pick);
              if (lease !== undefined)
                await store.jobCheckpoint({ tenant: TENANT, id: lease.id, token: lease.token, checkpoint: { step: 1, state: { at: s.pick % 10 } } });
              break;
            }
            case 'effect': {
              const lease = peekLease(s.pick);
              if (lease !== undefined) await store.jobMarkEffectStarted({ tenant: TENANT, id: lease.id, token: lease.token });
              break;
            }
            case 'cancel': {
              const id = pickId(s.pick);
              if (id !== undefined) await store.jobCancel({ scope: { tenant: TENANT }, id });
              break;
            }
            case 'requeue': {
              const id = pickId(s.pick);
              if (id !== undefined) await store.jobRequeue({ scope: { tenant: TENANT }, id });
              break;
            }
            case 'reconcile': {
              const id = pickId(s.pick);
              if (id !== undefined) await store.jobReconcile({ scope: { tenant: TENANT }, id, outcome: s.outcome });
              break;
            }
            case 'completeMany': {
              // Several completions in one call (one statement per step on SQLite), one of them stale when asked.
              const batch = leases.splice(0, s.count);
              const completions = batch.map((lease, i) => ({
                tenant: TENANT,
                id: lease.id,
                token: s.stale && i === 0 ? 'not-the-token' : lease.token,
                result: { contentType: 'text/plain', body: Buffer.alloc(s.resultBytes, 120) },
              }));
              if (completions.length > 0) await store.jobCompleteMany(completions);
              if (s.stale && batch[0] !== undefined) leases.push(batch[0]);
              break;
            }
            case 'tooLarge': {
              // A result over the kind's limit: dead with result_too_large, no result stored.
              const lease = pickLease(s.pick);
              if (lease !== undefined)
                await store.jobComplete({
                  tenant: TENANT,
                  id: lease.id,
                  token: lease.token,
                  result: { contentType: 'text/plain', body: Buffer.alloc(8, 120) },
                  maxResultBytes: 4,
                });
              break;
            }
            case 'deadline': {
              // A queued job whose deadline passes before any lease: the reaper ends it dead.
              const job = await store.jobEnqueue(enqueueParams(`h${run}-${enqueued++}`, { kind: s.kind, deadlineMs: 1 }));
              if (job.kind === 'created') ids.push(job.job.id);
              await waitUntilStoreTimePasses(store, (await store.now()) + 2);
              await store.jobReapExpired();
              break;
            }
            case 'purge': {
              // Retention deletes finished jobs with their attempts and results: they leave the counters.
              const before = (await recount(store)).leaseExpirations;
              await store.jobPurge({ status: s.status, olderThanMs: 0, kindRetention: false, tenant: TENANT, limit: s.limit });
              purgedExpirations += before - (await recount(store)).leaseExpirations;
              // A purged job is no one's parent any more: later enqueues name only the jobs still stored.
              const stored: string[] = [];
              for (const id of ids) if ((await store.jobGet({ scope: { tenant: TENANT }, id })) !== null) stored.push(id);
              ids.splice(0, ids.length, ...stored);
              break;
            }
            case 'expire': {
              // Short leases (1 ms) run out; the reaper ends them (queued, dead, or unknown after an effect).
              await waitUntilStoreTimePasses(store, (await store.now()) + 2);
              await store.jobReapExpired();
              break;
            }
          }
        }
        const [stats, expected] = [await store.stats({ tenant: TENANT }), await recount(store)];
        expect(stats.counts).toEqual(expected.counts);
        expectClose(stats.meanWaitMs, expected.meanWaitMs, 'meanWaitMs');
        expectClose(stats.meanRunMs, expected.meanRunMs, 'meanRunMs');
        expectClose(stats.meanTimeToCompletionMs, expected.meanTimeToCompletionMs, 'meanTimeToCompletionMs');
        expectClose(stats.meanAttemptRunMs, expected.meanAttemptRunMs, 'meanAttemptRunMs');
        expect(stats.leaseExpirations).toBe(expected.leaseExpirations + purgedExpirations);
        expect(stats.storageBytes).toBe(expected.storageBytes);
      }),
      { numRuns: factory.name === 'postgres' ? 12 : 25 },
    );
  }, 120_000);
});
