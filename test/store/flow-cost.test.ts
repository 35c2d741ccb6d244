/**
 * What per-kind limits cost a lease, on both backends, beside 20,000 queued
 * jobs of a paused kind: the restricted path reads the tenant's restricted
 * kinds from kinds_flow, finds the queued kinds with a skip scan (one probe
 * each), and walks each kind the lease may take for at most its cap, so a
 * lease still reads O(max × kinds) rows and never the paused kind's backlog.
 * On PostgreSQL the unrestricted statement with a restricted kind in reach
 * reads no job at all before it hands over (its guard is evaluated first).
 */

import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as Q from '../../src/store/postgres/queries.js';
import type { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { jobLeaseKindsSql, SQL, withLeaseMax } from '../../src/store/sqlite/queries.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { EnqueueParams, Store } from '../../src/store/store.js';
import { kindParams } from '../support/kind-records.js';
import { JOB_TABLES, jobRowsRead as readJobRows, storeInNewSchema } from '../support/pg-plan.js';

const BACKLOG = 20_000;
const TENANT = 't1';

function job(kind: string, i: number, priority = 0): EnqueueParams {
  const key = `${kind}-${i}`;
  return {
    tenant: TENANT,
    owner: 'u',
    idempotencyKey: key,
    requestHash: key,
    kind,
    payload: { i },
    maxAttempts: 3,
    priority,
    runAfter: null,
    deadlineMs: null,
    payloadBytes: 8,
  };
}

/** BACKLOG jobs of kind b (paused, and first in lease order), 50 of a (maxConcurrent 2) and 50 of c (free). */
async function seed(store: Store): Promise<void> {
  for (let start = 0; start < BACKLOG; start += 1_000) {
    await store.jobEnqueueMany(Array.from({ length: 1_000 }, (_, i) => job('b', start + i, 10)));
  }
  await store.jobEnqueueMany(Array.from({ length: 50 }, (_, i) => [job('a', i), job('c', i)]).flat());
  await store.kindUpsert({ ...kindParams(TENANT, 'b', null) });
  await store.kindSetPaused({ tenant: TENANT, kind: 'b', paused: true });
  await store.kindUpsert({ ...kindParams(TENANT, 'a', null), maxConcurrent: 2 });
  await store.kindUpsert({ ...kindParams(TENANT, 'c', null) });
}

describe('lease cost beside a paused kind\u2019s backlog (sqlite)', () => {
  let dir: string;
  let path: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lh-flow-cost-'));
    path = join(dir, 'jobs.db');
    const store = SqliteStore.open({ path });
    await seed(store);
    await store.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function plan(db: Database.Database, sql: string, bindings: Record<string, unknown>): string {
    return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(bindings) as { detail: string }[]).map((row) => row.detail).join('\n');
  }

  it('reads restricted kinds from kinds_flow, queued kinds by a skip scan, and each kind for at most its cap', () => {
    const db = new Database(path, { readonly: true });
    try {
      db.function('lh_token', () => 'x');
      expect(plan(db, SQL.kindFlowState, { tenant: TENANT })).toMatch(/SEARCH k USING (COVERING )?INDEX kinds_flow \(tenant=\?/);
      const queued = plan(db, SQL.jobQueuedKinds, { tenant: TENANT, limit: 1_000 });
      expect(queued).toMatch(/SEARCH job_ready USING PRIMARY KEY \(tenant=\? AND kind>\?\)/);
      expect(queued).not.toMatch(/SCAN (jobs|job_ready)\b/);
      const capped = plan(db, jobLeaseKindsSql(2, true), {
        tenant: TENANT,
        workerId: 'w',
        leaseMs: 1_000,
        max: 10,
        now: Date.now(),
        k0: 'a',
        m0: 2,
        k1: 'c',
        m1: 10,
      });
      expect(capped.split('\n').filter((d) => /SEARCH job_ready USING PRIMARY KEY \(tenant=\? AND kind=\? AND group_key=\?\)/.test(d))).toHaveLength(2);
      expect(capped).not.toMatch(/SCAN (jobs|job_ready)\b|SEARCH jobs/);
      // The unrestricted statements' guard is a probe of kinds_flow.
      expect(plan(db, withLeaseMax(jobLeaseKindsSql(1), 10), { tenant: TENANT, workerId: 'w', leaseMs: 1_000, now: Date.now(), k0: 'a' })).toMatch(
        /kinds_flow/,
      );
    } finally {
      db.close();
    }
  });

  it('leases the free kind and the limited one up to its limit, never the paused backlog', async () => {
    const store = SqliteStore.open({ path });
    try {
      const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 60_000, max: 10 });
      expect(leased.filter((j) => j.kind === 'a')).toHaveLength(2);
      expect(leased.filter((j) => j.kind === 'c')).toHaveLength(8);
    } finally {
      await store.close();
    }
  });
});

const url = process.env['DATABASE_URL'] ?? '';

describe.skipIf(url === '')('lease cost beside a paused kind\u2019s backlog (postgres)', () => {
  let store: PostgresStore;
  let client: pg.Client;
  let close = async (): Promise<void> => undefined;

  beforeAll(async () => {
    ({ store, client, close } = await storeInNewSchema(url, 'lh_test_flow_cost'));
    await seed(store);
    await client.query('ANALYZE jobs, job_ready, kinds');
  }, 120_000);
  afterAll(() => close());

  // Every table that holds jobs: the walks are job_ready's, the claims jobs'.
  const jobRowsRead = (text: string, values: readonly unknown[]): Promise<number[]> => readJobRows(client, text, values, JOB_TABLES);

  const tokens = Array.from({ length: 10 }, (_, i) => `token-${i}`);

  it('reads no job in the unrestricted statement once a kind in reach is restricted', async () => {
    for (const read of await jobRowsRead(Q.JOB_LEASE_ANY_KIND.text, [TENANT, 10, tokens, 'w', 60_000])) expect(read).toBe(0);
  });

  it('walks each kind for at most its cap, and finds the queued kinds with one probe each', async () => {
    for (const read of await jobRowsRead(Q.JOB_LEASE_CAPPED.text, [TENANT, 10, tokens, 'w', 60_000, ['a', 'c'], [2, 10]]))
      expect(read).toBeLessThanOrEqual(12 + 2);
    for (const read of await jobRowsRead(Q.JOB_QUEUED_KINDS.text, [TENANT, 1_000])) expect(read).toBeLessThanOrEqual(4);
  });

  it('leases the free kind and the limited one up to its limit, never the paused backlog', async () => {
    const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 60_000, max: 10 });
    expect(leased.filter((j) => j.kind === 'a')).toHaveLength(2);
    expect(leased.filter((j) => j.kind === 'c')).toHaveLength(8);
  });
});
