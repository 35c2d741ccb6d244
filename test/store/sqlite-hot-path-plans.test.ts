/**
 * SQLite: the statements of enqueue, lease, completion, the reaper's probes
 * and stats reach each row by a key, so their cost does not grow with
 * finished jobs or with another kind's backlog (migration 14). The database
 * holds 3,000 finished jobs (with attempts and results), 3,000 queued jobs of
 * another kind and some running ones when the plans are read; no plan may
 * scan a table or sort anything but the lease's own picks (at most max rows a
 * kind), and each lookup names the key it seeks. lease-cost, key-cost and
 * flow-cost test the lease's walks; sqlite-retention the next-due reads and
 * retention.
 */

import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobLeaseKindsSql, SQL, STATS_SQL, withLeaseMax } from '../../src/store/sqlite/queries.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { EnqueueParams } from '../../src/store/store.js';
import { sqlitePlan } from '../support/sqlite-plan.js';

const TENANT = 't1';
const HISTORY = 3_000;

function job(kind: string, i: number): EnqueueParams {
  return {
    tenant: TENANT,
    owner: 'u',
    idempotencyKey: `${kind}-${i}`,
    requestHash: 'h',
    kind,
    payload: { i },
    maxAttempts: 3,
    priority: i % 3,
    runAfter: null,
    deadlineMs: i % 2 === 0 ? 3_600_000 : null,
    payloadBytes: 8,
  };
}

/** The tables a hot-path statement must never scan (json_each and CTEs may be). */
const TABLES = /SCAN (jobs|j|job_ready|r|q|job_leases|l|job_attempts|a|job_results|job_counters|tenant_counters|kinds)\b/;

