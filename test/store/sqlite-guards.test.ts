/**
 * SQLite's guarded statements fence by themselves (migration 14): the store
 * decides on a snapshot first, so a statement whose guard were lost would
 * still pass every behaviour test. Here each statement that writes under a
 * lease runs on its own against a live lease: with another token, or after
 * the lease ran out (or, for the reaper's end, while it is still live), it
 * changes nothing; with the token of the live lease it changes exactly that
 * job. The lease statement itself takes a ready row once: its primary key
 * refuses a second live lease of the same job.
 */

import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobLeaseKindsSql, SQL, withLeaseMax } from '../../src/store/sqlite/queries.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { LeasedJob } from '../../src/store/store.js';

const TENANT = 't';
let dir: string;
let db: Database.Database;
let leased: LeasedJob[];
const seqOf = (id: string): number => (db.prepare('SELECT seq FROM jobs WHERE id = ?').get(id) as { seq: number }).seq;

/** Runs `write` in a transaction that is rolled back, and answers the rows it changed. */
function changes(write: () => number): number {
  db.exec('BEGIN IMMEDIATE');
  try {
    return write();
  } finally {
    db.exec('ROLLBACK');
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'lh-sqlite-guards-'));
  const path = join(dir, 'jobs.db');
  const store = SqliteStore.open({ path });
  await store.jobEnqueueMany(
    [1, 2, 3].map((n) => ({
      tenant: TENANT,
      owner: 'u',
      idempotencyKey: `k${n}`,
      requestHash: 'h',
      kind: 'k',
      payload: { n },
      maxAttempts: 3,
      priority: 0,
      runAfter: null,
      deadlineMs: null,
      payloadBytes: 7,
    })),
  );
  leased = [...(await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 60_000, max: 2 }))];
  await store.close();
  db = new Database(path);
  db.function('lh_token', { deterministic: false }, () => 'fresh-token');
});
afterAll(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('SQLite guarded statements', () => {
  it('end a live lease only under its token, one at a time and by the batch', () => {
    const [a, b] = leased as [LeasedJob, LeasedJob];
    const now = Date.now();
    const end = (token: string, at: number, live: 0 | 1): number =>
      changes(() => db.prepare(SQL.leaseEnd).all({ seq: seqOf(a.id), token, now: at, live }).length);
    expect(end('not-the-token', now, 1)).toBe(0);
    expect(end(a.token, a.leaseExpiresAt, 1)).toBe(0);
    // The reaper's end takes only a lease that ran out.
    expect(end(a.token, now, 0)).toBe(0);
    expect(end(a.token, a.leaseExpiresAt, 0)).toBe(1);
    expect(end(a.token, now, 1)).toBe(1);
    const many = (pairs: [LeasedJob, string][], at: number): number =>
      changes(() => db.prepare(SQL.leaseEndMany).run({ rows: JSON.stringify(pairs.map(([job, token]) => [seqOf(job.id), token])), now: at }).changes);
    expect(many([[a, b.token]], now)).toBe(0);
    expect(
      many(
        [
          [a, a.token],
          [b, 'not-the-token'],
        ],
        now,
      ),
    ).toBe(1);
    expect(
      many(
        [
          [a, a.token],
          [b, b.token],
        ],
        a.leaseExpiresAt,
      ),
    ).toBe(0);
    expect(
      many(
        [
          [a, a.token],
          [b, b.token],
        ],
        now,
      ),
    ).toBe(2);
  });

  it('renew, mark an effect, write progress and a checkpoint only under the live lease', () => {
    const [a] = leased as [LeasedJob];
    const now = Date.now();
    const seq = seqOf(a.id);
    const statements = {
      renew: (token: string, at: number) => db.prepare(SQL.leaseRenew).run({ seq, token, now: at, leaseExpiresAt: at + 1_000 }).changes,
      effect: (token: string, at: number) => db.prepare(SQL.leaseEffectStarted).run({ seq, token, now: at }).changes,
      progress: (token: string, at: number) => db.prepare(SQL.jobProgress).run({ seq, token, now: at, progress: '{}' }).changes,
      checkpoint: (token: string, at: number) => db.prepare(SQL.jobCheckpoint).run({ seq, token, now: at, step: 1, state: '{}' }).changes,
    };
    for (const [name, write] of Object.entries(statements)) {
      expect(
        changes(() => write('not-the-token', now)),
        name,
      ).toBe(0);
      expect(
        changes(() => write(a.token, a.leaseExpiresAt)),
        name,
      ).toBe(0);
      expect(
        changes(() => write(a.token, now)),
        name,
      ).toBe(1);
    }
  });

  it('take a ready row with the epoch bumped, and refuse a second live lease of the same job', () => {
    const lease = db.prepare(withLeaseMax(jobLeaseKindsSql(1), 5));
    const bindings = { tenant: TENANT, workerId: 'w', leaseMs: 1_000, now: Date.now(), k0: 'k' };
    const taken = changes(() => (lease.all(bindings) as { epoch: number; attempt: number }[]).filter((row) => row.epoch === 1 && row.attempt === 1).length);
    expect(taken).toBe(1);
    // A ready row left behind beside its job's live lease: the lease row's primary key refuses to take it again.
    const [a] = leased as [LeasedJob];
    db.exec('BEGIN IMMEDIATE');
    try {
      db.prepare(SQL.readyInsert).run({
        tenant: TENANT,
        kind: 'k',
        groupKey: '',
        priority: 0,
        runAfter: 0,
        seq: seqOf(a.id),
        deadlineAt: null,
        attempts: 0,
        epoch: 0,
      });
      expect(() => lease.all(bindings)).toThrow(/UNIQUE constraint failed: job_leases.seq/);
    } finally {
      db.exec('ROLLBACK');
    }
  });
});
