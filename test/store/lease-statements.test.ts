/**
 * The SQLite lease statements carry their LIMIT as text (lease-statements.ts): a bound LIMIT makes SQLite
 * prepare the statement again at every run. These cases pin the text, the reuse and the bound on how many
 * statements are kept.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LeaseStatements } from '../../src/store/sqlite/lease-statements.js';
import { withLeaseMax } from '../../src/store/sqlite/queries.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';

let dir: string;
let db: Database.Database;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-lease-statements-'));
  const path = join(dir, 'jobs.db');
  await SqliteStore.open({ path }).close();
  db = new Database(path);
  db.function('lh_token', { deterministic: false }, () => 'token');
});

afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('lease statements', () => {
  it('write max into the LIMIT and bind nothing else for it, with or without a kinds filter', () => {
    const leases = new LeaseStatements(db);
    for (const kindCount of [0, 1, 3]) {
      const source = leases.lease(kindCount, 7).source;
      expect(source).not.toMatch(/@max\b/);
      expect(source).toMatch(/LIMIT 7\)/);
    }
  });

  it('are prepared once per kind count and max, and the least recently used go past 256', () => {
    const leases = new LeaseStatements(db);
    const first = leases.lease(0, 1);
    expect(leases.lease(0, 1)).toBe(first);
    const second = leases.lease(1, 1);
    expect(second).not.toBe(first);
    // The 257th statement pushes out the least recently used one, (0, 1); (1, 1) stays.
    for (let max = 2; max <= 256; max++) leases.lease(0, max);
    expect(leases.lease(1, 1)).toBe(second);
    expect(leases.lease(0, 1)).not.toBe(first);
  });

  it('refuse a max that is not a positive whole number, since it becomes SQL text', () => {
    for (const max of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => withLeaseMax('LIMIT @max', max)).toThrow(RangeError);
    expect(withLeaseMax('LIMIT @max, @maxed', 12)).toBe('LIMIT 12, @maxed');
  });
});
