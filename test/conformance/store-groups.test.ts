/**
 * Fair shares among groups on every backend (docs/FAIRNESS.md): a light group
 * is not stuck behind a heavy one, weights set the shares, a group at its own
 * maxConcurrent or rate is skipped while the others lease, the kind's own
 * limits still cap the whole kind, priority orders jobs within a group, an
 * idle group banks no credit, jobs without a group form one group, every end
 * of a lease frees its group's slot, and a lease still works among many
 * groups. Kinds without groups keep their plain lease (store-lease.test.ts).
 */

import { describe, expect, it } from 'vitest';
import { parseGroupRules, type GroupLimitsConfig } from '../../src/core/fair-share.js';
import type { KindRate } from '../../src/store/flow-limits.js';
import type { LeasedJob, Store } from '../../src/store/store.js';
import { kindParams } from '../support/kind-records.js';
import {
  backends,
  ERROR,
  expireLease,
  getJob,
  HOUR_BACKOFF,
  IMMEDIATE_BACKOFF,
  enqueue,
  enqueueParams,
  leaseParams,
  shortenLease,
  TENANT,
  useBackend,
} from './harness.js';

const KIND = 'report';

async function register(store: Store, groups: GroupLimitsConfig | null, limits: { maxConcurrent?: number; rate?: KindRate } = {}): Promise<void> {
  const parsed = groups === null ? null : parseGroupRules(groups);
  if (parsed !== null && !parsed.ok) throw new Error(parsed.problems.join('; '));
  await store.kindUpsert({ ...kindParams(TENANT, KIND, null), ...limits, groups: parsed === null ? null : parsed.rules });
}

/** `count` jobs of `group` (null: no group), enqueued in one batch. */
async function fill(store: Store, group: string | null, count: number, overrides: { priority?: number; runAfter?: number } = {}): Promise<void> {
  const name = group ?? 'none';
  await store.jobEnqueueMany(
    Array.from({ length: count }, (_, i) => enqueueParams(`${name}-${i}-${Math.random()}`, { kind: KIND, group, payload: { group: name, i }, ...overrides })),
  );
}

function groupOf(job: LeasedJob): string {
  return (job.payload as { group: string }).group;
}

/** Leases one job at a time, `count` times, and answers each job's group. */
async function leaseEach(store: Store, count: number): Promise<string[]> {
  const groups: string[] = [];
  for (let i = 0; i < count; i++) {
    const [job] = await store.jobLease(leaseParams({ max: 1, kinds: [KIND] }));
    if (job === undefined) break;
    groups.push(groupOf(job));
  }
  return groups;
}

function tally(groups: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const group of groups) counts[group] = (counts[group] ?? 0) + 1;
  return counts;
}

