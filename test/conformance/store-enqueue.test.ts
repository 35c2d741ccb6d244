/**
 * Conformance, part 1: enqueue, idempotency, visibility by tenant and owner,
 * and listing. Runs against every backend in test/support/backends.ts.
 */

import { describe, expect, it } from 'vitest';
import { backends, enqueue, enqueueParams, OWNER, TENANT, useBackend } from './harness.js';

describe.each(backends)('store conformance ($label): enqueue and reads', (factory) => {
  const backend = useBackend(factory);

  it('enqueues a queued job stamped by the store clock', async () => {
    const before = await backend.store.now();
    const job = await enqueue(backend.store, 'k1', { priority: 7, maxAttempts: 4 });
    const after = await backend.store.now();
    expect(job).toMatchObject({
      tenant: TENANT,
      owner: OWNER,
      kind: 'email',
      payload: { to: 'k1@example.com', n: 1 },
      status: 'queued',
      attempts: 0,
      maxAttempts: 4,
      priority: 7,
      epoch: 0,
      leaseOwner: null,
      leaseExpiresAt: null,
      startedAt: null,
      finishedAt: null,
      lastError: null,
      cancelRequested: false,
      checkpoint: null,
      result: null,
      deadlineAt: null,
    });
    expect(job.createdAt).toBeGreaterThanOrEqual(before);
    expect(job.createdAt).toBeLessThanOrEqual(after);
    expect(job.runAfter).toBe(job.createdAt);
  });

  it('keeps a future runAfter and sets the deadline from acceptance', async () => {
    const now = await backend.store.now();
    const job = await enqueue(backend.store, 'k1', { runAfter: now + 60_000, deadlineMs: 120_000 });
    expect(job.runAfter).toBe(now + 60_000);
    expect(job.deadlineAt).toBe(job.createdAt + 120_000);
  });

  it('stores payloads exactly, including strings jsonb would refuse', async () => {
    const payload = { z: [1, 2.5, null, true], a: { nested: 'ünïcode \u0000 \ud800' }, big: 2 ** 52 };
    const job = await enqueue(backend.store, 'k1', { payload });
    const read = await backend.store.jobGet({ scope: { tenant: TENANT }, id: job.id });
    expect(read?.payload).toEqual(payload);
  });

  it('replays the same key and hash as the same job, without a new row', async () => {
    const first = await enqueue(backend.store, 'k1');
    const again = await backend.store.jobEnqueue(enqueueParams('k1'));
    expect(again.kind).toBe('replayed');
    if (again.kind !== 'replayed') return;
    expect(again.job.id).toBe(first.id);
    const page = await backend.store.jobList({ scope: { tenant: TENANT }, limit: 10 });
    expect(page.jobs).toHaveLength(1);
  });

  it('replays with the current state of the job', async () => {
    const first = await enqueue(backend.store, 'k1');
    await backend.store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 30_000, max: 1 });
    const again = await backend.store.jobEnqueue(enqueueParams('k1'));
    expect(again).toMatchObject({ kind: 'replayed', job: { id: first.id, status: 'running', attempts: 1 } });
  });

  it('answers a conflict for the same key with a different request', async () => {
    const first = await enqueue(backend.store, 'k1');
    const other = await backend.store.jobEnqueue(enqueueParams('k1', { requestHash: 'different', payload: { x: 2 } }));
    expect(other).toEqual({ kind: 'conflict', existingJobId: first.id });
    const read = await backend.store.jobGet({ scope: { tenant: TENANT }, id: first.id });
    expect(read?.payload).toEqual(first.payload);
  });

  it('accepts and replays an idempotency key with a NUL character', async () => {
    const first = await enqueue(backend.store, 'odd\u0000key');
    const again = await backend.store.jobEnqueue(enqueueParams('odd\u0000key'));
    expect(again).toMatchObject({ kind: 'replayed', job: { id: first.id } });
  });

  it('scopes idempotency keys by tenant and owner', async () => {
    const mine = await enqueue(backend.store, 'shared');
    const otherOwner = await backend.store.jobEnqueue(enqueueParams('shared', { owner: 'user-2' }));
    const otherTenant = await backend.store.jobEnqueue(enqueueParams('shared', { tenant: 'tenant-b' }));
    expect(otherOwner.kind).toBe('created');
    expect(otherTenant.kind).toBe('created');
    const ids = new Set([mine.id, otherOwner.kind === 'created' ? otherOwner.job.id : '', otherTenant.kind === 'created' ? otherTenant.job.id : '']);
    expect(ids.size).toBe(3);
  });

  it('enqueues a batch in order, with per-item outcomes', async () => {
    const existing = await enqueue(backend.store, 'old');
    const outcomes = await backend.store.jobEnqueueMany([
      enqueueParams('b1'),
      enqueueParams('old'),
      enqueueParams('b2', { priority: 3 }),
      enqueueParams('b1'),
      enqueueParams('b2', { requestHash: 'changed' }),
    ]);
    expect(outcomes.map((o) => o.kind)).toEqual(['created', 'replayed', 'created', 'replayed', 'conflict']);
    const [b1, old, b2, b1again, b2conflict] = outcomes;
    if (b1?.kind !== 'created' || old?.kind !== 'replayed' || b2?.kind !== 'created') throw new Error('unreachable');
    expect(old.job.id).toBe(existing.id);
    expect(b1again).toMatchObject({ kind: 'replayed', job: { id: b1.job.id } });
    expect(b2conflict).toEqual({ kind: 'conflict', existingJobId: b2.job.id });
    expect(b2.job.priority).toBe(3);
    const page = await backend.store.jobList({ scope: { tenant: TENANT }, limit: 10 });
    expect(page.jobs).toHaveLength(3);
  });

  it('answers an empty batch with no outcomes', async () => {
    expect(await backend.store.jobEnqueueMany([])).toEqual([]);
  });

  it('shows a job only inside its tenant, and to a producer only their own', async () => {
    const job = await enqueue(backend.store, 'k1');
    const store = backend.store;
    expect((await store.jobGet({ scope: { tenant: TENANT }, id: job.id }))?.id).toBe(job.id);
    expect((await store.jobGet({ scope: { tenant: TENANT, owner: OWNER }, id: job.id }))?.id).toBe(job.id);
    expect(await store.jobGet({ scope: { tenant: TENANT, owner: 'user-2' }, id: job.id })).toBeNull();
    expect(await store.jobGet({ scope: { tenant: 'tenant-b' }, id: job.id })).toBeNull();
    expect(await store.jobGet({ scope: { tenant: TENANT }, id: '00000000-0000-7000-8000-000000000000' })).toBeNull();
    expect(await store.jobGet({ scope: { tenant: TENANT }, id: 'not-a-job-id' })).toBeNull();
  });

  it('lists newest first, in pages that cover every job once', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await enqueue(backend.store, `k${i}`)).id);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 10; page++) {
      const result = await backend.store.jobList({ scope: { tenant: TENANT }, limit: 3, ...(cursor === undefined ? {} : { cursor }) });
      seen.push(...result.jobs.map((j) => j.id));
      if (result.nextCursor === null) break;
      cursor = result.nextCursor;
    }
    expect(seen).toEqual([...ids].reverse());
  });

  it('filters lists by status, kind, owner and tenant', async () => {
    await enqueue(backend.store, 'a', { kind: 'email' });
    const b = await enqueue(backend.store, 'b', { kind: 'sms' });
    await enqueue(backend.store, 'c', { kind: 'sms', owner: 'user-2' });
    await enqueue(backend.store, 'd', { tenant: 'tenant-b' });
    const leased = await backend.store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 30_000, max: 1, kinds: ['sms'] });
    const store = backend.store;
    const kinds = await store.jobList({ scope: { tenant: TENANT }, kind: 'sms', limit: 10 });
    expect(kinds.jobs.map((j) => j.kind)).toEqual(['sms', 'sms']);
    const running = await store.jobList({ scope: { tenant: TENANT }, status: 'running', limit: 10 });
    expect(running.jobs.map((j) => j.id)).toEqual(leased.map((j) => j.id));
    const mine = await store.jobList({ scope: { tenant: TENANT, owner: OWNER }, limit: 10 });
    expect(mine.jobs.every((j) => j.owner === OWNER)).toBe(true);
    expect(mine.jobs).toHaveLength(2);
    const all = await store.jobList({ scope: { tenant: TENANT }, limit: 10 });
    expect(all.jobs).toHaveLength(3);
    expect(all.jobs.some((j) => j.id === b.id)).toBe(true);
    expect(all.nextCursor).toBeNull();
  });

  it('refuses a malformed cursor with invalid_request', async () => {
    await enqueue(backend.store, 'a');
    await expect(backend.store.jobList({ scope: { tenant: TENANT }, limit: 10, cursor: 'garbage' })).rejects.toMatchObject({ code: 'invalid_request' });
  });
});
