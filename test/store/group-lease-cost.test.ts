/**
 * A fair lease reads a bounded number of rows however many groups and jobs
 * wait (docs/FAIRNESS.md §4): beside a heavy group of 3,000 queued jobs, 400
 * light groups and 500 jobs without a group, on SQLite the statements of
 * group-lease.ts walk the candidate index and each group's range of job_ready
 * by their keys (no scan, no sort), and on PostgreSQL the rows each plan node
 * actually read (EXPLAIN ANALYZE) stay within the candidate budget and the
 * lease's max, whatever the backlog.
 */

import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { candidateBudget } from '../../src/core/group-transitions.js';
import type { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import * as Q from '../../src/store/postgres/queries.js';
import { SQL } from '../../src/store/sqlite/queries.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { EnqueueParams, Store } from '../../src/store/store.js';
import { jobRowsRead, storeInNewSchema } from '../support/pg-plan.js';
import { plainJob } from '../support/plain-jobs.js';
import { sqlitePlan } from '../support/sqlite-plan.js';

const TENANT = 't1';
const KIND = 'report';
const GROUPS = 400;
const MAX = 10;

function job(i: number, group: string | null): EnqueueParams {
  return { ...plainJob(TENANT, KIND, i), group };
}

async function seed(store: Store): Promise<void> {
  let n = 0;
  for (let start = 0; start < 3_000; start += 1_000) await store.jobEnqueueMany(Array.from({ length: 1_000 }, () => job(n++, 'heavy')));
  await store.jobEnqueueMany(Array.from({ length: GROUPS * 5 }, (_, i) => job(n++, `g${String(i % GROUPS).padStart(3, '0')}`)));
  await store.jobEnqueueMany(Array.from({ length: 500 }, () => job(n++, null)));
}

/** The store still leases a full batch from the seeded backlog, one job of each of the first groups. */
async function leasesAFullBatch(store: Store): Promise<void> {
  const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 60_000, max: MAX, kinds: [KIND] });
  expect(leased).toHaveLength(MAX);
}

describe('fair lease cost among many groups (sqlite)', () => {
  let dir: string;
  let path: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lh-group-cost-'));
    path = join(dir, 'jobs.db');
    const store = await SqliteStore.open({ path });
    await seed(store);
    await leasesAFullBatch(store);
    await store.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('walks the candidate index and each group’s range by their keys, never scanning or sorting', () => {
    const db = new Database(path, { readonly: true });
    try {
      const bindings = { tenant: TENANT, kind: KIND, now: Date.now(), max: MAX, budget: candidateBudget(MAX), groupKey: 'heavy', n: MAX };
      const candidates = sqlitePlan(db, SQL.groupCandidates, bindings);
      expect(candidates).toMatch(/SEARCH g USING INDEX group_candidates \(tenant=\? AND kind=\?\)/);
      expect(candidates).toMatch(/SEARCH r USING PRIMARY KEY \(tenant=\? AND kind=\? AND group_key=\?/);
      const ungrouped = sqlitePlan(db, SQL.groupUngrouped, bindings);
      expect(ungrouped).toMatch(/SEARCH r USING PRIMARY KEY \(tenant=\? AND kind=\? AND group_key=\?/);
      const pick = sqlitePlan(db, SQL.groupPick, bindings);
      expect(pick).toMatch(/SEARCH r USING PRIMARY KEY \(tenant=\? AND kind=\? AND group_key=\?/);
      const wake = sqlitePlan(db, SQL.groupWake, { ...bindings, limit: 256 });
      expect(wake).toMatch(/group_wakes/);
      // A group's earliest ready job (a parked candidate's wake, next-due's ungrouped jobs): its first row of each priority.
      const earliest = sqlitePlan(db, SQL.groupEarliest, bindings);
      expect(earliest).toMatch(/SEARCH job_ready USING PRIMARY KEY \(tenant=\? AND kind=\? AND group_key=\? AND priority<\?\)/);
      // What a parked poll waits for: a probe of each partial index of the group rows.
      const due = sqlitePlan(db, SQL.groupNextDue, bindings);
      for (const index of ['group_candidates', 'group_wakes', 'group_slots']) expect(due).toContain(`USING INDEX ${index}`);
      for (const plan of [candidates, ungrouped, pick, wake, earliest, due]) {
        expect(plan).not.toMatch(/SCAN (g|r|job_ready|group_states)\b|TEMP B-TREE/);
      }
    } finally {
      db.close();
    }
  });
});

const url = process.env['DATABASE_URL'] ?? '';

describe.skipIf(url === '')('fair lease cost among many groups (postgres)', () => {
  let store: PostgresStore;
  let client: pg.Client;
  let close = async (): Promise<void> => undefined;

  beforeAll(async () => {
    ({ store, client, close } = await storeInNewSchema(url, 'lh_test_group_cost'));
    await seed(store);
    await leasesAFullBatch(store);
    await client.query('ANALYZE jobs, job_ready, job_leases, group_states');
  }, 120_000);
  afterAll(() => close());

  const tables = ['jobs', 'job_ready', 'group_states'];
  const sum = (rows: readonly number[]): number => rows.reduce((a, b) => a + b, 0);

  it('reads at most the candidate budget of group rows, and at most max ready rows of each', async () => {
    const budget = candidateBudget(MAX);
    const read = await jobRowsRead(client, Q.GROUP_CANDIDATES.text, [TENANT, KIND, MAX, budget], tables);
    // Each candidate row, and at most MAX entries of its range (plus the one that ends each walk).
    expect(sum(read)).toBeLessThanOrEqual(budget * (MAX + 2));
    expect(sum(read)).toBeLessThan(3_000);
  });

  it('finds a group’s earliest ready job and what a parked poll waits for without reading a backlog', async () => {
    expect(sum(await jobRowsRead(client, Q.GROUP_EARLIEST.text, [TENANT, KIND, 'heavy'], tables))).toBeLessThanOrEqual(8);
    expect(sum(await jobRowsRead(client, Q.GROUP_NEXT_DUE.text, [TENANT, KIND], tables))).toBeLessThanOrEqual(8);
  });

  it('reads at most max rows of the ungrouped group and of a picked group, however long their backlogs', async () => {
    expect(sum(await jobRowsRead(client, Q.GROUP_UNGROUPED.text, [TENANT, KIND, MAX], tables))).toBeLessThanOrEqual(MAX + 2);
    expect(sum(await jobRowsRead(client, Q.GROUP_PICK.text, [TENANT, KIND, 'heavy', MAX], tables))).toBeLessThanOrEqual(MAX + 2);
  });
});