describe('SQLite hot-path plans beside finished jobs and another kind backlog', () => {
  let dir: string;
  let db: Database.Database;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lh-hot-path-plans-'));
    const path = join(dir, 'jobs.db');
    const store = SqliteStore.open({ path });
    for (let n = 0; n < HISTORY; n += 500) await store.jobEnqueueMany(Array.from({ length: 500 }, (_, i) => job('done', n + i)));
    for (let left = HISTORY; left > 0; ) {
      const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 600_000, max: 100, kinds: ['done'] });
      await store.jobCompleteMany(
        leased.map((l) => ({ tenant: TENANT, id: l.id, token: l.token, result: { contentType: 'text/plain', body: Buffer.from('ok') } })),
      );
      left -= leased.length;
    }
    for (let n = 0; n < HISTORY; n += 500) await store.jobEnqueueMany(Array.from({ length: 500 }, (_, i) => job('backlog', n + i)));
    await store.jobEnqueueMany(Array.from({ length: 20 }, (_, i) => job('hot', i)));
    await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 600_000, max: 10, kinds: ['hot'] });
    await store.close();
    db = new Database(path, { readonly: true });
    db.function('lh_token', () => 'x');
  }, 120_000);
  afterAll(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const now = Date.now();
  const rows = '[]';

  it('enqueue: the key lookup, the job row and its ready row', () => {
    const lookup = (db.prepare(`EXPLAIN QUERY PLAN ${SQL.jobByIdempotencyKey}`).all(TENANT, 'u', 'k') as { detail: string }[]).map((r) => r.detail).join('\n');
    expect(lookup).toMatch(/SEARCH j USING (COVERING )?INDEX sqlite_autoindex_jobs_2 \(tenant=\? AND owner=\? AND idempotency_key=\?\)/);
    expect(lookup).not.toMatch(TABLES);
  });

  it('lease: the walk of each named kind, the ready rows by their key, the jobs by row id, the reaper probes by their indexes', () => {
    const lease = sqlitePlan(db, withLeaseMax(jobLeaseKindsSql(1), 16), { tenant: TENANT, workerId: 'w', leaseMs: 1, now, k0: 'hot' });
    expect(lease).toMatch(/SEARCH job_ready USING PRIMARY KEY \(tenant=\? AND kind=\? AND group_key=\?\)/);
    expect(lease).not.toMatch(TABLES);
    expect(sqlitePlan(db, SQL.readyDeleteMany, { tenant: TENANT, rows })).toMatch(
      /SEARCH job_ready USING PRIMARY KEY \(tenant=\? AND kind=\? AND group_key=\? AND priority=\? AND run_after=\? AND seq=\?\)/,
    );
    expect(sqlitePlan(db, SQL.jobLeasedMany, { seqs: rows })).toMatch(/SEARCH jobs USING INTEGER PRIMARY KEY \(rowid=\?\)/);
    expect(sqlitePlan(db, SQL.readyPastDeadline, { now })).toMatch(/SEARCH job_ready USING INDEX job_ready_deadline \(deadline_at>\? AND deadline_at<\?\)/);
    const expired = (db.prepare(`EXPLAIN QUERY PLAN ${SQL.jobsExpiredLeases}`).all(now) as { detail: string }[]).map((r) => r.detail).join('\n');
    expect(expired).toMatch(/SEARCH l USING INDEX job_leases_expiry \(expires_at<\?\)/);
    for (const plan of [sqlitePlan(db, SQL.readyDeleteMany, { tenant: TENANT, rows }), sqlitePlan(db, SQL.jobLeasedMany, { seqs: rows }), expired]) {
      expect(plan).not.toMatch(TABLES);
      expect(plan).not.toMatch(/TEMP B-TREE/);
    }
  });

  it('completion: the snapshots by id, the lease rows and jobs by row id', () => {
    const plans = {
      lock: (db.prepare(`EXPLAIN QUERY PLAN ${SQL.jobLock}`).all('x', TENANT) as { detail: string }[]).map((r) => r.detail).join('\n'),
      lockMany: sqlitePlan(db, SQL.jobLockMany, { ids: rows, tenant: TENANT }),
      leaseEnd: sqlitePlan(db, SQL.leaseEnd, { seq: 1, token: 'x', now, live: 1 }),
      leaseEndMany: sqlitePlan(db, SQL.leaseEndMany, { rows, now }),
      jobEndMany: sqlitePlan(db, SQL.jobEndMany, { rows, now, status: 'succeeded', outcome: 'succeeded', code: null, message: null, errorClass: null }),
    };
    expect(plans.lock).toMatch(/SEARCH j USING INDEX sqlite_autoindex_jobs_1 \(id=\?\)/);
    expect(plans.lockMany).toMatch(/SEARCH j USING INDEX sqlite_autoindex_jobs_1 \(id=\?\)/);
    expect(plans.leaseEnd).toMatch(/SEARCH job_leases USING INTEGER PRIMARY KEY \(rowid=\?\)/);
    expect(plans.leaseEndMany).toMatch(/SEARCH job_leases USING INTEGER PRIMARY KEY \(rowid=\?\)/);
    expect(plans.jobEndMany).toMatch(/SEARCH jobs USING INTEGER PRIMARY KEY \(rowid=\?\)/);
    for (const [name, plan] of Object.entries(plans)) {
      expect(plan, name).not.toMatch(TABLES);
      expect(plan, name).not.toMatch(/TEMP B-TREE/);
    }
  });

  it('stats: counter rows by their keys, and the head of each (kind, priority) group of the ready table', () => {
    const counts = (db.prepare(`EXPLAIN QUERY PLAN ${STATS_SQL.statsCounts}`).all(TENANT) as { detail: string }[]).map((r) => r.detail).join('\n');
    expect(counts).toMatch(/SEARCH job_counters USING PRIMARY KEY \(tenant=\?\)/);
    const oldest = sqlitePlan(db, STATS_SQL.statsOldestAvailable, { tenant: TENANT, now });
    expect(oldest).toMatch(/SEARCH job_ready USING PRIMARY KEY \(tenant=\? AND kind>\?\)/);
    expect(oldest).toMatch(/SEARCH job_ready USING PRIMARY KEY \(tenant=\? AND kind=\? AND group_key=\? AND priority<\?\)/);
    expect(oldest).toMatch(/SEARCH r USING PRIMARY KEY \(tenant=\? AND kind=\? AND group_key=\? AND priority=\?\)/);
    for (const plan of [counts, oldest]) {
      expect(plan).not.toMatch(TABLES);
      expect(plan).not.toMatch(/TEMP B-TREE FOR ORDER BY/);
    }
    // The oldest available job across kinds and priorities, from the ready rows' groups.
    const oldestRow = db.prepare(STATS_SQL.statsOldestAvailable).get({ tenant: TENANT, now: Date.now() }) as { oldest: number | null };
    const scanned = db.prepare(`SELECT min(run_after) AS oldest FROM job_ready WHERE tenant = ?`).get(TENANT) as { oldest: number };
    expect(oldestRow.oldest).toBe(scanned.oldest);
  });
});