describe.each(backends)('store conformance ($label): fair shares among groups', (factory) => {
  const backend = useBackend(factory);

  it('answers each leased job’s group, and null for a job without one', async () => {
    const store = backend.store;
    await register(store, {});
    await fill(store, 'acme', 2);
    await fill(store, null, 2);
    const leased = await store.jobLease(leaseParams({ max: 10, kinds: [KIND] }));
    expect(leased.map((job) => [groupOf(job), job.group]).sort()).toEqual([
      ['acme', 'acme'],
      ['acme', 'acme'],
      ['none', null],
      ['none', null],
    ]);
  });

  it('skew: a light group enqueued after a heavy backlog is leased within the first leases, with or without a kinds filter', async () => {
    const store = backend.store;
    await fill(store, 'heavy', 200);
    await fill(store, 'light', 5);
    const first = await leaseEach(store, 10);
    expect(first.filter((group) => group === 'light')).toHaveLength(5);
    // A batch lease without a kinds filter shares the same way.
    await fill(store, 'light', 4);
    const batch = await store.jobLease(leaseParams({ max: 8 }));
    expect(tally(batch.map(groupOf))).toEqual({ heavy: 4, light: 4 });
  });

  it('answers the group of a job (null without one) in jobGet and jobList', async () => {
    const store = backend.store;
    const grouped = await enqueue(store, 'g', { kind: KIND, group: 'customer-7' });
    const plain = await enqueue(store, 'p', { kind: KIND });
    expect(grouped.group).toBe('customer-7');
    expect((await getJob(store, grouped.id)).group).toBe('customer-7');
    expect((await getJob(store, plain.id)).group).toBeNull();
    const page = await store.jobList({ scope: { tenant: TENANT }, limit: 10 });
    expect(Object.fromEntries(page.jobs.map((job) => [job.id, job.group]))).toEqual({ [grouped.id]: 'customer-7', [plain.id]: null });
  });

  it('keeps each job’s group in a batch that mixes jobs with and without one, and leases them by the group plan', async () => {
    const store = backend.store;
    const outcomes = await store.jobEnqueueMany([
      enqueueParams('mixed-plain', { kind: KIND }),
      enqueueParams('mixed-grouped', { kind: KIND, group: 'customer-9' }),
    ]);
    const ids = outcomes.map((outcome) => (outcome.kind === 'created' ? outcome.job.id : ''));
    expect((await getJob(store, ids[0] ?? '')).group).toBeNull();
    expect((await getJob(store, ids[1] ?? '')).group).toBe('customer-9');
    const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', kinds: [KIND], leaseMs: 60_000, max: 2 });
    expect(Object.fromEntries(leased.map((job) => [job.id, job.group]))).toEqual({ [ids[0] ?? '']: null, [ids[1] ?? '']: 'customer-9' });
  });

  it('stores a kind’s groups and answers them', async () => {
    const store = backend.store;
    await register(store, { maxConcurrent: 2, rate: { limit: 5, perMs: 1_000 }, weights: { gold: 3, '': 0.5 } });
    const kind = await store.kindGet({ tenant: TENANT, kind: KIND });
    expect(kind?.groups?.maxConcurrent).toBe(2);
    expect(kind?.groups?.rate).toEqual({ limit: 5, perMs: 1_000 });
    expect([...(kind?.groups?.weights ?? [])]).toEqual([
      ['', 0.5],
      ['gold', 3],
    ]);
    await register(store, null);
    expect((await store.kindGet({ tenant: TENANT, kind: KIND }))?.groups).toBeNull();
  });

  it('weights: a group of weight 3 gets three leases for each of a group of weight 1 while both wait', async () => {
    const store = backend.store;
    await register(store, { weights: { gold: 3 } });
    await fill(store, 'gold', 60);
    await fill(store, 'plain', 60);
    expect(tally(await leaseEach(store, 40))).toEqual({ gold: 30, plain: 10 });
  });

  it('per-group maxConcurrent: a full group is skipped while the others lease, and its end frees the slot', async () => {
    const store = backend.store;
    await register(store, { maxConcurrent: 2 });
    await fill(store, 'a', 10);
    await fill(store, 'b', 10);
    await fill(store, 'c', 1);
    const leased = await store.jobLease(leaseParams({ max: 10, kinds: [KIND] }));
    expect(tally(leased.map(groupOf))).toEqual({ a: 2, b: 2, c: 1 });
    expect(await store.jobLease(leaseParams({ max: 10, kinds: [KIND] }))).toEqual([]);
    // A slot held is what a parked poll waits for.
    expect(await store.jobNextDue({ tenant: TENANT, kinds: [KIND] })).toMatchObject({ slotHeld: true });
    const a = leased.find((job) => groupOf(job) === 'a');
    if (a === undefined) throw new Error('no job of a');
    expect(await store.jobComplete({ tenant: TENANT, id: a.id, token: a.token })).toMatchObject({ kind: 'completed' });
    expect((await store.jobLease(leaseParams({ max: 10, kinds: [KIND] }))).map(groupOf)).toEqual(['a']);
  });

  it('the kind’s own maxConcurrent caps the whole kind, shared among the groups', async () => {
    const store = backend.store;
    await register(store, { maxConcurrent: 5 }, { maxConcurrent: 4 });
    await fill(store, 'a', 10);
    await fill(store, 'b', 10);
    const leased = await store.jobLease(leaseParams({ max: 10, kinds: [KIND] }));
    expect(tally(leased.map(groupOf))).toEqual({ a: 2, b: 2 });
    expect(await store.jobLease(leaseParams({ max: 10 }))).toEqual([]);
  });

  it('the kind’s own rate caps the whole kind, shared among the groups, and moves the kind’s window', async () => {
    const store = backend.store;
    await register(store, null, { rate: { limit: 3, perMs: 3_600_000 } });
    await fill(store, 'a', 5);
    await fill(store, 'b', 5);
    const leased = await store.jobLease(leaseParams({ max: 10, kinds: [KIND] }));
    expect(leased).toHaveLength(3);
    expect(new Set(leased.map(groupOf))).toEqual(new Set(['a', 'b']));
    expect(await store.jobLease(leaseParams({ max: 10 }))).toEqual([]);
    expect((await store.jobNextDue({ tenant: TENANT, kinds: [KIND] }))?.runAfter).toBeGreaterThan((await store.now()) + 3_000_000);
  });

  it('a lease that reaches a kind with groups and one without takes from both, in lease order across them', async () => {
    const store = backend.store;
    await fill(store, 'heavy', 20, { priority: 1 });
    await store.jobEnqueueMany(Array.from({ length: 20 }, (_, i) => enqueueParams(`plain-${i}`, { kind: 'email', payload: { group: 'email', i } })));
    // Priority 1 first across kinds, as without groups: the kind with groups gives its plan's jobs.
    expect((await store.jobLease(leaseParams({ max: 4 }))).map(groupOf)).toEqual(['heavy', 'heavy', 'heavy', 'heavy']);
    await fill(store, 'light', 2, { priority: 1 });
    const both = await store.jobLease(leaseParams({ max: 30 }));
    expect(tally(both.map(groupOf))).toEqual({ heavy: 16, light: 2, email: 12 });
    // The kind without groups still takes the plain lease with a filter of its own.
    expect(await store.jobLease(leaseParams({ max: 30, kinds: ['email'] }))).toHaveLength(8);
  });

  it('per-group rate: each group starts at most `limit` jobs per window, and the others still lease', async () => {
    const store = backend.store;
    await register(store, { rate: { limit: 2, perMs: 3_600_000 } });
    await fill(store, 'a', 5);
    await fill(store, 'b', 5);
    const first = await store.jobLease(leaseParams({ max: 3, kinds: [KIND] }));
    expect(first).toHaveLength(3);
    const second = await store.jobLease(leaseParams({ max: 10, kinds: [KIND] }));
    expect(tally([...first, ...second].map(groupOf))).toEqual({ a: 2, b: 2 });
    for (const job of [...first, ...second]) await store.jobComplete({ tenant: TENANT, id: job.id, token: job.token });
    expect(await store.jobLease(leaseParams({ max: 10 }))).toEqual([]);
    await fill(store, 'c', 1);
    expect((await store.jobLease(leaseParams({ max: 10 }))).map(groupOf)).toEqual(['c']);
    const due = await store.jobNextDue({ tenant: TENANT, kinds: [KIND] });
    expect(due?.runAfter).toBeGreaterThan((await store.now()) + 3_000_000);
  });

  it('priority orders the jobs within a group, not across groups', async () => {
    const store = backend.store;
    await fill(store, 'a', 1, { priority: 0 });
    await fill(store, 'a', 1, { priority: 9 });
    await fill(store, 'a', 1, { priority: 5 });
    await fill(store, 'b', 3, { priority: -5 });
    const leased: LeasedJob[] = [];
    for (let i = 0; i < 6; i++) leased.push(...(await store.jobLease(leaseParams({ max: 1, kinds: [KIND] }))));
    expect(leased.map(groupOf)).toEqual(['a', 'b', 'a', 'b', 'a', 'b']);
    const priorities = await Promise.all(leased.filter((job) => groupOf(job) === 'a').map(async (job) => (await getJob(store, job.id)).priority));
    expect(priorities).toEqual([9, 5, 0]);
  });

  it('an idle group banks no credit: a group that comes back shares evenly instead of catching up', async () => {
    const store = backend.store;
    await fill(store, 'steady', 100);
    expect(tally(await leaseEach(store, 30))).toEqual({ steady: 30 });
    await fill(store, 'returning', 30);
    const after = tally(await leaseEach(store, 20));
    expect(after.returning).toBeGreaterThanOrEqual(9);
    expect(after.returning).toBeLessThanOrEqual(11);
  });

  it('jobs without a group form one group of their own beside the named ones', async () => {
    const store = backend.store;
    await fill(store, 'a', 50);
    await fill(store, 'b', 50);
    await fill(store, null, 50);
    expect(tally(await leaseEach(store, 30))).toEqual({ a: 10, b: 10, none: 10 });
  });

  it('every end of a lease frees its group’s slot: complete, fail with a retry, fail for good, expiry, a cancelled run', async () => {
    const store = backend.store;
    await register(store, { maxConcurrent: 1 });
    await fill(store, 'a', 8);
    const next = async (): Promise<LeasedJob> => {
      const jobs = await store.jobLease(leaseParams({ max: 5, kinds: [KIND], leaseMs: 60_000 }));
      expect(jobs).toHaveLength(1);
      expect(await store.jobLease(leaseParams({ max: 5, kinds: [KIND] }))).toEqual([]);
      return jobs[0] as LeasedJob;
    };
    let job = await next();
    await store.jobComplete({ tenant: TENANT, id: job.id, token: job.token });
    job = await next();
    await store.jobFail({ tenant: TENANT, id: job.id, token: job.token, error: ERROR, retryable: true, backoff: HOUR_BACKOFF });
    job = await next();
    await store.jobFail({ tenant: TENANT, id: job.id, token: job.token, error: ERROR, retryable: false, backoff: IMMEDIATE_BACKOFF });
    job = await next();
    await expireLease(store, await shortenLease(store, job));
    job = await next();
    expect(await store.jobCancel({ scope: { tenant: TENANT }, id: job.id })).toMatchObject({ kind: 'cancel_requested' });
    expect(await store.jobFail({ tenant: TENANT, id: job.id, token: job.token, error: ERROR, retryable: true, backoff: IMMEDIATE_BACKOFF })).toMatchObject({
      status: 'cancelled',
    });
    await next();
  });

  it('a cancelled queued job leaves its group’s count, and a group with only delayed jobs waits without holding the others', async () => {
    const store = backend.store;
    const cancelled = await enqueue(store, 'c', { kind: KIND, group: 'gone' });
    expect(await store.jobCancel({ scope: { tenant: TENANT }, id: cancelled.id })).toMatchObject({ kind: 'cancelled' });
    const later = (await store.now()) + 3_600_000;
    await fill(store, 'delayed', 3, { runAfter: later });
    await fill(store, 'now', 2);
    expect(tally((await store.jobLease(leaseParams({ max: 10, kinds: [KIND] }))).map(groupOf))).toEqual({ now: 2 });
    expect(await store.jobLease(leaseParams({ max: 10, kinds: [KIND] }))).toEqual([]);
    expect((await store.jobNextDue({ tenant: TENANT, kinds: [KIND] }))?.runAfter).toBe(later);
  });

  it('holds each group’s maxConcurrent across two stores over one database leasing at once', async () => {
    const store = backend.store;
    const peer = await backend.instance.openPeer();
    await register(store, { maxConcurrent: 2 });
    for (const group of ['a', 'b', 'c', 'd', 'e']) await fill(store, group, 10);
    const leases = await Promise.all(
      Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? store : peer).jobLease(leaseParams({ max: 3, kinds: [KIND], workerId: `w${i}` }))),
    );
    expect(tally(leases.flat().map(groupOf))).toEqual({ a: 2, b: 2, c: 2, d: 2, e: 2 });
  });

  it('leaves no group waiting or running once every job has run, after concurrent enqueues, leases, retries and completions', async () => {
    const store = backend.store;
    const peer = await backend.instance.openPeer();
    await register(store, { maxConcurrent: 3 });
    const groups = ['a', 'b', 'c', 'd', 'e', 'f'];
    const total = 120;
    const enqueues = Array.from({ length: 6 }, (_, batch) =>
      (batch % 2 === 0 ? store : peer).jobEnqueueMany(
        Array.from({ length: total / 6 }, (_, i) =>
          enqueueParams(`mix-${batch}-${i}`, { kind: KIND, group: groups[(batch + i) % groups.length] as string, payload: { group: 'x', i } }),
        ),
      ),
    );
    const succeeded = new Set<string>();
    let failures = 0;
    const loop = async (on: Store, worker: string): Promise<void> => {
      for (let idle = 0; succeeded.size < total && idle < 2_000; ) {
        const jobs = await on.jobLease(leaseParams({ max: 4, kinds: [KIND], workerId: worker }));
        if (jobs.length === 0) {
          idle += 1;
          await new Promise((resolve) => setImmediate(resolve));
          continue;
        }
        for (const job of jobs) {
          if (failures < 10 && job.attempt === 1 && job.id.endsWith('0')) {
            failures += 1;
            await on.jobFail({ tenant: TENANT, id: job.id, token: job.token, error: ERROR, retryable: true, backoff: IMMEDIATE_BACKOFF });
          } else if ((await on.jobComplete({ tenant: TENANT, id: job.id, token: job.token })).kind === 'completed') succeeded.add(job.id);
        }
      }
    };
    await Promise.all([...enqueues, loop(store, 'w1'), loop(peer, 'w2'), loop(store, 'w3')]);
    expect(succeeded.size).toBe(total);
    expect(await store.groupStats({ tenant: TENANT, limit: 10 })).toEqual({ top: [], rest: { groups: 0, waiting: 0, running: 0 } });
  });

  it('a lease among many groups and many jobs takes a full batch, one job from each of the groups with the smallest tags', async () => {
    const store = backend.store;
    const groups = 300;
    await store.jobEnqueueMany(
      Array.from({ length: groups * 10 }, (_, i) =>
        enqueueParams(`many-${i}`, { kind: KIND, group: `g${String(i % groups).padStart(3, '0')}`, payload: { group: `g${i % groups}`, i } }),
      ),
    );
    const leased = await store.jobLease(leaseParams({ max: 16, kinds: [KIND] }));
    expect(leased).toHaveLength(16);
    expect(new Set(leased.map(groupOf)).size).toBe(16);
    // The next lease goes on with the groups not yet served, not back to the first ones.
    const again = await store.jobLease(leaseParams({ max: 16 }));
    expect(new Set([...leased, ...again].map(groupOf)).size).toBe(32);
  });
});
