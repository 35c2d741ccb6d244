/**
 * What per-key ordering and dependencies cost a lease, on both backends,
 * beside 1,000 keyed jobs waiting behind one busy key, 450 more behind 50
 * other keys and 500 children waiting on a running parent — all of a
 * higher priority than the free jobs, so a lease that saw them would take
 * them first. Waiting jobs are outside the queued indexes, so the lease
 * statements read O(max) rows of jobs; a key's probes (its head, an earlier
 * holder, another active job) are index probes of jobs_key_turn and
 * jobs_key_active that stop at their first row.
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
import { jobRowsRead as readJobRows, storeInNewSchema } from '../support/pg-plan.js';

const HOT = 1_000;
const KEYS = 50;
const PER_KEY = 10;
const CHILDREN = 500;
const FREE = 300;
const TENANT = 't1';

function job(key: string, overrides: Partial<EnqueueParams> = {}): EnqueueParams {
  return {
    tenant: TENANT,
    owner: 'u',
    idempotencyKey: key,
    requestHash: key,
    kind: 'k',
    payload: { key },
    maxAttempts: 3,
    priority: 10,
    runAfter: null,
    deadlineMs: null,
    payloadBytes: 8,
    ...overrides,
  };
}

/** The busy keys' first jobs and the parent are leased (running), everything behind them waits; FREE plain jobs are queued. */
async function seed(store: Store): Promise<void> {
  const [parent] = await store.jobEnqueueMany([job('parent', { kind: 'setup' })]);
  if (parent?.kind !== 'created') throw new Error('no parent');
  for (let start = 0; start < HOT; start += 500) {
    await store.jobEnqueueMany(Array.from({ length: 500 }, (_, i) => job(`hot-${start + i}`, { concurrencyKey: 'hot' })));
  }
  await store.jobEnqueueMany(Array.from({ length: KEYS * PER_KEY }, (_, i) => job(`key-${i}`, { concurrencyKey: `key-${i % KEYS}` })));
  for (let start = 0; start < CHILDREN; start += 500) {
    await store.jobEnqueueMany(Array.from({ length: 500 }, (_, i) => job(`child-${start + i}`, { kind: 'report', dependsOn: [parent.job.id] })));
  }
  // Every job a lease may take now: the heads of the keys and the parent.
  const leased = await store.jobLease({ tenant: TENANT, workerId: 'seed', leaseMs: 600_000, max: 1_000 });
  expect(leased).toHaveLength(1 + 1 + KEYS);
  await store.jobEnqueueMany(Array.from({ length: FREE }, (_, i) => job(`free-${i}`, { kind: 'free', priority: 0 })));
  expect((await store.stats({ tenant: TENANT })).counts).toMatchObject({ waiting: HOT - 1 + KEYS * (PER_KEY - 1) + CHILDREN, queued: FREE, running: 2 + KEYS });
}

