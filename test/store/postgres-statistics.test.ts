/**
 * PostgreSQL's planner statistics of jobs, kept fresh by the store (statistics.ts). Before jobs was ever
 * analyzed, the planner walked the tenant's available index for each kind of a kinds filter, and for a
 * kind without queued jobs it read another kind's whole backlog (3,009 rows for a lease of 10 here); the
 * reaper's tick analyzes jobs once its statistics are stale, and the lease then reads O(max) rows through
 * the per-kind index.
 */

import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import * as Q from '../../src/store/postgres/queries.js';
import type { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { STATISTICS_CHECK_MS, statisticsOutgrown, statisticsStale } from '../../src/store/postgres/statistics.js';
import type { EnqueueParams } from '../../src/store/store.js';
import { JOB_TABLES, jobRowsRead, storeInNewSchema } from '../support/pg-plan.js';

const url = process.env['DATABASE_URL'] ?? '';
const TENANT = 't1';
const BACKLOG = 3_000;

function job(kind: string, n: number, priority: number): EnqueueParams {
  return {
    tenant: TENANT,
    owner: 'u',
    idempotencyKey: `${kind}-${n}`,
    requestHash: `h-${kind}-${n}`,
    kind,
    payload: { n },
    maxAttempts: 3,
    priority,
    runAfter: null,
    deadlineMs: null,
    payloadBytes: 8,
  };
}

describe('stale statistics', () => {
  it('for the reaper’s check: the table’s pages have more than doubled (plus one) since it was analyzed', () => {
    expect(statisticsOutgrown(1, 0)).toBe(false);
    expect(statisticsOutgrown(2, 0)).toBe(true);
    expect(statisticsOutgrown(2_001, 1_000)).toBe(false);
    expect(statisticsOutgrown(2_002, 1_000)).toBe(true);
    // Churn without growth is not stale: every ANALYZE makes every connection plan the hot statements again.
    expect(statisticsOutgrown(1_000, 1_000)).toBe(false);
  });

  it('for the retention tick’s upkeep, PostgreSQL autovacuum’s rule: more than 50 rows plus a tenth of the table changed', () => {
    expect(statisticsStale(50, 0)).toBe(false);
    expect(statisticsStale(51, 0)).toBe(true);
    expect(statisticsStale(100_050, 1_000_000)).toBe(false);
    expect(statisticsStale(100_051, 1_000_000)).toBe(true);
  });
});

describe.skipIf(url === '')('the store keeps the statistics of jobs fresh (postgres)', () => {
  let store: PostgresStore;
  let client: pg.Client;
  let close = async (): Promise<void> => undefined;

  beforeAll(async () => {
    ({ store, client, close } = await storeInNewSchema(url, 'lh_test_statistics'));
    // A new queue, never analyzed, and no autovacuum to analyze it meanwhile.
    await client.query('ALTER TABLE jobs SET (autovacuum_enabled = false)');
    // Kind w's jobs come first in the tenant's available index (a higher priority) and have all run; kind b has
    // a backlog; kind a has a few jobs.
    await store.jobEnqueueMany(Array.from({ length: 500 }, (_, i) => job('w', i, 10)));
    for (let n = 0; n < BACKLOG; n += 500) await store.jobEnqueueMany(Array.from({ length: 500 }, (_, i) => job('b', n + i, 0)));
    for (let done = 0; done < 500; ) {
      const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', kinds: ['w'], leaseMs: 60_000, max: 100 });
      await store.jobCompleteMany(leased.map((j) => ({ tenant: TENANT, id: j.id, token: j.token })));
      done += leased.length;
    }
  }, 120_000);
  afterAll(() => close());

  async function analyzedAt(): Promise<string | null> {
    return (
      (await client.query<{ at: string | null }>(`SELECT last_analyze::text AS at FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass`)).rows[0]?.at ?? null
    );
  }

  it('analyzes jobs at the reaper’s tick, after which a lease reads O(max) rows, not the backlog for kinds without jobs', async () => {
    const before = await analyzedAt();
    await store.jobReapExpired();
    expect(await analyzedAt()).not.toBe(before);
    const tokens = Array.from({ length: 10 }, (_, i) => `token-${i}`);
    const reads = await jobRowsRead(client, Q.JOB_LEASE_KINDS.text, [TENANT, 10, tokens, 'w', 60_000, ['b', 'w', 'idle']], JOB_TABLES);
    // The pick walks job_ready: 10 entries of kind b and none of kinds w and idle (no queued jobs); it deletes those 10 ready
    // rows and reads the 10 taken jobs.
    expect(reads.reduce((sum, n) => sum + n, 0)).toBeLessThanOrEqual(3 * 10 + 2);
  });

  it('looks again only after its interval', async () => {
    // A queue of its own, never analyzed, so a hundred jobs outgrow its statistics.
    const fresh = await storeInNewSchema(url, 'lh_test_statistics_interval');
    const analyzed = async (): Promise<string | null> =>
      (await fresh.client.query<{ at: string | null }>(`SELECT last_analyze::text AS at FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass`)).rows[0]
        ?.at ?? null;
    // The store's clock (performance.now) moves only when the test moves it; its timers and the database's stay real.
    vi.useFakeTimers({ toFake: ['performance'] });
    try {
      // Past any check made so far: this reap looks at an empty table, and the interval starts now.
      vi.advanceTimersByTime(3_600_000);
      await fresh.store.jobReapExpired();
      expect(await analyzed()).toBeNull();
      // A hundred jobs take more than two pages: the table has outgrown statistics it never had.
      await fresh.store.jobEnqueueMany(Array.from({ length: 100 }, (_, i) => job('c', i, 0)));
      // Outgrown now, but within the interval: no look.
      await fresh.store.jobReapExpired();
      expect(await analyzed()).toBeNull();
      vi.advanceTimersByTime(STATISTICS_CHECK_MS);
      await fresh.store.jobReapExpired();
      expect(await analyzed()).not.toBeNull();
    } finally {
      vi.useRealTimers();
      await fresh.close();
    }
  });
});
