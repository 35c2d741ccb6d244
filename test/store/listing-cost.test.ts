/**
 * A page of a tenant's queued jobs (GET /jobs?status=queued) reads that page,
 * however many jobs the tenant has queued: on SQLite the plan walks
 * job_ready_listing from the cursor without a sort of the tenant's ready rows
 * (a sort held the event loop for milliseconds per 10,000 queued jobs, for
 * every tenant); on PostgreSQL the rows the statement reads (EXPLAIN ANALYZE)
 * beside 5,000 queued jobs of the tenant stay near the page size. Pages still
 * come newest first and the cursor walks them all.
 */

import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as C from '../../src/store/postgres/catalog-queries.js';
import { SQL } from '../../src/store/sqlite/queries.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { EnqueueParams, Store } from '../../src/store/store.js';
import { JOB_TABLES, jobRowsRead, storeInNewSchema } from '../support/pg-plan.js';
import { plainJob } from '../support/plain-jobs.js';
import { sqlitePlan } from '../support/sqlite-plan.js';

const QUEUED = 5_000;
const TENANT = 't1';

function job(kind: string, i: number): EnqueueParams {
  return plainJob(TENANT, kind, i);
}

async function seed(store: Store): Promise<void> {
  for (let start = 0; start < QUEUED; start += 1_000) {
    await store.jobEnqueueMany(Array.from({ length: 1_000 }, (_, i) => job(i % 2 === 0 ? 'a' : 'b', start + i)));
  }
  // A few running, newest among them: the queued listing skips them.
  await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 60_000, max: 5 });
}

async function pagesNewestFirst(store: Store): Promise<void> {
  const first = await store.jobList({ scope: { tenant: TENANT }, status: 'queued', limit: 10 });
  expect(first.nextCursor).not.toBeNull();
  const second = await store.jobList({ scope: { tenant: TENANT }, status: 'queued', limit: 10, cursor: first.nextCursor as string });
  const items = [...first.jobs, ...second.jobs];
  expect(items.every((item) => item.status === 'queued')).toBe(true);
  // The newest jobs, newest first, as the tenant's unfiltered listing has them (the running ones are the oldest).
  const newest = await store.jobList({ scope: { tenant: TENANT }, limit: 20 });
  expect(items.map((item) => item.id)).toEqual(newest.jobs.map((item) => item.id));
}

describe('a page of queued jobs beside 5,000 queued (sqlite)', () => {
  let dir: string;
  let path: string;
  let store: SqliteStore;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'leasehold-listing-cost-'));
    path = join(dir, 'jobs.db');
    store = SqliteStore.open({ path });
    await seed(store);
  }, 120_000);
  afterAll(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('walks job_ready_listing from the cursor, with no sort and no scan', () => {
    const db = new Database(path, { readonly: true });
    try {
      const plan = sqlitePlan(db, SQL.jobListQueued, { tenant: TENANT, kind: null, owner: null, cursor: Number.MAX_SAFE_INTEGER, limit: 11 });
      expect(plan).toMatch(/SEARCH q USING (COVERING )?INDEX job_ready_listing \(tenant=\? AND seq<\?\)/);
      expect(plan).not.toMatch(/TEMP B-TREE|SCAN/);
    } finally {
      db.close();
    }
  });

  it('pages newest first through the cursor', async () => {
    await pagesNewestFirst(store);
  });
});

const url = process.env['DATABASE_URL'] ?? '';

describe.skipIf(url === '')('a page of queued jobs beside 5,000 queued (postgres)', () => {
  let store: Store;
  let client: pg.Client;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ store, client, close } = await storeInNewSchema(url, 'lh_test_listing_cost'));
    await seed(store);
    await client.query('ANALYZE');
  }, 120_000);
  afterAll(async () => {
    await close();
  });

  it('reads about a page of rows from job_ready and jobs, not the tenant’s queue', async () => {
    const read = await jobRowsRead(client, C.JOB_LIST_QUEUED.text, [TENANT, null, null, null, 11], JOB_TABLES);
    const total = read.reduce((sum, rows) => sum + rows, 0);
    // The page's 11 ready rows and their 11 jobs (and leases probed), not 5,000.
    expect(total).toBeLessThanOrEqual(60);
  });

  it('pages newest first through the cursor', async () => {
    await pagesNewestFirst(store);
  });
});
