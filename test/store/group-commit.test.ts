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

it('settles callers only after COMMIT has returned, with the rows visible to another connection', async () => {
  const events: string[] = [];
  const realExec = db.exec.bind(db);
  db.exec = (sql: string) => {
    if (sql === 'COMMIT') events.push('commit started');
    const result = realExec(sql);
    if (sql === 'COMMIT') events.push('commit returned');
    return result;
  };
  const other = new Database(join(dir, 'gc.db'), { readonly: true });
  try {
    const seen = await Promise.all(
      [1, 2, 3].map((v) =>
        writer.run(insert(v)).then(() => {
          events.push(`settled ${v}`);
          return (other.prepare('SELECT COUNT(*) AS n FROM t WHERE v = ?').get(v) as { n: number }).n;
        }),
      ),
    );
    expect(events).toEqual(['commit started', 'commit returned', 'settled 1', 'settled 2', 'settled 3']);
    expect(seen).toEqual([1, 1, 1]);
  } finally {
    other.close();
  }
});

it('fails every caller of a batch whose COMMIT fails, and keeps nothing of it', async () => {
  // A deferred foreign key is checked by COMMIT itself: every operation succeeds, then COMMIT throws.
  db.exec('CREATE TABLE parent (id INTEGER PRIMARY KEY)');
  db.exec('CREATE TABLE child (v INTEGER NOT NULL, parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)');
  db.pragma('foreign_keys = ON');
  const outcomes = await Promise.allSettled([
    writer.run(insert(1)),
    writer.run(() => db.prepare('INSERT INTO child (v, parent) VALUES (1, 999)').run().changes),
    writer.run(insert(2)),
  ]);
  expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
  for (const outcome of outcomes) expect(String((outcome as PromiseRejectedResult).reason)).toMatch(/FOREIGN KEY constraint failed/);
  expect(commits).toBe(0);
  expect(db.inTransaction).toBe(false);
  expect((db.prepare('SELECT COUNT(*) AS n FROM t').get() as { n: number }).n).toBe(0);
  expect((db.prepare('SELECT COUNT(*) AS n FROM child').get() as { n: number }).n).toBe(0);
  // The writer goes on: the next batch commits.
  expect(await writer.run(insert(3))).toBe(1);
  expect(commits).toBe(1);
});

it('fails every caller of a batch re-run one by one (an operation threw) whose COMMIT then fails', async () => {
  // The throwing operation sends the batch down the savepoint path; the deferred foreign key fails its COMMIT.
  db.exec('CREATE TABLE parent (id INTEGER PRIMARY KEY)');
  db.exec('CREATE TABLE child (v INTEGER NOT NULL, parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)');
  db.pragma('foreign_keys = ON');
  const outcomes = await Promise.allSettled([
    writer.run(insert(1)),
    writer.run(() => {
      throw new Error('refused by the operation');
    }),
    writer.run(() => db.prepare('INSERT INTO child (v, parent) VALUES (1, 999)').run().changes),
    writer.run(insert(2)),
  ]);
  expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected', 'rejected']);
  expect(String((outcomes[1] as PromiseRejectedResult).reason)).toMatch(/refused by the operation/);
  for (const i of [0, 2, 3]) expect(String((outcomes[i] as PromiseRejectedResult).reason)).toMatch(/FOREIGN KEY constraint failed/);
  expect(commits).toBe(0);
  expect((db.prepare('SELECT COUNT(*) AS n FROM t').get() as { n: number }).n).toBe(0);
  expect(await writer.run(insert(3))).toBe(1);
});

it('tries again for the write lock as soon as it may be free, not at its retry timer', async () => {
  const holder = new Database(join(dir, 'gc.db'));
  const waiting = new GroupCommit({
    db,
    now: () => 0,
    translateError: (error) => error,
    isFatal: () => false,
    beginWithoutWaiting: () => {
      db.pragma('busy_timeout = 0');
      db.exec('BEGIN IMMEDIATE');
    },
    isBusy: (error) => (error as { code?: string }).code === 'SQLITE_BUSY',
    lockWaitMs: 60_000,
    // Ten minutes between tries: only lockMayBeFree can let the batch in within the test.
    lockRetryDelayMs: () => 600_000,
  });
  try {
    holder.exec('BEGIN IMMEDIATE');
    const committed = waiting.run(insert(7));
    // Let the batch find the lock taken and go back to wait.
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
    waiting.lockMayBeFree();
    holder.exec('COMMIT');
    waiting.lockMayBeFree();
    const outcome = await Promise.race([committed.then(() => 'committed'), new Promise((resolve) => setTimeout(() => resolve('still waiting'), 2_000))]);
    expect(outcome).toBe('committed');
    expect((db.prepare('SELECT COUNT(*) AS n FROM t WHERE v = 7').get() as { n: number }).n).toBe(1);
  } finally {
    if (holder.inTransaction) holder.exec('ROLLBACK');
    holder.close();
    waiting.close();
  }
});
