/**
 * Group commit: operations that arrive together share one transaction, and
 * one that throws is rejected alone while the others still commit.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { GroupCommit } from '../../src/store/sqlite/group-commit.js';

let dir: string;
let db: Database.Database;
let commits: number;
let writer: GroupCommit;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-gc-'));
  db = new Database(join(dir, 'gc.db'));
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE t (v INTEGER NOT NULL UNIQUE)');
  commits = 0;
  writer = new GroupCommit({
    db,
    now: () => 0,
    translateError: (error) => error,
    isFatal: () => false,
    afterCommit: () => commits++,
  });
});

afterEach(() => {
  writer.close();
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const insert = (v: number) => () => db.prepare('INSERT INTO t (v) VALUES (?)').run(v).changes;

it('commits operations that arrive together in one transaction', async () => {
  const results = await Promise.all([1, 2, 3, 4].map((v) => writer.run(insert(v))));
  expect(results).toEqual([1, 1, 1, 1]);
  expect(commits).toBe(1);
  expect((db.prepare('SELECT COUNT(*) AS n FROM t').get() as { n: number }).n).toBe(4);
});

it('rejects only the operation that throws, and keeps nothing of it', async () => {
  const outcomes = await Promise.allSettled([
    writer.run(insert(1)),
    writer.run(() => {
      insert(2)();
      insert(1)(); // violates UNIQUE after writing 2
      return 1;
    }),
    writer.run(insert(3)),
  ]);
  expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  const values = (db.prepare('SELECT v FROM t ORDER BY v').all() as { v: number }[]).map((r) => r.v);
  expect(values).toEqual([1, 3]);
  expect(commits).toBe(1);
});