describe('lease cost beside waiting keyed jobs and children (sqlite)', () => {
  let dir: string;
  let path: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lh-key-cost-'));
    path = join(dir, 'jobs.db');
    const store = SqliteStore.open({ path });
    await seed(store);
    await store.close();
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function plan(db: Database.Database, sql: string, bindings: Record<string, unknown>): string {
    return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(bindings) as { detail: string }[]).map((row) => row.detail).join('\n');
  }

  it('walks job_ready for the lease (waiting jobs have no ready row), and probes a key through its partial indexes', () => {
    const db = new Database(path, { readonly: true });
    try {
      db.function('lh_token', () => 'x');
      const lease = plan(db, withLeaseMax(jobLeaseKindsSql(2), 10), { tenant: TENANT, workerId: 'w', leaseMs: 1_000, now: Date.now(), k0: 'k', k1: 'free' });
      expect(lease).toMatch(/SEARCH job_ready USING PRIMARY KEY \(tenant=\? AND kind=\? AND group_key=\?\)/);
      expect(lease).not.toMatch(/SCAN (jobs|job_ready)\b|SEARCH jobs/);
      // Only the free jobs are ready: the waiting ones are in no table a lease reads.
      expect((db.prepare(`SELECT count(*) AS n FROM job_ready WHERE tenant = ?`).get(TENANT) as { n: number }).n).toBe(FREE);
      const facts = plan(db, SQL.jobKeyFacts, { tenant: TENANT, kind: 'k', key: 'hot', seq: 1 });
      expect(facts).toMatch(/jobs_key_turn \(tenant=\? AND kind=\? AND concurrency_key=\? AND seq<\?\)/);
      expect(facts).toMatch(/jobs_key_active \(tenant=\? AND kind=\? AND concurrency_key=\?\)/);
      expect(facts).not.toMatch(/TEMP B-TREE/);
      expect(plan(db, SQL.jobKeyHead, { tenant: TENANT, kind: 'k', key: 'hot' })).toMatch(/jobs_key_turn \(tenant=\? AND kind=\? AND concurrency_key=\?\)/);
      expect(plan(db, SQL.jobDependencySatisfy, { parent: 1 })).toMatch(/job_dependencies/);
      expect(plan(db, SQL.jobDependencySatisfy, { parent: 1 })).not.toMatch(/SCAN (jobs|job_dependencies)/);
    } finally {
      db.close();
    }
  });

  it('leases the free jobs, none of the waiting ones', async () => {
    const store = SqliteStore.open({ path });
    try {
      const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 60_000, max: 10 });
      expect(leased.map((j) => j.kind)).toEqual(Array.from({ length: 10 }, () => 'free'));
    } finally {
      await store.close();
    }
  });
});

const url = process.env['DATABASE_URL'] ?? '';

describe.skipIf(url === '')('lease cost beside waiting keyed jobs and children (postgres)', () => {
  let store: PostgresStore;
  let client: pg.Client;
  let close = async (): Promise<void> => undefined;

  beforeAll(async () => {
    ({ store, client, close } = await storeInNewSchema(url, 'lh_test_key_cost'));
    await seed(store);
    await client.query('ANALYZE jobs, job_ready, job_dependencies');
  }, 120_000);
  afterAll(() => close());

  const jobRowsRead = (text: string, values: readonly unknown[]): Promise<number[]> => readJobRows(client, text, values);

  const tokens = Array.from({ length: 10 }, (_, i) => `token-${i}`);
  const sum = (reads: readonly number[]): number => reads.reduce((a, b) => a + b, 0);

  it('reads O(max) rows of jobs for a lease, with or without a kinds filter, none of them waiting', async () => {
    // The pick walks job_ready, where waiting jobs have no row; jobs is read once, for the 10 taken rows. No waiting job is read.
    expect(sum(await jobRowsRead(Q.JOB_LEASE_ANY_KIND.text, [TENANT, 10, tokens, 'w', 60_000]))).toBeLessThanOrEqual(10 + 2);
    expect(sum(await jobRowsRead(Q.JOB_LEASE_KINDS.text, [TENANT, 10, tokens, 'w', 60_000, ['k', 'report', 'free']]))).toBeLessThanOrEqual(10 + 2);
  });

  it('probes a key and its head through the partial indexes, stopping at the first row', async () => {
    for (const key of ['hot', 'key-7']) {
      for (const read of await jobRowsRead(Q.JOB_KEY_FACTS.text, [TENANT, 'k', key, Number.MAX_SAFE_INTEGER])) expect(read).toBeLessThanOrEqual(1);
      for (const read of await jobRowsRead(Q.JOB_KEY_HEAD.text, [TENANT, 'k', key])) expect(read).toBeLessThanOrEqual(1);
    }
  });

  it('leases the free jobs, none of the waiting ones', async () => {
    const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 60_000, max: 10 });
    expect(leased.map((j) => j.kind)).toEqual(Array.from({ length: 10 }, () => 'free'));
  });
});
