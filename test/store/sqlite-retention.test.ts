/**
 * SQLite-specific parts of retention and due times that the conformance suite
 * cannot see: the query plans (jobNextDue seeks each (kind, priority) group of job_ready, the
 * purge walks jobs_finished; neither scans the table or sorts), a new
 * database's auto_vacuum=INCREMENTAL, and purge batches giving freed pages
 * back to the file system; a database created without auto_vacuum keeps its
 * mode (changing it needs a VACUUM, docs/SCALING.md) and reuses the pages.
 */

import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NEXT_DUE_SQL } from '../../src/store/sqlite/next-due.js';
import { RETENTION_SQL } from '../../src/store/sqlite/retention.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-sqlite-retention-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function plan(db: Database.Database, sql: string, bindings: Record<string, unknown>): string {
  return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(bindings) as { detail: string }[]).map((row) => row.detail).join('\n');
}

/** Enqueues, leases and completes `count` jobs with a 4 KiB payload each. */
async function finishJobs(store: SqliteStore, count: number): Promise<void> {
  const payload = { text: 'x'.repeat(4096) };
  await store.jobEnqueueMany(
    Array.from({ length: count }, (_, i) => ({
      tenant: 't1',
      owner: 'u1',
      idempotencyKey: `k-${i}`,
      requestHash: `h-${i}`,
      kind: 'bulk',
      payload,
      maxAttempts: 1,
      priority: 0,
      runAfter: null,
      deadlineMs: null,
      payloadBytes: 4110,
    })),
  );
  for (;;) {
    const leased = await store.jobLease({ tenant: 't1', workerId: 'w', leaseMs: 60_000, max: 500 });
    if (leased.length === 0) break;
    await store.jobCompleteMany(leased.map((job) => ({ tenant: 't1', id: job.id, token: job.token })));
  }
}

async function purgeAll(store: SqliteStore): Promise<void> {
  while ((await store.jobPurge({ status: 'succeeded', olderThanMs: 0, kindRetention: false, limit: 500 })).deleted > 0);
}

describe('sqlite retention', () => {
  it('seeks the due-time and purge indexes without scanning or sorting jobs', async () => {
    const path = join(dir, 'plans.db');
    await SqliteStore.open({ path }).close();
    const db = new Database(path, { readonly: true });
    try {
      const kinds = plan(db, NEXT_DUE_SQL.jobNextDueKinds, { tenant: 't', now: 1, kinds: '["a","b"]' });
      const anyKind = plan(db, NEXT_DUE_SQL.jobNextDueAnyKind, { tenant: 't', now: 1 });
      const purge = plan(db, RETENTION_SQL.jobPurgeSelect, {
        status: 'succeeded',
        olderThanMs: 1,
        kindRetention: 1,
        floor: 1,
        now: 1,
        tenant: null,
        kind: null,
        limit: 5,
      });
      // Each (kind, priority) group of job_ready: its highest priority, the next lower one, its first row (READY_GROUPS).
      for (const detail of [kinds, anyKind]) {
        expect(detail).toMatch(/SEARCH job_ready USING PRIMARY KEY \(tenant=\? AND kind=\? AND group_key=\?\)/);
        expect(detail).toMatch(/SEARCH job_ready USING PRIMARY KEY \(tenant=\? AND kind=\? AND group_key=\? AND priority<\?\)/);
        expect(detail).toMatch(/SEARCH r USING PRIMARY KEY \(tenant=\? AND kind=\? AND group_key=\? AND priority=\?\)/);
        expect(detail).not.toMatch(/SCAN job_ready|SCAN r\b|jobs/);
      }
      expect(anyKind).toMatch(/SEARCH job_ready USING PRIMARY KEY \(tenant=\? AND kind>\?\)/);
      expect(purge).toMatch(/SEARCH j USING INDEX jobs_finished \(status=\? AND finished_at<\?\)/);
      for (const detail of [kinds, anyKind, purge]) {
        expect(detail).not.toMatch(/SCAN (j|jobs)\b/);
        expect(detail).not.toMatch(/TEMP B-TREE FOR ORDER BY/);
      }
    } finally {
      db.close();
    }
  });

  it('creates new databases with auto_vacuum=INCREMENTAL and returns purged pages to the file system', async () => {
    const path = join(dir, 'vacuum.db');
    const store = SqliteStore.open({ path });
    try {
      await finishJobs(store, 2_000);
      const db = new Database(path, { readonly: true });
      expect(db.pragma('auto_vacuum', { simple: true })).toBe(2);
      const pagesBefore = db.pragma('page_count', { simple: true }) as number;
      await purgeAll(store);
      const pagesAfter = db.pragma('page_count', { simple: true }) as number;
      const free = db.pragma('freelist_count', { simple: true }) as number;
      db.close();
      expect(pagesAfter).toBeLessThan(pagesBefore / 4);
      expect(free).toBe(0);
    } finally {
      await store.close();
    }
  });

  it('keeps auto_vacuum off on a database created without it, and reuses the freed pages', async () => {
    const path = join(dir, 'legacy.db');
    const legacy = new Database(path);
    legacy.exec('CREATE TABLE created_before (x INTEGER)');
    legacy.close();
    const store = SqliteStore.open({ path });
    try {
      const db = new Database(path, { readonly: true });
      const pages = (): number => db.pragma('page_count', { simple: true }) as number;
      await finishJobs(store, 1_000);
      const full = pages();
      await purgeAll(store);
      expect(pages()).toBe(full);
      expect(db.pragma('freelist_count', { simple: true })).toBeGreaterThan(full / 2);
      await finishJobs(store, 1_000);
      expect(db.pragma('auto_vacuum', { simple: true })).toBe(0);
      // The second thousand jobs fit in the pages the first thousand freed.
      expect(pages()).toBeLessThan(full * 1.1);
      db.close();
    } finally {
      await store.close();
    }
  });
});
