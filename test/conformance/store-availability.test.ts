/**
 * Conformance: every write that makes a job available announces its tenant
 * and kind to watchAvailable listeners (long polls wake only the waiters that
 * can lease it): an enqueue, a batch (once per distinct pair), a retry, a
 * requeue, a reconcile to requeue, and a lease expiry applied by the reaper.
 * Writes that make nothing available announce nothing. Runs against every
 * backend.
 */

import { describe, expect, it } from 'vitest';
import type { Availability, Store } from '../../src/store/store.js';
import {
  backends,
  enqueue,
  enqueueParams,
  ERROR,
  expireLease,
  IMMEDIATE_BACKOFF,
  leaseOne,
  shortenLease,
  TENANT,
  useBackend,
  waitFor,
  waitUntilStoreTimePasses,
} from './harness.js';

/** Records what a store announces, leaving out PostgreSQL's "everyone look" when its LISTEN takes effect. */
function recording(store: Store): { readonly heard: Availability[]; readonly stop: () => void } {
  const heard: Availability[] = [];
  const stop = store.watchAvailable((available) => {
    if (available !== null) heard.push(available);
  });
  return { heard, stop };
}

const key = (a: Availability): string => `${a.tenant}/${a.kind}`;

/**
 * Waits until `expected` was heard (each at least once). PostgreSQL also delivers this store's own NOTIFY
 * back to it a moment later, so an earlier write's pair may be heard again; nothing else may be.
 */
async function expectHeard(heard: readonly Availability[], expected: readonly Availability[], earlier: readonly Availability[] = []): Promise<void> {
  await waitFor('the announcements', () => expected.every((e) => heard.some((h) => key(h) === key(e))), { timeoutMs: 5_000 });
  const allowed = new Set([...expected, ...earlier].map(key));
  for (const pair of heard) expect(allowed.has(key(pair)), key(pair)).toBe(true);
}

describe.each(backends)('store announcements of available jobs ($name)', (factory) => {
  const backend = useBackend(factory);

  it('announces an enqueue and each distinct (tenant, kind) of a batch', async () => {
    const store = backend.store;
    const { heard, stop } = recording(store);
    await enqueue(store, 'one', { kind: 'email' });
    await expectHeard(heard, [{ tenant: TENANT, kind: 'email' }]);
    heard.length = 0;
    await store.jobEnqueueMany([
      enqueueParams('b1', { kind: 'sms' }),
      enqueueParams('b2', { kind: 'sms' }),
      enqueueParams('b3', { kind: 'fax', tenant: 'tenant-b' }),
    ]);
    await expectHeard(
      heard,
      [
        { tenant: TENANT, kind: 'sms' },
        { tenant: 'tenant-b', kind: 'fax' },
      ],
      [{ tenant: TENANT, kind: 'email' }],
    );
    stop();
  });

  it('announces a retry, a requeue, a reconcile to requeue and a lease expiry with the job’s tenant and kind', async () => {
    const store = backend.store;
    const retried = await enqueue(store, 'retry', { kind: 'retry-kind' });
    const retryLease = await leaseOne(store, { kinds: ['retry-kind'] });
    const { heard, stop } = recording(store);
    await store.jobFail({ tenant: TENANT, id: retried.id, token: retryLease.token, error: ERROR, retryable: true, backoff: IMMEDIATE_BACKOFF });
    await expectHeard(heard, [{ tenant: TENANT, kind: 'retry-kind' }]);

    heard.length = 0;
    const dead = await enqueue(store, 'dead', { kind: 'dead-kind', maxAttempts: 1 });
    const deadLease = await leaseOne(store, { kinds: ['dead-kind'] });
    await store.jobFail({ tenant: TENANT, id: dead.id, token: deadLease.token, error: ERROR, retryable: false, backoff: IMMEDIATE_BACKOFF });
    heard.length = 0;
    await store.jobRequeue({ scope: { tenant: TENANT }, id: dead.id });
    await expectHeard(heard, [{ tenant: TENANT, kind: 'dead-kind' }], [{ tenant: TENANT, kind: 'retry-kind' }]);

    const unknown = await enqueue(store, 'unknown', { kind: 'effect-kind' });
    const effectLease = await leaseOne(store, { kinds: ['effect-kind'] });
    await store.jobMarkEffectStarted({ tenant: TENANT, id: unknown.id, token: effectLease.token });
    await expireLease(store, await shortenLease(store, effectLease));
    heard.length = 0;
    await store.jobReconcile({ scope: { tenant: TENANT }, id: unknown.id, outcome: 'requeue' });
    await expectHeard(heard, [{ tenant: TENANT, kind: 'effect-kind' }], [{ tenant: TENANT, kind: 'dead-kind' }]);

    await enqueue(store, 'expiring', { kind: 'expiry-kind', tenant: 'tenant-b' });
    const expiring = await leaseOne(store, { tenant: 'tenant-b', kinds: ['expiry-kind'] });
    const renewed = await store.jobRenew({ tenant: 'tenant-b', id: expiring.id, token: expiring.token, leaseMs: 1 });
    if (renewed.kind !== 'renewed') throw new Error('could not shorten the lease');
    await waitUntilStoreTimePasses(store, renewed.leaseExpiresAt);
    heard.length = 0;
    expect((await store.jobReapExpired()).requeued).toBe(1);
    await expectHeard(heard, [{ tenant: 'tenant-b', kind: 'expiry-kind' }], [{ tenant: TENANT, kind: 'effect-kind' }]);
    stop();
  });
});
