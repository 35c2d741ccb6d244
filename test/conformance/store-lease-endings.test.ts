/**
 * Conformance: every way a job can end stores what the one table of endings
 * (src/store/lease-endings.ts) says — status, last error (code, message,
 * failure class) and the ended attempt's outcome and code — on every backend.
 * Each ending is driven on its own job (its own kind, so leases pick it out),
 * and the stored record is compared with the table's answer for that ending.
 */

import { describe, expect, it } from 'vitest';
import {
  CANCELLED_NOW,
  expiryEnding,
  failureEnding,
  QUEUED_DEADLINE,
  reconcileEnding,
  resultTooLargeEnding,
  SUCCEEDED,
  type Ending,
} from '../../src/store/lease-endings.js';
import type { BackoffPolicy } from '../../src/core/backoff.js';
import type { LeasedJob, Store } from '../../src/store/store.js';
import { backends, enqueue, ERROR, getJob, HOUR_BACKOFF, leaseOne, shortenLease, TENANT, useBackend, waitUntilStoreTimePasses } from './harness.js';

/** A retry delay far past any deadline of this test (random is pinned to 0.5). */
const FAR_BACKOFF: BackoffPolicy = { baseMs: 1_000_000_000, maxMs: 1_000_000_000 };

describe.each(backends)('store conformance ($label): what each ending stores', (factory) => {
  const backend = useBackend(factory);

  it('stores the status, last error and attempt of every ending from the table of endings', async () => {
    const store = backend.store;
    backend.instance.random.set(0.5);
    const scope = { tenant: TENANT };
    const expected = new Map<string, Ending>();
    const expiring: LeasedJob[] = [];

    const lease = async (kind: string, overrides: { maxAttempts?: number; deadlineMs?: number } = {}): Promise<LeasedJob> => {
      await enqueue(store, kind, { kind, ...overrides });
      return leaseOne(store, { kinds: [kind], leaseMs: 60_000 });
    };
    const fail = (job: LeasedJob, retryable: boolean, backoff: BackoffPolicy = HOUR_BACKOFF) =>
      store.jobFail({ tenant: TENANT, id: job.id, token: job.token, error: ERROR, retryable, backoff });
    const markEffect = async (job: LeasedJob): Promise<void> => {
      expect(await store.jobMarkEffectStarted({ tenant: TENANT, id: job.id, token: job.token })).toEqual({ kind: 'ok' });
    };

    // The jobs with a deadline first, so their leases are taken well before it passes.
    const deadlineMs = 3_000;
    const leaseDeadline = await lease('expire-deadline', { deadlineMs });
    expiring.push(leaseDeadline);
    expected.set(leaseDeadline.id, expiryEnding({ kind: 'dead', code: 'deadline_exceeded' }));
    const queuedDeadline = await enqueue(store, 'queued-deadline', { kind: 'queued-deadline', deadlineMs, runAfter: (await store.now()) + 600_000 });
    expected.set(queuedDeadline.id, QUEUED_DEADLINE);

    const completed = await lease('complete');
    expect(await store.jobComplete({ tenant: TENANT, id: completed.id, token: completed.token })).toEqual({ kind: 'completed', replayed: false });
    expected.set(completed.id, SUCCEEDED);

    const tooLarge = await lease('result-too-large');
    const body = Buffer.from('ten bytes!');
    expect(
      await store.jobComplete({ tenant: TENANT, id: tooLarge.id, token: tooLarge.token, result: { contentType: 'text/plain', body }, maxResultBytes: 3 }),
    ).toEqual({
      kind: 'result_too_large',
    });
    expected.set(tooLarge.id, resultTooLargeEnding({ kind: 'too_large', bytes: body.length, maxBytes: 3 }));

    const retried = await lease('fail-retry');
    expect(await fail(retried, true)).toMatchObject({ kind: 'failed', status: 'queued', failureClass: 'transient' });
    expected.set(retried.id, failureEnding({ kind: 'retry', runAfter: 0 }, ERROR));

    const permanent = await lease('fail-permanent');
    expect(await fail(permanent, false)).toMatchObject({ kind: 'failed', status: 'dead', failureClass: 'permanent' });
    expected.set(permanent.id, failureEnding({ kind: 'dead', code: 'permanent' }, ERROR));

    const exhausted = await lease('fail-exhausted', { maxAttempts: 1 });
    expect(await fail(exhausted, true)).toMatchObject({ kind: 'failed', status: 'dead', failureClass: 'attempts_exhausted' });
    expected.set(exhausted.id, failureEnding({ kind: 'dead', code: 'attempts_exhausted' }, ERROR));

    const pastDeadline = await lease('fail-deadline', { deadlineMs: 600_000 });
    expect(await fail(pastDeadline, true, FAR_BACKOFF)).toMatchObject({ kind: 'failed', status: 'dead', failureClass: 'deadline_exceeded' });
    expected.set(pastDeadline.id, failureEnding({ kind: 'dead', code: 'deadline_exceeded' }, ERROR));

    const failCancelled = await lease('fail-cancelled');
    expect(await store.jobCancel({ scope, id: failCancelled.id })).toMatchObject({ kind: 'cancel_requested' });
    expect(await fail(failCancelled, true)).toMatchObject({ kind: 'failed', status: 'cancelled', failureClass: 'cancelled' });
    expected.set(failCancelled.id, failureEnding({ kind: 'cancelled' }, ERROR));

    const failUnknown = await lease('fail-unknown');
    await markEffect(failUnknown);
    expect(await fail(failUnknown, true)).toMatchObject({ kind: 'failed', status: 'unknown', failureClass: 'effect_unknown' });
    expected.set(failUnknown.id, failureEnding({ kind: 'unknown' }, ERROR));

    const cancelled = await enqueue(store, 'cancel', { kind: 'cancel' });
    expect(await store.jobCancel({ scope, id: cancelled.id })).toMatchObject({ kind: 'cancelled' });
    expected.set(cancelled.id, CANCELLED_NOW);

    for (const verdict of ['succeeded', 'dead'] as const) {
      const unknown = await lease(`reconcile-${verdict}`);
      await markEffect(unknown);
      await fail(unknown, true);
      expect(await store.jobReconcile({ scope, id: unknown.id, outcome: verdict })).toMatchObject({ kind: 'reconciled' });
      expected.set(unknown.id, reconcileEnding({ kind: verdict }));
    }

    const requeued = await lease('expire-requeue');
    expected.set(requeued.id, expiryEnding({ kind: 'requeue' }));
    const lastAttempt = await lease('expire-dead', { maxAttempts: 1 });
    expected.set(lastAttempt.id, expiryEnding({ kind: 'dead', code: 'lease_expired' }));
    const expireUnknown = await lease('expire-unknown');
    await markEffect(expireUnknown);
    expected.set(expireUnknown.id, expiryEnding({ kind: 'unknown' }));
    for (const job of [requeued, lastAttempt, expireUnknown]) expiring.push(await shortenLease(store, job));
    // Shortened before the cancel: a lease with a cancel requested cannot be renewed.
    const expireCancelled = await shortenLease(store, await lease('expire-cancelled'));
    expiring.push(expireCancelled);
    expect(await store.jobCancel({ scope, id: expireCancelled.id })).toMatchObject({ kind: 'cancel_requested' });
    expected.set(expireCancelled.id, expiryEnding({ kind: 'cancelled' }));

    await waitUntilStoreTimePasses(store, Math.max(queuedDeadline.deadlineAt ?? 0, ...expiring.map((job) => job.leaseExpiresAt)));
    await store.jobReapExpired();

    expect(expected.size).toBe(17);
    for (const [id, ending] of expected) await expectStored(store, id, ending);
  });
});

async function expectStored(store: Store, id: string, ending: Ending): Promise<void> {
  const job = await getJob(store, id);
  const label = `${job.kind}: `;
  expect(job.status, `${label}status`).toBe(ending.status);
  expect(job.lastError, `${label}last error`).toEqual(ending.lastError);
  if (ending.outcome === null) return;
  const attempts = (await store.jobAttempts({ scope: { tenant: TENANT }, id })) ?? [];
  const last = attempts[attempts.length - 1];
  expect(last, `${label}attempt`).toMatchObject({ outcome: ending.outcome, errorCode: ending.attemptCode });
}
