/**
 * Conformance, part 3: what happens around a lease — expiry, deadlines, the
 * unknown state and reconciliation, checkpoints, cancellation, requeue and the
 * attempt history. Runs against every backend in test/support/backends.ts.
 */

import { describe, expect, it } from 'vitest';
import {
  backends,
  enqueue,
  ERROR,
  expireLease,
  getJob,
  IMMEDIATE_BACKOFF,
  leaseOne,
  leaseParams,
  OWNER,
  shortenLease,
  TENANT,
  useBackend,
  waitFor,
  waitUntilStoreTimePasses,
} from './harness.js';

describe.each(backends)('store conformance ($label): lifecycle', (factory) => {
  const backend = useBackend(factory);

  it('requeues an expired lease, counting the attempt', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k', { maxAttempts: 3 });
    const lease = await leaseOne(store, { leaseMs: 50 });
    await waitUntilStoreTimePasses(store, lease.leaseExpiresAt);
    const reaped = await store.jobReapExpired();
    expect(reaped).toMatchObject({ requeued: 1, dead: 0, unknown: 0, cancelled: 0 });
    expect(await getJob(store, job.id)).toMatchObject({
      status: 'queued',
      attempts: 1,
      leaseExpiresAt: null,
      lastError: { code: 'lease_expired', class: 'lease_expired' },
    });
    expect((await store.stats({ tenant: TENANT })).leaseExpirations).toBe(1);
    expect(await store.jobReapExpired()).toMatchObject({ requeued: 0, dead: 0 });
  });

  it('lets a lease call claim an expired job at once, without the reaper', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k');
    const first = await leaseOne(store, { leaseMs: 50, workerId: 'crashed' });
    const second = await waitFor(
      'the expired job to be leased again',
      async () => {
        const jobs = await store.jobLease(leaseParams({ workerId: 'rescuer' }));
        return jobs[0];
      },
      { timeoutMs: 10_000, intervalMs: 10 },
    );
    expect(second).toMatchObject({ id: job.id, attempt: 2, epoch: first.epoch + 1 });
    const attempts = await store.jobAttempts({ scope: { tenant: TENANT }, id: job.id });
    expect(attempts?.map((a) => [a.workerId, a.outcome, a.errorCode])).toEqual([
      ['crashed', 'expired', 'lease_expired'],
      ['rescuer', null, null],
    ]);
  });

  it('makes a job dead with lease_expired when its last attempt expires', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k', { maxAttempts: 1 });
    const lease = await leaseOne(store, { leaseMs: 50 });
    await waitUntilStoreTimePasses(store, lease.leaseExpiresAt);
    expect(await store.jobReapExpired()).toMatchObject({ requeued: 0, dead: 1 });
    expect(await getJob(store, job.id)).toMatchObject({ status: 'dead', attempts: 1, lastError: { code: 'lease_expired', class: 'lease_expired' } });
  });

  it('makes a job unknown when its lease expires after an effect started, and never retries it', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k', { maxAttempts: 5 });
    const lease = await leaseOne(store);
    expect(await store.jobMarkEffectStarted({ tenant: TENANT, id: job.id, token: lease.token })).toEqual({ kind: 'ok' });
    expect(await store.jobMarkEffectStarted({ tenant: TENANT, id: job.id, token: 'stale' })).toEqual({ kind: 'rejected', code: 'stale_lease' });
    expect((await getJob(store, job.id)).effectStartedAt).not.toBeNull();
    await waitUntilStoreTimePasses(store, (await shortenLease(store, lease)).leaseExpiresAt);
    expect(await store.jobReapExpired()).toMatchObject({ unknown: 1, requeued: 0 });
    expect(await getJob(store, job.id)).toMatchObject({ status: 'unknown', lastError: { class: 'effect_unknown' } });
    expect(await store.jobLease(leaseParams())).toEqual([]);
    expect(await store.jobRequeue({ scope: { tenant: TENANT }, id: job.id })).toEqual({ kind: 'rejected', code: 'not_dead' });
    expect(await store.jobCancel({ scope: { tenant: TENANT }, id: job.id })).toEqual({ kind: 'rejected', code: 'invalid_state' });
  });

  it('makes a job unknown when it fails after declaring an effect', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k', { maxAttempts: 5 });
    const lease = await leaseOne(store);
    await store.jobMarkEffectStarted({ tenant: TENANT, id: job.id, token: lease.token });
    const params = { tenant: TENANT, id: job.id, token: lease.token, error: ERROR, retryable: true, backoff: IMMEDIATE_BACKOFF };
    expect(await store.jobFail(params)).toEqual({ kind: 'failed', status: 'unknown', runAfter: null, replayed: false, failureClass: 'effect_unknown' });
    expect(await store.jobFail(params)).toEqual({ kind: 'failed', status: 'unknown', runAfter: null, replayed: true, failureClass: null });
    expect(await getJob(store, job.id)).toMatchObject({ status: 'unknown', attempts: 1, lastError: { code: ERROR.code, class: 'effect_unknown' } });
    expect(await store.jobLease(leaseParams())).toEqual([]);
  });

  it('reconciles an unknown job to succeeded, dead or queued', async () => {
    const store = backend.store;
    const ids: string[] = [];
    for (const key of ['s', 'd', 'r']) {
      const job = await enqueue(store, key, { maxAttempts: 1 });
      const lease = await leaseOne(store);
      expect(await store.jobMarkEffectStarted({ tenant: TENANT, id: job.id, token: lease.token })).toEqual({ kind: 'ok' });
      await expireLease(store, await shortenLease(store, lease));
      ids.push(job.id);
    }
    const [s, d, r] = ids as [string, string, string];
    const scope = { tenant: TENANT };
    expect(await store.jobReconcile({ scope, id: s, outcome: 'succeeded' })).toMatchObject({
      kind: 'reconciled',
      job: { status: 'succeeded', lastError: null },
    });
    expect(await store.jobReconcile({ scope, id: d, outcome: 'dead' })).toMatchObject({
      kind: 'reconciled',
      job: { status: 'dead', lastError: { class: 'reconciled_dead' } },
    });
    const requeued = await store.jobReconcile({ scope, id: r, outcome: 'requeue' });
    expect(requeued).toMatchObject({ kind: 'reconciled', job: { status: 'queued', attempts: 0, effectStartedAt: null } });
    expect(await store.jobReconcile({ scope, id: s, outcome: 'dead' })).toEqual({ kind: 'rejected', code: 'not_unknown' });
    expect(await store.jobReconcile({ scope: { tenant: 'tenant-b' }, id: r, outcome: 'dead' })).toEqual({ kind: 'rejected', code: 'not_found' });
    const lease = await leaseOne(store);
    expect(lease).toMatchObject({ id: r, attempt: 1 });
  });

  it('never leases a job past its deadline, and the reaper makes it dead', async () => {
    const store = backend.store;
    const now = await store.now();
    const job = await enqueue(store, 'k', { deadlineMs: 100, runAfter: now + 50 });
    const other = await enqueue(store, 'k2', { deadlineMs: 100, tenant: 'tenant-b' });
    if (job.deadlineAt === null || other.deadlineAt === null) throw new Error('expected deadlines');
    await waitUntilStoreTimePasses(store, Math.max(job.deadlineAt, other.deadlineAt));
    expect(await store.jobLease(leaseParams())).toEqual([]);
    expect(await store.jobLease(leaseParams({ tenant: 'tenant-b' }))).toEqual([]);
    await store.jobReapExpired();
    expect(await getJob(store, job.id)).toMatchObject({ status: 'dead', attempts: 0, lastError: { code: 'deadline_exceeded', class: 'deadline_exceeded' } });
    const otherJob = await store.jobGet({ scope: { tenant: 'tenant-b' }, id: other.id });
    expect(otherJob).toMatchObject({ status: 'dead', lastError: { code: 'deadline_exceeded' } });
  });

  it('counts queued jobs past their deadline in the reaper outcome', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k', { deadlineMs: 50 });
    await waitUntilStoreTimePasses(store, job.deadlineAt ?? 0);
    expect(await store.jobReapExpired()).toMatchObject({ deadlineExpired: 1 });
    expect((await getJob(store, job.id)).status).toBe('dead');
  });

  it('caps a lease at the deadline, refuses a completion after it, and ends the job deadline_exceeded', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k', { deadlineMs: 150 });
    const lease = await leaseOne(store, { leaseMs: 60_000 });
    expect(lease.deadlineAt).toBe(job.deadlineAt);
    expect(lease.leaseExpiresAt).toBeLessThanOrEqual(job.deadlineAt ?? 0);
    await waitUntilStoreTimePasses(store, job.deadlineAt ?? 0);
    const late = await store.jobComplete({ tenant: TENANT, id: job.id, token: lease.token, result: { contentType: 'text/plain', body: Buffer.from('late') } });
    expect(late).toEqual({ kind: 'rejected', code: 'deadline_exceeded' });
    expect(await getJob(store, job.id)).toMatchObject({ result: null });
    expect(await store.jobRenew({ tenant: TENANT, id: job.id, token: lease.token, leaseMs: 1_000 })).toMatchObject({ kind: 'rejected' });
    expect(await store.jobReapExpired()).toMatchObject({ dead: 1 });
    expect(await getJob(store, job.id)).toMatchObject({ status: 'dead', lastError: { code: 'deadline_exceeded', class: 'deadline_exceeded' } });
  });

  it('never renews a lease past the deadline', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k', { deadlineMs: 20_000 });
    const lease = await leaseOne(store, { leaseMs: 1_000 });
    const renewed = await store.jobRenew({ tenant: TENANT, id: job.id, token: lease.token, leaseMs: 600_000 });
    expect(renewed).toEqual({ kind: 'renewed', leaseExpiresAt: job.deadlineAt });
  });

  it('makes a job dead instead of retrying it after its deadline', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k', { deadlineMs: 5_000, maxAttempts: 5 });
    const lease = await leaseOne(store);
    // A delay of at least 5 s unless random() < 5e-6: the retry would land past the deadline.
    const backoff = { baseMs: 1_000_000_000, maxMs: 1_000_000_000 };
    const outcome = await store.jobFail({ tenant: TENANT, id: job.id, token: lease.token, error: ERROR, retryable: true, backoff });
    expect(outcome).toMatchObject({ kind: 'failed', status: 'dead', runAfter: null });
    expect(await getJob(store, job.id)).toMatchObject({ status: 'dead', lastError: { code: ERROR.code, class: 'deadline_exceeded' } });
  });

  it('gives a requeued job a fresh deadline', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k', { deadlineMs: 100 });
    await waitUntilStoreTimePasses(store, job.deadlineAt ?? 0);
    await store.jobReapExpired();
    expect((await getJob(store, job.id)).status).toBe('dead');
    const requeued = await store.jobRequeue({ scope: { tenant: TENANT }, id: job.id });
    if (requeued.kind !== 'requeued') throw new Error('expected requeued');
    expect(requeued.job.deadlineAt ?? 0).toBeGreaterThan(job.deadlineAt ?? 0);
    expect(requeued.job.deadlineAt).toBe(requeued.job.runAfter + 100);
    expect((await leaseOne(store)).id).toBe(job.id);
  });

  it('stores a checkpoint under the live token and hands it to the next lease', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k');
    const lease = await leaseOne(store);
    expect(await store.jobCheckpoint({ tenant: TENANT, id: job.id, token: lease.token, checkpoint: { step: 1, state: { rows: 100 } } })).toEqual({
      kind: 'ok',
    });
    expect(await store.jobCheckpoint({ tenant: TENANT, id: job.id, token: lease.token, checkpoint: { step: 2, state: { rows: 200 } } })).toEqual({
      kind: 'ok',
    });
    expect(await store.jobCheckpoint({ tenant: TENANT, id: job.id, token: 'stale', checkpoint: { step: 9, state: null } })).toEqual({
      kind: 'rejected',
      code: 'stale_lease',
    });
    expect(await store.jobCheckpoint({ tenant: 'tenant-b', id: job.id, token: lease.token, checkpoint: { step: 9, state: null } })).toEqual({
      kind: 'rejected',
      code: 'not_found',
    });
    expect((await getJob(store, job.id)).checkpoint).toEqual({ step: 2, state: { rows: 200 } });
    await expireLease(store, await shortenLease(store, lease));
    expect(await store.jobCheckpoint({ tenant: TENANT, id: job.id, token: lease.token, checkpoint: { step: 3, state: null } })).toEqual({
      kind: 'rejected',
      code: 'stale_lease',
    });
    const next = await leaseOne(store);
    expect(next.checkpoint).toEqual({ step: 2, state: { rows: 200 } });
  });

  it('cancels a queued job at once', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k');
    const outcome = await store.jobCancel({ scope: { tenant: TENANT, owner: OWNER }, id: job.id });
    expect(outcome).toMatchObject({ kind: 'cancelled', job: { status: 'cancelled', lastError: { class: 'cancelled' } } });
    expect(outcome.kind === 'cancelled' ? outcome.job.finishedAt : null).not.toBeNull();
    expect(await store.jobCancel({ scope: { tenant: TENANT }, id: job.id })).toMatchObject({ kind: 'cancelled' });
    expect(await store.jobLease(leaseParams())).toEqual([]);
    expect(await store.jobCancel({ scope: { tenant: TENANT, owner: 'user-2' }, id: job.id })).toEqual({ kind: 'rejected', code: 'not_found' });
  });

  it('marks a running job, refuses its next renew, and ends it cancelled on fail', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k');
    const lease = await leaseOne(store);
    expect(await store.jobCancel({ scope: { tenant: TENANT }, id: job.id })).toMatchObject({
      kind: 'cancel_requested',
      job: { status: 'running', cancelRequested: true },
    });
    expect(await store.jobRenew({ tenant: TENANT, id: job.id, token: lease.token, leaseMs: 30_000 })).toEqual({ kind: 'rejected', code: 'cancelled' });
    const failed = await store.jobFail({
      tenant: TENANT,
      id: job.id,
      token: lease.token,
      error: { code: 'aborted', message: 'cancelled' },
      retryable: true,
      backoff: IMMEDIATE_BACKOFF,
    });
    expect(failed).toMatchObject({ kind: 'failed', status: 'cancelled' });
    expect(await getJob(store, job.id)).toMatchObject({ status: 'cancelled', lastError: { code: 'aborted', class: 'cancelled' } });
  });

  it('ends a cancel-requested job cancelled when its lease expires', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k');
    const lease = await shortenLease(store, await leaseOne(store));
    expect(await store.jobCancel({ scope: { tenant: TENANT }, id: job.id })).toMatchObject({ kind: 'cancel_requested' });
    await waitUntilStoreTimePasses(store, lease.leaseExpiresAt);
    expect(await store.jobReapExpired()).toMatchObject({ cancelled: 1 });
    expect(await getJob(store, job.id)).toMatchObject({ status: 'cancelled', lastError: { class: 'cancelled' } });
  });

  it('refuses to cancel a finished job', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k');
    const lease = await leaseOne(store);
    await store.jobComplete({ tenant: TENANT, id: job.id, token: lease.token });
    expect(await store.jobCancel({ scope: { tenant: TENANT }, id: job.id })).toEqual({ kind: 'rejected', code: 'invalid_state' });
  });

  it('requeues only dead jobs, with a fresh attempt budget', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k', { maxAttempts: 1 });
    expect(await store.jobRequeue({ scope: { tenant: TENANT }, id: job.id })).toEqual({ kind: 'rejected', code: 'not_dead' });
    const lease = await leaseOne(store);
    await store.jobFail({ tenant: TENANT, id: job.id, token: lease.token, error: ERROR, retryable: false, backoff: IMMEDIATE_BACKOFF });
    expect(await store.jobRequeue({ scope: { tenant: 'tenant-b' }, id: job.id })).toEqual({ kind: 'rejected', code: 'not_found' });
    const requeued = await store.jobRequeue({ scope: { tenant: TENANT }, id: job.id, maxAttempts: 4 });
    expect(requeued).toMatchObject({ kind: 'requeued', job: { status: 'queued', attempts: 0, maxAttempts: 4, finishedAt: null } });
    const again = await leaseOne(store);
    expect(again).toMatchObject({ id: job.id, attempt: 1, maxAttempts: 4, epoch: 2 });
  });

  it('records one attempt row per lease with its outcome', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k');
    const first = await leaseOne(store, { workerId: 'w1' });
    await store.jobFail({ tenant: TENANT, id: job.id, token: first.token, error: ERROR, retryable: true, backoff: IMMEDIATE_BACKOFF });
    const second = await leaseOne(store, { workerId: 'w2' });
    await store.jobComplete({ tenant: TENANT, id: job.id, token: second.token });
    const attempts = await store.jobAttempts({ scope: { tenant: TENANT, owner: OWNER }, id: job.id });
    expect(attempts).toHaveLength(2);
    expect(attempts?.[0]).toMatchObject({ attempt: 1, epoch: 1, workerId: 'w1', outcome: 'failed', errorCode: ERROR.code });
    expect(attempts?.[1]).toMatchObject({ attempt: 2, epoch: 2, workerId: 'w2', outcome: 'succeeded', errorCode: null });
    for (const attempt of attempts ?? []) {
      expect(attempt.endedAt).not.toBeNull();
      expect(attempt.endedAt ?? 0).toBeGreaterThanOrEqual(attempt.startedAt);
    }
    expect(await store.jobAttempts({ scope: { tenant: TENANT, owner: 'user-2' }, id: job.id })).toBeNull();
  });
});
