/**
 * A lease with a kinds filter reads each named kind's available jobs, never
 * another kind's backlog: the query plans on both backends (on SQLite the
 * lease statement walks job_ready's primary key once per named kind, at most
 * max rows each, and the steps after it reach each taken job by its key), and on
 * PostgreSQL the rows each plan node actually read (EXPLAIN ANALYZE) beside
 * 20,000 queued jobs of another kind and 500 of the named kind itself.
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
import { explainPrepared, planNodes, type PlanNode, storeInNewSchema } from '../support/pg-plan.js';
import { kindParams } from '../support/kind-records.js';
import { plainJob } from '../support/plain-jobs.js';
import { sqlitePlan } from '../support/sqlite-plan.js';

const BACKLOG = 20_000;
const TENANT = 't1';

function job(kind: string, i: number): EnqueueParams {
  return plainJob(TENANT, kind, i);
}

/**
 * BACKLOG queued jobs of kind b; then a0, c0, a1, c1, a2, c2; then a3…a499, so that kind a has a backlog of
 * its own that a lease of max 10 must not read either.
 */
async function seed(store: Store): Promise<void> {
  for (let start = 0; start < BACKLOG; start += 1_000) {
    await store.jobEnqueueMany(Array.from({ length: 1_000 }, (_, i) => job('b', start + i)));
  }
  await store.jobEnqueueMany([0, 1, 2].flatMap((i) => [job('a', i), job('c', i)]));
  await store.jobEnqueueMany(Array.from({ length: 497 }, (_, i) => job('a', i + 3)));
}

describe('lease cost with another kind backlogged (sqlite)', () => {
  let dir: string;
  let path: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lh-lease-cost-'));
    path = join(dir, 'jobs.db');
    const store = await SqliteStore.open({ path });
    await seed(store);
    await store.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('walks job_ready once per named kind, never scans a table, and reaches each taken job by its key', () => {
    const db = new Database(path, { readonly: true });
    try {
      db.function('lh_token', () => 'x');
      const bindings = { tenant: TENANT, workerId: 'w', leaseMs: 1_000, now: Date.now(), k0: 'a', k1: 'c' };
      const plan = (db.prepare(`EXPLAIN QUERY PLAN ${withLeaseMax(jobLeaseKindsSql(2), 10)}`).all(bindings) as { detail: string }[]).map((row) => row.detail);
      const walks = plan.filter((detail) => /SEARCH job_ready USING PRIMARY KEY \(tenant=\? AND kind=\? AND group_key=\?\)/.test(detail));
      expect(walks, plan.join('\n')).toHaveLength(2);
      expect(plan.join('\n')).not.toMatch(/SCAN (jobs|job_ready)\b|SEARCH jobs/);
      // The batch's next steps: its ready rows by their whole key, its jobs by row id (one statement each).
      const unready = sqlitePlan(db, SQL.readyDeleteMany, { tenant: TENANT, rows: '[]' });
      expect(unready).toMatch(/SEARCH job_ready USING PRIMARY KEY \(tenant=\? AND kind=\? AND group_key=\? AND priority=\? AND run_after=\? AND seq=\?\)/);
      expect(sqlitePlan(db, SQL.jobLeasedMany, { seqs: '[]' })).toMatch(/SEARCH jobs USING INTEGER PRIMARY KEY \(rowid=\?\)/);
      // Without a filter the tenant's queued kinds first: a skip scan, one probe per kind.
      const kinds = sqlitePlan(db, SQL.jobQueuedKinds, { tenant: TENANT, limit: 65 });
      expect(kinds).toMatch(/SEARCH job_ready USING PRIMARY KEY \(tenant=\? AND kind>\?\)/);
      expect(kinds).not.toMatch(/SCAN job_ready/);
    } finally {
      db.close();
    }
  });

  it('leases without a kinds filter across the queued kinds, in lease order', async () => {
    const store = await SqliteStore.open({ path: `${path}` });
    try {
      // The b backlog was enqueued first: the oldest of every kind.
      const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 60_000, max: 3 });
      expect(leased.map((j) => [j.kind, j.payload])).toEqual([
        ['b', { i: 0 }],
        ['b', { i: 1 }],
        ['b', { i: 2 }],
      ]);
    } finally {
      await store.close();
    }
  });

  it("leases the named kinds' jobs in lease order, merged across kinds, and none of the backlog", async () => {
    const store = await SqliteStore.open({ path });
    try {
      const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 60_000, max: 4, kinds: ['a', 'c', 'a'] });
      expect(leased.map((j) => j.kind).sort()).toEqual(['a', 'a', 'c', 'c']);
      // Enqueued a0, c0, a1, c1, a2, c2: the four oldest across both kinds.
      expect(leased.map((j) => j.payload)).toEqual([{ i: 0 }, { i: 0 }, { i: 1 }, { i: 1 }]);
    } finally {
      await store.close();
    }
  });
});

const url = process.env['DATABASE_URL'] ?? '';

