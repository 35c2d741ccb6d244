/**
 * Migration 9 on a SQLite database written at version 8: the rebuild of
 * `jobs` (to widen its status CHECK for `waiting`) keeps every row, attempt,
 * result and counter, every index and trigger (those on jobs and those of
 * other tables that read jobs), and leaves no foreign key dangling; the store
 * then works on it as on a new database, dependencies included.
 */

import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { migrate } from '../../src/store/sqlite/migrate.js';
import { MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';

const dirs: string[] = [];
afterEach(() => {
  while (dirs.length > 0) rmSync(dirs.pop() ?? '', { recursive: true, force: true });
});

function schemaNames(db: Database.Database): string[] {
  return (db.prepare(`SELECT type || ' ' || name AS n FROM sqlite_master WHERE type IN ('index', 'trigger', 'table') ORDER BY 1`).all() as { n: string }[]).map(
    (r) => r.n,
  );
}

describe('SQLite migration 9 (dependencies_and_keys) on a version-8 database', () => {
  it('rebuilds jobs with every row, index and trigger, and the store works on it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lh-migration-9-'));
    dirs.push(dir);
    const path = join(dir, 'jobs.db');
    const old = new Database(path);
    old.pragma('journal_mode = WAL');
    old.pragma('foreign_keys = ON');
    migrate(
      old,
      systemClock,
      MIGRATIONS.filter((m) => m.version <= 8),
    );
    const insert = old.prepare(`INSERT INTO jobs (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status,
      attempts, max_attempts, run_after, created_at, started_at, finished_at) VALUES (?, 't', 'u', ?, 'h', 'email', '{}', 2, ?, ?, 3, 0, 0, ?, ?)`);
    insert.run('00000000-0000-7000-8000-000000000001', 'k1', 'queued', 0, null, null);
    const done = insert.run('00000000-0000-7000-8000-000000000002', 'k2', 'succeeded', 1, 5, 9).lastInsertRowid;
    old
      .prepare(`INSERT INTO job_attempts (job_seq, epoch, attempt, worker_id, started_at, ended_at, outcome) VALUES (?, 1, 1, 'w', 5, 9, 'succeeded')`)
      .run(done);
    old.prepare(`INSERT INTO job_results (job_seq, content_type, body, checksum, size_bytes) VALUES (?, 'text/plain', x'6869', 'c', 2)`).run(done);
    const before = schemaNames(old);
    const countersBefore = old.prepare('SELECT * FROM job_counters ORDER BY tenant, kind, status').all();
    old.close();

    const store = SqliteStore.open({ path });
    try {
      const db = new Database(path, { readonly: true });
      try {
        const after = schemaNames(db);
        const added = ['index job_dependencies_child', 'index jobs_key_active', 'index jobs_key_turn', 'table job_dependencies'];
        // Migration 13 adds the dedupe and unique keys' indexes (migration-13.test.ts).
        added.push('index jobs_dedupe_key', 'index jobs_unique_key');
        // Migration 12, which the store applies after 9, drops the insert trigger: enqueue counts its new jobs itself.
        const dropped = ['trigger job_counters_insert'];
        // Migration 14 (sqlite-storage-migration.test.ts): the ready and lease tables, no counter triggers, no queued indexes on jobs.
        added.push('table job_ready', 'table job_leases', 'index job_ready_deadline', 'index job_leases_expiry', 'index jobs_by_status_ended');
        // Migration 15: the queued jobs' listing by seq.
        added.push('index job_ready_listing');
        // Migration 16: the fair lease's group rows and kinds' clocks (group-migration.ts).
        added.push('table group_clocks', 'table group_states', 'index group_candidates', 'index group_wakes', 'index group_idle', 'index group_slots');
        dropped.push(
          ...['job_counters_update', 'job_counters_delete', 'attempt_counters_end', 'attempt_counters_delete'].map((t) => `trigger ${t}`),
          ...[
            'jobs_available',
            'jobs_available_by_kind',
            'jobs_queued_by_run_after',
            'jobs_delayed',
            'jobs_lease_expiry',
            'jobs_queued_deadline',
            'jobs_by_status',
          ].map((i) => `index ${i}`),
        );
        expect(after.filter((name) => !/^index sqlite_autoindex_job_(dependencies|ready)/.test(name))).toEqual(
          [...before, ...added].filter((name) => !dropped.includes(name)).sort(),
        );
        expect(db.prepare('SELECT * FROM job_counters ORDER BY tenant, kind, status').all()).toEqual(countersBefore);
        expect(db.pragma('foreign_key_check')).toEqual([]);
        expect((db.prepare(`SELECT sql FROM sqlite_master WHERE name = 'jobs'`).get() as { sql: string }).sql).toContain(`'waiting'`);
        expect((db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number }).v).toBe(MIGRATIONS.at(-1)?.version);
      } finally {
        db.close();
      }
      const scope = { tenant: 't' };
      expect(await store.jobGet({ scope, id: '00000000-0000-7000-8000-000000000002' })).toMatchObject({ status: 'succeeded', dependsOn: [], children: [] });
      expect((await store.jobAttempts({ scope, id: '00000000-0000-7000-8000-000000000002' }))?.length).toBe(1);
      expect((await store.stats(scope)).counts).toMatchObject({ queued: 1, succeeded: 1, waiting: 0 });
      // The result trigger still guards job_results; the counters still count.
      const [lease] = await store.jobLease({ tenant: 't', workerId: 'w', leaseMs: 60_000, max: 1 });
      if (lease === undefined) throw new Error('the migrated queued job was not leased');
      const parent = lease.id;
      const child = await store.jobEnqueue({
        tenant: 't',
        owner: 'u',
        idempotencyKey: 'child',
        requestHash: 'c',
        kind: 'email',
        payload: {},
        maxAttempts: 3,
        priority: 0,
        runAfter: null,
        deadlineMs: null,
        payloadBytes: 2,
        dependsOn: [parent],
      });
      expect(child).toMatchObject({ kind: 'created', job: { status: 'waiting' } });
      expect(await store.jobComplete({ tenant: 't', id: parent, token: lease.token, result: { contentType: 'text/plain', body: Buffer.from('ok') } })).toEqual({
        kind: 'completed',
        replayed: false,
      });
      expect((await store.stats(scope)).counts).toMatchObject({ queued: 1, succeeded: 2, waiting: 0 });
    } finally {
      await store.close();
    }
  });
});
