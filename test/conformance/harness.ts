/**
 * Shared pieces of the store conformance suite: a fresh store per test for
 * each backend, request builders, and helpers that wait on the store's own
 * clock (PostgreSQL's clock cannot be faked, so expiry tests use short real
 * leases and poll, bounded, instead of sleeping).
 */

import { afterAll, afterEach, beforeEach, expect } from 'vitest';
import type { BackoffPolicy } from '../../src/core/backoff.js';
import type { EnqueueParams, JobRecord, LeasedJob, LeaseParams, Store } from '../../src/store/store.js';
import type { BackendFactory, BackendInstance } from '../support/backends.js';
import { waitFor } from '../support/wait-for.js';

export { backends } from '../support/backends.js';

export interface BackendHandle {
  readonly store: Store;
  readonly instance: BackendInstance;
}

/** Registers hooks that give each test its own store; read `.store` inside a test. */
export function useBackend(factory: BackendFactory): BackendHandle {
  let current: BackendInstance | undefined;
  beforeEach(async () => {
    current = await factory.create();
  });
  afterEach(async () => {
    const instance = current;
    current = undefined;
    await instance?.cleanup();
  });
  afterAll(async () => {
    await factory.drain();
  });
  return {
    get store(): Store {
      if (current === undefined) throw new Error('no store outside a test');
      return current.store;
    },
    get instance(): BackendInstance {
      if (current === undefined) throw new Error('no store outside a test');
      return current;
    },
  };
}

export const TENANT = 'tenant-a';
export const OWNER = 'user-1';

export function enqueueParams(key: string, overrides: Partial<EnqueueParams> = {}): EnqueueParams {
  return {
    tenant: TENANT,
    owner: OWNER,
    idempotencyKey: key,
    requestHash: `hash-of-${key}`,
    kind: 'email',
    payload: { to: `${key}@example.com`, n: 1 },
    maxAttempts: 3,
    priority: 0,
    runAfter: null,
    deadlineMs: null,
    payloadBytes: 32,
    ...overrides,
  };
}

export function leaseParams(overrides: Partial<LeaseParams> = {}): LeaseParams {
  return { tenant: TENANT, workerId: 'worker-1', leaseMs: 30_000, max: 1, ...overrides };
}

/** Retries at once: the delay is floor(random * 1) = 0. */
export const IMMEDIATE_BACKOFF: BackoffPolicy = { baseMs: 1, maxMs: 1 };
/** A retry that cannot come due during a test. */
export const HOUR_BACKOFF: BackoffPolicy = { baseMs: 3_600_000, maxMs: 3_600_000 };

export const ERROR = { code: 'smtp_down', message: 'the mail server refused the connection' };

export async function enqueue(store: Store, key: string, overrides: Partial<EnqueueParams> = {}): Promise<JobRecord> {
  const outcome = await store.jobEnqueue(enqueueParams(key, overrides));
  if (outcome.kind !== 'created') throw new Error(`expected a new job, got ${outcome.kind}`);
  return outcome.job;
}

export async function leaseOne(store: Store, overrides: Partial<LeaseParams> = {}): Promise<LeasedJob> {
  const jobs = await store.jobLease(leaseParams({ ...overrides, max: 1 }));
  expect(jobs).toHaveLength(1);
  const [job] = jobs;
  if (job === undefined) throw new Error('unreachable');
  return job;
}

export async function getJob(store: Store, id: string): Promise<JobRecord> {
  const job = await store.jobGet({ scope: { tenant: TENANT }, id });
  if (job === null) throw new Error(`job ${id} not found`);
  return job;
}

/** Waits until the store's clock has passed `ms`. */
export async function waitUntilStoreTimePasses(store: Store, ms: number): Promise<void> {
  await waitFor(`store clock past ${ms}`, async () => (await store.now()) > ms, { timeoutMs: 10_000, intervalMs: 10 });
}

/**
 * Makes a live lease run out about now, by renewing it for 1 ms. Tests that
 * must act under a lease first (mark an effect, checkpoint, cancel) lease for
 * long and then shorten, so a slow machine cannot expire them too early.
 */
export async function shortenLease(store: Store, lease: LeasedJob): Promise<LeasedJob> {
  const renewed = await store.jobRenew({ tenant: TENANT, id: lease.id, token: lease.token, leaseMs: 1 });
  if (renewed.kind !== 'renewed') throw new Error(`could not shorten the lease: ${renewed.code}`);
  return { ...lease, leaseExpiresAt: renewed.leaseExpiresAt };
}

/** Waits for a lease's expiry by the store's clock, then runs the reaper. */
export async function expireLease(store: Store, lease: LeasedJob): Promise<void> {
  await waitUntilStoreTimePasses(store, lease.leaseExpiresAt);
  await store.jobReapExpired();
}

export { waitFor };