describe.skipIf(url === '')('lease cost with another kind backlogged (postgres)', () => {
  let store: PostgresStore;
  let client: pg.Client;
  let close = async (): Promise<void> => undefined;

  beforeAll(async () => {
    ({ store, client, close } = await storeInNewSchema(url, 'lh_test_lease_cost'));
    await seed(store);
    await client.query('ANALYZE jobs, job_ready, job_leases');
  }, 120_000);
  afterAll(() => close());

  /** Every scan of the queue's tables in the statement's plan, with the rows each read over all its loops. */
  async function scans(text: string, values: readonly unknown[]): Promise<{ node: PlanNode; read: number }[]> {
    await client.query('BEGIN');
    try {
      const explained = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, [...values]);
      const root = explained.rows[0]?.['QUERY PLAN'][0].Plan as PlanNode;
      return [...planNodes(root)]
        .filter((node) => ['jobs', 'job_ready', 'job_leases'].includes(node['Relation Name'] ?? '') && /Scan/.test(node['Node Type']))
        .map((node) => ({ node, read: (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops'] }));
    } finally {
      await client.query('ROLLBACK');
    }
  }

  it("reads each named kind from job_ready_order, at most max rows of each, and each taken job by its key: neither another kind's backlog nor its own", async () => {
    const tokens = Array.from({ length: 10 }, (_, i) => `token-${i}`);
    const read = await scans(Q.JOB_LEASE_KINDS.text, [TENANT, 10, tokens, 'w', 60_000, ['a', 'c']]);
    const label = ({ node }: { node: PlanNode }): string => `${node['Node Type']} on ${node['Index Name'] ?? node['Relation Name']}`;
    // The ready rows it deletes are found by their ctids (a TID scan), the only other way into job_ready.
    // (job_leases, empty here, is read by its first expiry only: the planner may scan an empty table.)
    expect(read.filter(({ node }) => node['Node Type'] === 'Seq Scan' && node['Relation Name'] !== 'job_leases').map(label)).toEqual([]);
    const walks = read.filter(({ node }) => node['Index Name'] === 'job_ready_order');
    expect(walks.length).toBeGreaterThan(0);
    for (const scan of read) expect(scan.read, label(scan)).toBeLessThanOrEqual(2 * 10 + 2);
    expect(read.filter(({ node }) => node['Relation Name'] === 'jobs').every(({ node }) => node['Index Name'] === 'jobs_pkey')).toBe(true);
  });

  it("enqueues and leases a job for a parked poll reading no queued job, and only its own kind's flow rows, beside another tenant's 300 paused kinds", async () => {
    for (let i = 0; i < 300; i += 1) {
      await store.kindUpsert(kindParams('other', `k${i}`, null));
      await store.kindSetPaused({ tenant: 'other', kind: `k${i}`, paused: true });
    }
    const p = job('a', 10_000);
    const values = (n: number): unknown[] => [
      [`01a241a4-c30b-7c31-bcee-d9a003535b9${n}`],
      [TENANT],
      [p.owner],
      [`${p.idempotencyKey}-${n}`],
      [p.requestHash],
      ['a'],
      ['{}'],
      [2],
      [3],
      [0],
      [null],
      [null],
      `token-${n}`,
      'w',
      60_000,
    ];
    // Prepared and run once on this connection (rolled back): the plan the store's connections keep.
    await client.query('BEGIN');
    try {
      const leased = await client.query<{ handed: boolean; status: string }>({
        name: Q.JOB_INSERT_LEASED.name,
        text: Q.JOB_INSERT_LEASED.text,
        values: values(1),
      });
      expect(leased.rows.map(({ handed, status }) => ({ handed, status }))).toEqual([
        { handed: false, status: 'queued' },
        { handed: true, status: 'running' },
      ]);
    } finally {
      await client.query('ROLLBACK');
    }
    const scans = (await explainPrepared(client, Q.JOB_INSERT_LEASED.name, values(2))).filter(
      (node) => node['Relation Name'] !== undefined && /Scan/.test(node['Node Type']),
    );
    // The flow probes: kinds and group_clocks, each by (tenant, kind), reading no other row.
    expect(scans.map((node) => `${node['Node Type']} on ${node['Index Name']}`).sort()).toEqual([
      'Index Only Scan on group_clocks_pkey',
      'Index Only Scan on kinds_flow',
    ]);
    for (const node of scans) expect((node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops']).toBe(0);
  });

  it('without a kinds filter, walks each queued kind of the tenant (a skip scan), at most max rows of each', async () => {
    const tokens = Array.from({ length: 10 }, (_, i) => `token-${i}`);
    const read = await scans(Q.JOB_LEASE_ANY_KIND.text, [TENANT, 10, tokens, 'w', 60_000]);
    expect(read.filter(({ node }) => node['Node Type'] === 'Seq Scan' && node['Relation Name'] !== 'job_leases')).toEqual([]);
    // Three kinds: 10 rows of each at most, plus the skip scan's probes and the taken jobs' keys.
    for (const scan of read) expect(scan.read, `${scan.node['Node Type']} on ${scan.node['Index Name']}`).toBeLessThanOrEqual(3 * 10 + 4);
  });

  it("leases the named kinds' jobs in lease order, merged across kinds, and none of the backlog", async () => {
    const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 60_000, max: 4, kinds: ['a', 'c', 'a'] });
    expect(leased.map((j) => j.kind).sort()).toEqual(['a', 'a', 'c', 'c']);
    expect(leased.map((j) => j.payload)).toEqual([{ i: 0 }, { i: 0 }, { i: 1 }, { i: 1 }]);
  });

  it('leases without a kinds filter across the queued kinds, in lease order', async () => {
    // The b backlog was enqueued first: the oldest of every kind.
    const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 60_000, max: 3 });
    expect(leased.map((j) => [j.kind, j.payload])).toEqual([
      ['b', { i: 0 }],
      ['b', { i: 1 }],
      ['b', { i: 2 }],
    ]);
  });
});
