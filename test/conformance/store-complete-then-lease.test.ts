/**
 * Conformance: jobCompleteManyThenLease on every backend. The completions are
 * applied first and the lease after them (a maxConcurrent slot they free is
 * leased in the same call), each outcome is what jobCompleteMany answers
 * (a stale token is refused and changes nothing), the leased jobs are fenced
 * like any lease (epoch raised, a fresh token), and the counters behind
 * /stats move for both.
 */

import { describe, expect, it } from 'vitest';
import { kindParams } from '../support/kind-records.js';
import { backends, enqueue, getJob, leaseParams, TENANT, useBackend } from './harness.js';

describe.each(backends)('store conformance ($label): completions that carry the next lease', (factory) => {
  const backend = useBackend(factory);

  it('completes first, then leases the slot the completion freed; a stale token is refused and changes nothing', async () => {
    const store = backend.store;
    await store.kindUpsert({ ...kindParams(TENANT, 'mail', null), maxConcurrent: 1 });
    const first = await enqueue(store, 'c-1', { kind: 'mail' });
    const second = await enqueue(store, 'c-2', { kind: 'mail' });
    const third = await enqueue(store, 'c-3', { kind: 'mail' });
    const [running] = await store.jobLease(leaseParams({ kinds: ['mail'], max: 3 }));
    expect(running?.id).toBe(first.id);
    // The kind's slot is taken: a plain lease gets nothing.
    expect(await store.jobLease(leaseParams({ kinds: ['mail'], max: 3 }))).toEqual([]);

    const answer = await store.jobCompleteManyThenLease(
      [
        { tenant: TENANT, id: first.id, token: running?.token ?? '' },
        { tenant: TENANT, id: second.id, token: 'not-a-live-token' },
      ],
      leaseParams({ kinds: ['mail'], max: 3 }),
    );
    expect(answer.outcomes.map((outcome) => outcome.kind)).toEqual(['completed', 'rejected']);
    expect(answer.jobs.map((job) => job.id)).toEqual([second.id]);
    const next = answer.jobs[0];
    expect(next?.epoch).toBe(1);
    expect(next?.attempt).toBe(1);

    expect((await getJob(store, first.id)).status).toBe('succeeded');
    expect(await getJob(store, second.id)).toMatchObject({ status: 'running', epoch: 1, attempts: 1 });
    expect((await getJob(store, third.id)).status).toBe('queued');
    const stats = await store.stats({ tenant: TENANT });
    expect(stats.counts).toMatchObject({ succeeded: 1, running: 1, queued: 1 });

    // The carried lease's token completes its job; the first job's old token does not.
    expect(await store.jobComplete({ tenant: TENANT, id: second.id, token: running?.token ?? '' })).toMatchObject({ kind: 'rejected' });
    expect(await store.jobComplete({ tenant: TENANT, id: second.id, token: next?.token ?? '' })).toMatchObject({ kind: 'completed' });
  });

  it('leases when there is nothing to complete, and answers no jobs when none is available', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'e-1', { kind: 'k' });
    const first = await store.jobCompleteManyThenLease([], leaseParams({ kinds: ['k'], max: 2 }));
    expect(first.outcomes).toEqual([]);
    expect(first.jobs.map((leased) => leased.id)).toEqual([job.id]);
    const second = await store.jobCompleteManyThenLease(
      [{ tenant: TENANT, id: job.id, token: first.jobs[0]?.token ?? '' }],
      leaseParams({ kinds: ['k'], max: 2 }),
    );
    expect(second.outcomes.map((outcome) => outcome.kind)).toEqual(['completed']);
    expect(second.jobs).toEqual([]);
    expect((await store.stats({ tenant: TENANT })).counts).toMatchObject({ succeeded: 1, running: 0, queued: 0 });
  });
});
