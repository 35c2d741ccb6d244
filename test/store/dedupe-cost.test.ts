/**
 * What a dedupe or unique key costs an enqueue, on both backends, beside one
 * hot key's 200 earlier jobs (each leased, so each gave its key up to the
 * next), 1,000 other keyed jobs and 1,000 jobs without a key: every probe of a
 * holder, and every guarded write to one, is one entry of jobs_dedupe_key or
 * jobs_unique_key (migration 13), however long the key's history. Jobs
 * without a key are in neither index.
 */

import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as Q from '../../src/store/postgres/queries.js';
import { SQL } from '../../src/store/sqlite/queries.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { EnqueueParams, Store } from '../../src/store/store.js';
import { jobRowsRead, storeInNewSchema } from '../support/pg-plan.js';
import { sqlitePlan } from '../support/sqlite-plan.js';

const TENANT = 't1';
const OWNER = 'u';
const HOT_ROUNDS = 200;
const HOUR = 3_600_000;

function job(key: string, overrides: Partial<EnqueueParams> = {}): EnqueueParams {
  return {
    tenant: TENANT,
    owner: OWNER,
    idempotencyKey: key,
    requestHash: key,
    kind: 'k',
    payload: { key },
    maxAttempts: 3,
    priority: 0,
    runAfter: null,
    deadlineMs: null,
    payloadBytes: 8,
    ...overrides,
  };
}

async function seed(store: Store): Promise<void> {
  for (let round = 0; round < HOT_ROUNDS; round++) {
    const outcome = await store.jobEnqueue(job(`hot-${round}`, { dedupe: { key: 'hot', mode: 'drop', ttlMs: HOUR }, unique: { key: 'hot', forMs: 0 } }));
    expect(outcome.kind).toBe('created');
    const leased = await store.jobLease({ tenant: TENANT, workerId: 'seed', leaseMs: 600_000, max: 1 });
    expect(leased).toHaveLength(1);
    const [lease] = leased;
    if (lease !== undefined) await store.jobComplete({ tenant: TENANT, id: lease.id, token: lease.token });
  }
  await store.jobEnqueueMany(
    Array.from({ length: 1_000 }, (_, i) =>
      job(`keyed-${i}`, { dedupe: { key: `d-${i}`, mode: 'drop', ttlMs: HOUR }, unique: { key: `u-${i}`, forMs: HOUR } }),
    ),
  );
  await store.jobEnqueueMany(Array.from({ length: 1_000 }, (_, i) => job(`plain-${i}`)));
}

describe('dedupe and unique key cost (sqlite)', () => {
  it('probes each key with one search of its unique index, writes by row id, and indexes keyed jobs only', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lh-dedupe-cost-'));
    const path = join(dir, 'jobs.db');
    const store = SqliteStore.open({ path });
    const db = new Database(path, { readonly: true });
    try {
      await seed(store);
      const scope = { tenant: TENANT, owner: OWNER, kind: 'k', key: 'hot' };
      expect(sqlitePlan(db, SQL.jobDedupeHolder, scope)).toMatch(
        /SEARCH j USING INDEX jobs_dedupe_key \(tenant=\? AND owner=\? AND kind=\? AND dedupe_key=\?\)/,
      );
      expect(sqlitePlan(db, SQL.jobUniqueHolder, scope)).toMatch(
        /SEARCH jobs USING INDEX jobs_unique_key \(tenant=\? AND owner=\? AND kind=\? AND unique_key=\?\)/,
      );
      const byRowId = /SEARCH jobs USING INTEGER PRIMARY KEY \(rowid=\?\)/;
      expect(
        sqlitePlan(db, SQL.jobDedupeMerge, { seq: 1, key: 'hot', replace: 1, payload: '{}', payloadBytes: 2, runAfter: 0, dedupeUntil: 0, now: 0 }),
      ).toMatch(byRowId);
      expect(sqlitePlan(db, SQL.jobDedupeRelease, { seq: 1, key: 'hot', now: 0 })).toMatch(byRowId);
      expect(sqlitePlan(db, SQL.jobUniqueRelease, { seq: 1, key: 'hot', forMs: 0, now: 0 })).toMatch(byRowId);
      // The hot key's history gave the key up: one holder each, beside the 1,000 other keyed jobs.
      expect(db.prepare(`SELECT count(*) AS n FROM jobs INDEXED BY jobs_dedupe_key WHERE dedupe_key IS NOT NULL`).get()).toEqual({ n: 1_001 });
      expect(db.prepare(`SELECT count(*) AS n FROM jobs INDEXED BY jobs_unique_key WHERE unique_key IS NOT NULL`).get()).toEqual({ n: 1_001 });
    } finally {
      db.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

const url = process.env['DATABASE_URL'] ?? '';

describe.skipIf(url === '')('dedupe and unique key cost (postgres)', () => {
  let client: pg.Client;
  let close = async (): Promise<void> => undefined;
  let hotId = '';

  beforeAll(async () => {
    let store: Store;
    ({ store, client, close } = await storeInNewSchema(url, 'lh_test_dedupe_cost'));
    await seed(store);
    await client.query('ANALYZE jobs');
    hotId = (await client.query<{ id: string }>(`SELECT id::text AS id FROM jobs WHERE dedupe_key = 'hot'`)).rows[0]?.id ?? '';
  }, 120_000);
  afterAll(() => close());

  const scope = [TENANT, OWNER, 'k', 'hot'];

  it('reads one entry of jobs for each probe and each guarded write, with the generic plan', async () => {
    const reads = [
      ...(await jobRowsRead(client, Q.JOB_DEDUPE_HOLDER.text, scope)),
      ...(await jobRowsRead(client, Q.JOB_UNIQUE_HOLDER.text, scope)),
      ...(await jobRowsRead(client, Q.JOB_DEDUPE_MERGE.text, [hotId, 'hot', true, '{}', 2, 0, 0])),
      ...(await jobRowsRead(client, Q.JOB_DEDUPE_RELEASE.text, [hotId, 'hot'])),
      ...(await jobRowsRead(client, Q.JOB_UNIQUE_RELEASE.text, [hotId, 'hot', 0])),
    ];
    expect(reads.length).toBeGreaterThanOrEqual(5);
    for (const read of reads) expect(read).toBeLessThanOrEqual(1);
  });

  it('keeps one holder of the hot key: its history gave the key up', async () => {
    const held = await client.query<{ dedupe: number; unique: number }>(
      `SELECT count(dedupe_key)::int AS dedupe, count(unique_key)::int AS unique FROM jobs WHERE dedupe_key IS NOT NULL OR unique_key IS NOT NULL`,
    );
    expect(held.rows[0]).toEqual({ dedupe: 1_001, unique: 1_001 });
  });
});
