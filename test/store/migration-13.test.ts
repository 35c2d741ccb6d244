/**
 * Migration 13 (dedupe_and_unique_keys) on a database written at version 12,
 * on both backends: the jobs already there stay as they were and hold no key,
 * the store opens on it and leases them, and enqueues with dedupe and unique
 * keys work beside them.
 */

import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { migrate as migratePg } from '../../src/store/postgres/migrate.js';
import { MIGRATIONS as PG_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { migrate as migrateSqlite } from '../../src/store/sqlite/migrate.js';
import { MIGRATIONS as SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { EnqueueParams, Store } from '../../src/store/store.js';

const OLD_JOB = '00000000-0000-7000-8000-000000000001';
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

function params(key: string, overrides: Partial<EnqueueParams> = {}): EnqueueParams {
  return {
    tenant: 't',
    owner: 'u',
    idempotencyKey: key,
    requestHash: key,
    kind: 'email',
    payload: {},
    maxAttempts: 3,
    priority: 0,
    runAfter: null,
    deadlineMs: null,
    payloadBytes: 2,
    ...overrides,
  };
}

/** The store on a database that had one queued job at version 12: the job leases, and keys work. */
async function expectUpgraded(store: Store): Promise<void> {
  expect(await store.jobGet({ scope: { tenant: 't' }, id: OLD_JOB })).toMatchObject({ status: 'queued' });
  const dedupe = { key: 'd', mode: 'drop', ttlMs: 60_000 } as const;
  const first = await store.jobEnqueue(params('k1', { dedupe, unique: { key: 'u', forMs: 0 }, runAfter: Date.now() + 60_000 }));
  expect(first.kind).toBe('created');
  expect((await store.jobEnqueue(params('k2', { dedupe }))).kind).toBe('deduplicated');
  expect((await store.jobEnqueue(params('k3', { unique: { key: 'u', forMs: 0 } }))).kind).toBe('duplicate');
  const [lease] = await store.jobLease({ tenant: 't', workerId: 'w', leaseMs: 60_000, max: 1 });
  expect(lease?.id).toBe(OLD_JOB);
}

describe('migration 13 on a version-12 database', () => {
  it('sqlite: adds the key columns and indexes, keeps the jobs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lh-migration-13-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'jobs.db');
    const old = new Database(path);
    old.pragma('journal_mode = WAL');
    migrateSqlite(
      old,
      systemClock,
      SQLITE_MIGRATIONS.filter((m) => m.version <= 12),
    );
    old
      .prepare(`INSERT INTO jobs (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status, max_attempts, run_after, created_at)
      VALUES (?, 't', 'u', 'old', 'h', 'email', '{}', 2, 'queued', 3, 0, 0)`)
      .run(OLD_JOB);
    old.close();
    const store = SqliteStore.open({ path });
    cleanups.push(() => store.close());
    const db = new Database(path, { readonly: true });
    try {
      expect(db.prepare(`SELECT dedupe_key, dedupe_until, unique_key FROM jobs WHERE id = ?`).get(OLD_JOB)).toEqual({
        dedupe_key: null,
        dedupe_until: null,
        unique_key: null,
      });
      expect(db.prepare(`SELECT name FROM sqlite_master WHERE name IN ('jobs_dedupe_key', 'jobs_unique_key') ORDER BY name`).all()).toHaveLength(2);
    } finally {
      db.close();
    }
    await expectUpgraded(store);
  });

  const url = process.env['DATABASE_URL'] ?? '';
  it.skipIf(url === '')('postgres: adds the key columns and indexes, keeps the jobs', async () => {
    const schema = `lh_test_migration_13_${randomBytes(6).toString('hex')}`;
    cleanups.push(() => PostgresStore.dropSchema({ connectionString: url, schema }));
    // The counter triggers name their tables unqualified, as the store's connections see them.
    const client = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
    await client.connect();
    try {
      await migratePg(
        client,
        schema,
        PG_MIGRATIONS.filter((m) => m.version <= 12),
      );
      await client.query(
        `INSERT INTO jobs (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status, max_attempts, run_after, created_at)
        VALUES ($1, 't', 'u', 'old', 'h', 'email', '{}', 2, 'queued', 3, now(), now())`,
        [OLD_JOB],
      );
    } finally {
      await client.end();
    }
    const store = await PostgresStore.connect({ connectionString: url, schema, poolSize: 2 });
    cleanups.push(() => store.close());
    await expectUpgraded(store);
  });
});
