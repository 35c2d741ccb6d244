/**
 * Conformance, part 2: leasing, renewing, completing and failing under the
 * fencing token. Runs against every backend in test/support/backends.ts.
 */

import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/core/ids.js';
import {
  backends,
  enqueue,
  enqueueParams,
  ERROR,
  expireLease,
  getJob,
  HOUR_BACKOFF,
  IMMEDIATE_BACKOFF,
  leaseOne,
  leaseParams,
  TENANT,
  useBackend,
} from './harness.js';

describe.each(backends)('store conformance ($label): leases', (factory) => {
  const backend = useBackend(factory);

  it('leases in order: higher priority, then earlier runAfter, then creation', async () => {
    const store = backend.store;
    const now = await store.now();
    const low1 = await enqueue(store, 'low1');
    const high = await enqueue(store, 'high', { priority: 10 });
    const highEarlier = await enqueue(store, 'highEarlier', { priority: 10, runAfter: now - 5_000 });
    const low2 = await enqueue(store, 'low2');
    const negative = await enqueue(store, 'negative', { priority: -5, runAfter: now - 60_000 });
    await enqueue(store, 'later', { priority: 100, runAfter: now + 60_000 });
    const leased = await store.jobLease(leaseParams({ max: 10 }));
    expect(leased.map((j) => j.id)).toEqual([highEarlier.id, high.id, low1.id, low2.id, negative.id]);
  });

  it('leases one at a time in the same order', async () => {
    const store = backend.store;
    const a = await enqueue(store, 'a');
    const b = await enqueue(store, 'b', { priority: 1 });
    const c = await enqueue(store, 'c');
    const order = [(await leaseOne(store)).id, (await leaseOne(store)).id, (await leaseOne(store)).id];
    expect(order).toEqual([b.id, a.id, c.id]);
    expect(await store.jobLease(leaseParams())).toEqual([]);
  });

  it('leases only the requested kinds and only in the tenant', async () => {
    const store = backend.store;
    await enqueue(store, 'e', { kind: 'email' });
    const sms = await enqueue(store, 's', { kind: 'sms' });
    await enqueue(store, 'other-tenant', { tenant: 'tenant-b', kind: 'sms' });
    const leased = await store.jobLease(leaseParams({ max: 10, kinds: ['sms', 'fax'] }));
    expect(leased.map((j) => j.id)).toEqual([sms.id]);
  });

  it('raises the epoch and issues a fresh token on every lease', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k', { payload: { p: 1 } });
    const first = await leaseOne(store, { workerId: 'w1' });
    expect(first).toMatchObject({
      id: job.id,
      kind: 'email',
      payload: { p: 1 },
      attempt: 1,
      maxAttempts: 3,
      epoch: 1,
      checkpoint: null,
      deadlineAt: null,
      group: null,
    });
    expect(first.token.length).toBeGreaterThanOrEqual(22);
    const failed = await store.jobFail({ tenant: TENANT, id: job.id, token: first.token, error: ERROR, retryable: true, backoff: IMMEDIATE_BACKOFF });
    expect(failed).toMatchObject({ kind: 'failed', status: 'queued' });
    const second = await leaseOne(store, { workerId: 'w2' });
    expect(second).toMatchObject({ id: job.id, attempt: 2, epoch: 2 });
    expect(second.token).not.toBe(first.token);
    const record = await getJob(store, job.id);
    expect(record).toMatchObject({ status: 'running', attempts: 2, epoch: 2, leaseOwner: 'w2', leaseExpiresAt: second.leaseExpiresAt });
    expect(record.startedAt).not.toBeNull();
  });

  it('never leases one job twice under 200 concurrent lease calls', async () => {
    const store = backend.store;
    await store.jobEnqueueMany(Array.from({ length: 50 }, (_, i) => enqueueParams(`c${i}`)));
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => store.jobLease(leaseParams({ workerId: `w${i}`, max: 1 }))));
    const ids = results.flat().map((j) => j.id);
    expect(ids).toHaveLength(50);
    expect(new Set(ids).size).toBe(50);
    const tokens = results.flat().map((j) => j.token);
    expect(new Set(tokens).size).toBe(50);
  });

  it('never leases one job twice across two stores over the same database', async () => {
    const store = backend.store;
    const peer = await backend.instance.openPeer();
    await store.jobEnqueueMany(Array.from({ length: 40 }, (_, i) => enqueueParams(`p${i}`)));
    const calls = Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? store : peer).jobLease(leaseParams({ workerId: `w${i}`, max: 2 })));
    const ids = (await Promise.all(calls)).flat().map((j) => j.id);
    expect(ids).toHaveLength(40);
    expect(new Set(ids).size).toBe(40);
  });

  it('renews only with the live token, and stores progress', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k');
    const lease = await leaseOne(store, { leaseMs: 5_000 });
    const renewed = await store.jobRenew({ tenant: TENANT, id: job.id, token: lease.token, leaseMs: 60_000, progress: { done: 3, total: 10 } });
    expect(renewed.kind).toBe('renewed');
    if (renewed.kind !== 'renewed') return;
    expect(renewed.leaseExpiresAt).toBeGreaterThan(lease.leaseExpiresAt);
    expect(await getJob(store, job.id)).toMatchObject({ leaseExpiresAt: renewed.leaseExpiresAt, progress: { done: 3, total: 10 } });
    const withoutProgress = await store.jobRenew({ tenant: TENANT, id: job.id, token: lease.token, leaseMs: 60_000 });
    expect(withoutProgress.kind).toBe('renewed');
    expect((await getJob(store, job.id)).progress).toEqual({ done: 3, total: 10 });
    expect(await store.jobRenew({ tenant: TENANT, id: job.id, token: 'not-the-token', leaseMs: 60_000 })).toEqual({ kind: 'rejected', code: 'stale_lease' });
    expect(await store.jobRenew({ tenant: 'tenant-b', id: job.id, token: lease.token, leaseMs: 60_000 })).toEqual({ kind: 'rejected', code: 'not_found' });
    expect(await store.jobRenew({ tenant: TENANT, id: 'nope', token: lease.token, leaseMs: 60_000 })).toEqual({ kind: 'rejected', code: 'not_found' });
  });

  it('refuses to renew an expired lease', async () => {
    const store = backend.store;
    await enqueue(store, 'k');
    const lease = await leaseOne(store, { leaseMs: 50 });
    await expireLease(store, lease);
    expect(await store.jobRenew({ tenant: TENANT, id: lease.id, token: lease.token, leaseMs: 60_000 })).toEqual({ kind: 'rejected', code: 'stale_lease' });
  });

  it('commits a completion once, with its result and checksum', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k');
    const lease = await leaseOne(store);
    const body = Buffer.from(JSON.stringify({ sent: true }));
    const result = { contentType: 'application/json', body };
    expect(await store.jobComplete({ tenant: TENANT, id: job.id, token: lease.token, result })).toEqual({ kind: 'completed', replayed: false });
    const done = await getJob(store, job.id);
    expect(done).toMatchObject({ status: 'succeeded', attempts: 1, lastError: null, leaseExpiresAt: null });
    expect(done.finishedAt).not.toBeNull();
    expect(done.result?.contentType).toBe('application/json');
    expect(done.result?.checksum).toBe(sha256Hex(body));
    expect(Buffer.compare(done.result?.body ?? Buffer.alloc(0), body)).toBe(0);

    const replay = await store.jobComplete({
      tenant: TENANT,
      id: job.id,
      token: lease.token,
      result: { contentType: 'text/plain', body: Buffer.from('other') },
    });
    expect(replay).toEqual({ kind: 'completed', replayed: true });
    expect((await getJob(store, job.id)).result?.checksum).toBe(sha256Hex(body));
    expect(await store.jobComplete({ tenant: TENANT, id: job.id, token: 'stale' })).toEqual({ kind: 'rejected', code: 'stale_lease' });
    expect(await store.jobComplete({ tenant: 'tenant-b', id: job.id, token: lease.token })).toEqual({ kind: 'rejected', code: 'not_found' });
  });

  it("rejects a late worker's completion after the job was leased again, and keeps the new result", async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k');
    const slow = await leaseOne(store, { leaseMs: 50, workerId: 'slow' });
    await expireLease(store, slow);
    const fast = await leaseOne(store, { workerId: 'fast' });
    expect(fast.epoch).toBe(slow.epoch + 1);
    const late = await store.jobComplete({ tenant: TENANT, id: job.id, token: slow.token, result: { contentType: 'text/plain', body: Buffer.from('late') } });
    expect(late).toEqual({ kind: 'rejected', code: 'stale_lease' });
    expect(await getJob(store, job.id)).toMatchObject({ status: 'running', result: null, epoch: fast.epoch });
    await store.jobComplete({ tenant: TENANT, id: job.id, token: fast.token, result: { contentType: 'text/plain', body: Buffer.from('fast') } });
    expect((await getJob(store, job.id)).result?.body.toString()).toBe('fast');
    expect(await store.jobFail({ tenant: TENANT, id: job.id, token: slow.token, error: ERROR, retryable: true, backoff: IMMEDIATE_BACKOFF })).toEqual({
      kind: 'rejected',
      code: 'stale_lease',
    });
  });

  it('treats NUL characters in tokens and messages as ordinary bad input', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k');
    const lease = await leaseOne(store);
    expect(await store.jobComplete({ tenant: TENANT, id: job.id, token: `${lease.token}\u0000` })).toEqual({ kind: 'rejected', code: 'stale_lease' });
    expect(await store.jobRenew({ tenant: TENANT, id: job.id, token: '\u0000', leaseMs: 1_000 })).toEqual({ kind: 'rejected', code: 'stale_lease' });
    const failed = await store.jobFail({
      tenant: TENANT,
      id: job.id,
      token: lease.token,
      error: { code: 'nul\u0000code', message: 'before\u0000after' },
      retryable: true,
      backoff: HOUR_BACKOFF,
    });
    expect(failed).toMatchObject({ kind: 'failed', status: 'queued' });
    expect((await getJob(store, job.id)).lastError?.message).toMatch(/^before.after$/u);
  });

  it('completes a batch with one outcome per item', async () => {
    const store = backend.store;
    for (const key of ['a', 'b', 'c']) await enqueue(store, key);
    const [a, b, c] = await store.jobLease(leaseParams({ max: 3 }));
    if (a === undefined || b === undefined || c === undefined) throw new Error('expected three leases');
    const outcomes = await store.jobCompleteMany([
      { tenant: TENANT, id: a.id, token: a.token, result: { contentType: 'text/plain', body: Buffer.from('A') } },
      { tenant: TENANT, id: b.id, token: 'wrong' },
      { tenant: TENANT, id: '00000000-0000-7000-8000-000000000000', token: 'x' },
      { tenant: TENANT, id: a.id, token: a.token },
      { tenant: TENANT, id: c.id, token: c.token, result: { contentType: 'text/plain', body: Buffer.from('too long') }, maxResultBytes: 3 },
      { tenant: 'tenant-b', id: b.id, token: b.token },
    ]);
    expect(outcomes).toEqual([
      { kind: 'completed', replayed: false },
      { kind: 'rejected', code: 'stale_lease' },
      { kind: 'rejected', code: 'not_found' },
      { kind: 'completed', replayed: true },
      { kind: 'result_too_large' },
      { kind: 'rejected', code: 'not_found' },
    ]);
    expect((await getJob(store, a.id)).result?.body.toString()).toBe('A');
    expect((await getJob(store, b.id)).status).toBe('running');
    expect(await getJob(store, c.id)).toMatchObject({ status: 'dead', result: null, lastError: { code: 'result_too_large' } });
    expect(await store.jobCompleteMany([])).toEqual([]);
  });

  it('completes a batch of distinct jobs with results, replays and rejections', async () => {
    const store = backend.store;
    for (const key of ['a', 'b', 'c', 'd']) await enqueue(store, key);
    const [a, b, c, d] = await store.jobLease(leaseParams({ max: 4 }));
    if (a === undefined || b === undefined || c === undefined || d === undefined) throw new Error('expected four leases');
    await store.jobComplete({ tenant: TENANT, id: d.id, token: d.token });
    const outcomes = await store.jobCompleteMany([
      { tenant: TENANT, id: c.id, token: c.token, result: { contentType: 'application/json', body: Buffer.from('{"c":1}') }, maxResultBytes: 100 },
      { tenant: TENANT, id: a.id, token: a.token },
      { tenant: TENANT, id: b.id, token: 'stale' },
      { tenant: TENANT, id: d.id, token: d.token },
      { tenant: TENANT, id: 'not-an-id', token: 'x' },
      { tenant: TENANT, id: '00000000-0000-7000-8000-000000000001', token: 'x' },
    ]);
    expect(outcomes).toEqual([
      { kind: 'completed', replayed: false },
      { kind: 'completed', replayed: false },
      { kind: 'rejected', code: 'stale_lease' },
      { kind: 'completed', replayed: true },
      { kind: 'rejected', code: 'not_found' },
      { kind: 'rejected', code: 'not_found' },
    ]);
    expect(await store.jobCompleteMany([{ tenant: 'tenant-b', id: b.id, token: b.token }])).toEqual([{ kind: 'rejected', code: 'not_found' }]);
    const cJob = await getJob(store, c.id);
    expect(cJob).toMatchObject({ status: 'succeeded', result: { contentType: 'application/json', checksum: sha256Hex(Buffer.from('{"c":1}')) } });
    expect((await getJob(store, a.id)).result).toBeNull();
    expect((await getJob(store, b.id)).status).toBe('running');
    const attempts = await store.jobAttempts({ scope: { tenant: TENANT }, id: c.id });
    expect(attempts?.map((x) => x.outcome)).toEqual(['succeeded']);
    expect(await store.jobCompleteMany([{ tenant: TENANT, id: a.id, token: a.token }])).toEqual([{ kind: 'completed', replayed: true }]);
  });

  it('makes a job with a too large result dead, also through the single complete', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k');
    const lease = await leaseOne(store);
    const outcome = await store.jobComplete({
      tenant: TENANT,
      id: job.id,
      token: lease.token,
      result: { contentType: 'text/plain', body: Buffer.alloc(100) },
      maxResultBytes: 99,
    });
    expect(outcome).toEqual({ kind: 'result_too_large' });
    expect(await getJob(store, job.id)).toMatchObject({ status: 'dead', result: null, lastError: { code: 'result_too_large', class: 'result_too_large' } });
  });

  it('retries a retryable failure after a backoff delay', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k');
    const lease = await leaseOne(store);
    const before = await store.now();
    const outcome = await store.jobFail({ tenant: TENANT, id: job.id, token: lease.token, error: ERROR, retryable: true, backoff: HOUR_BACKOFF });
    expect(outcome).toMatchObject({ kind: 'failed', status: 'queued', replayed: false });
    if (outcome.kind !== 'failed' || outcome.runAfter === null) throw new Error('expected a runAfter');
    expect(outcome.runAfter).toBeGreaterThan(before);
    expect(outcome.runAfter).toBeLessThanOrEqual(before + 3_600_000 + 60_000);
    expect(await getJob(store, job.id)).toMatchObject({
      status: 'queued',
      attempts: 1,
      runAfter: outcome.runAfter,
      lastError: { ...ERROR, class: 'transient' },
      leaseExpiresAt: null,
    });
    expect(await store.jobLease(leaseParams())).toEqual([]);
  });

  it('answers a repeated failure with the same token as a replay that changes nothing', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k');
    const lease = await leaseOne(store);
    const params = { tenant: TENANT, id: job.id, token: lease.token, error: ERROR, retryable: true, backoff: HOUR_BACKOFF };
    const first = await store.jobFail(params);
    const second = await store.jobFail({ ...params, error: { code: 'other', message: 'different' } });
    if (first.kind !== 'failed') throw new Error('expected failed');
    expect(second).toEqual({ kind: 'failed', status: 'queued', runAfter: first.runAfter, replayed: true, failureClass: null });
    expect(await getJob(store, job.id)).toMatchObject({ lastError: ERROR, attempts: 1 });
    const attempts = await store.jobAttempts({ scope: { tenant: TENANT }, id: job.id });
    expect(attempts).toHaveLength(1);
  });

  it('makes a job dead when attempts are exhausted or the failure is permanent', async () => {
    const store = backend.store;
    const once = await enqueue(store, 'once', { maxAttempts: 1 });
    const lease1 = await leaseOne(store);
    expect(await store.jobFail({ tenant: TENANT, id: once.id, token: lease1.token, error: ERROR, retryable: true, backoff: IMMEDIATE_BACKOFF })).toEqual({
      kind: 'failed',
      status: 'dead',
      runAfter: null,
      replayed: false,
      failureClass: 'attempts_exhausted',
    });
    expect(await getJob(store, once.id)).toMatchObject({ status: 'dead', attempts: 1, lastError: { code: ERROR.code, class: 'attempts_exhausted' } });
    expect((await getJob(store, once.id)).finishedAt).not.toBeNull();

    const permanent = await enqueue(store, 'permanent', { maxAttempts: 5 });
    const lease2 = await leaseOne(store);
    const outcome = await store.jobFail({
      tenant: TENANT,
      id: permanent.id,
      token: lease2.token,
      error: { code: 'bad_input', message: 'no' },
      retryable: false,
      backoff: IMMEDIATE_BACKOFF,
    });
    expect(outcome).toMatchObject({ kind: 'failed', status: 'dead' });
    expect(await getJob(store, permanent.id)).toMatchObject({
      status: 'dead',
      attempts: 1,
      lastError: { code: 'bad_input', message: 'no', class: 'permanent' },
    });
    const replay = await store.jobFail({ tenant: TENANT, id: permanent.id, token: lease2.token, error: ERROR, retryable: false, backoff: IMMEDIATE_BACKOFF });
    expect(replay).toEqual({ kind: 'failed', status: 'dead', runAfter: null, replayed: true, failureClass: null });
  });

  it('fails a job through retries into dead and to success after a requeue', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k', { maxAttempts: 2 });
    for (let i = 1; i <= 2; i++) {
      const lease = await leaseOne(store);
      expect(lease.attempt).toBe(i);
      await store.jobFail({ tenant: TENANT, id: job.id, token: lease.token, error: ERROR, retryable: true, backoff: IMMEDIATE_BACKOFF });
    }
    expect((await getJob(store, job.id)).status).toBe('dead');
    const requeued = await store.jobRequeue({ scope: { tenant: TENANT }, id: job.id });
    expect(requeued).toMatchObject({ kind: 'requeued', job: { status: 'queued', attempts: 0, maxAttempts: 2 } });
    const lease = await leaseOne(store);
    expect(lease).toMatchObject({ attempt: 1, epoch: 3 });
    expect(await store.jobComplete({ tenant: TENANT, id: job.id, token: lease.token })).toEqual({ kind: 'completed', replayed: false });
    expect(await getJob(store, job.id)).toMatchObject({ status: 'succeeded', lastError: null });
  });
});
