/**
 * Applies MIGRATIONS at open, in one IMMEDIATE transaction, so two processes
 * opening a new file at once cannot both apply a version: the second waits
 * for the write lock, then finds everything applied. A failed migration rolls
 * back entirely. Applied versions are recorded by number and name only, so a
 * migration's text may be rewritten as long as what it creates stays the same.
 *
 * A file that is already up to date is opened without the write lock: a read
 * finds every version applied. Another process opening a busy file (its peers
 * holding the lock commit after commit) would otherwise wait in BEGIN
 * IMMEDIATE for a turn it may not get within the busy timeout.
 */

import type { Database } from 'better-sqlite3';
import type { Clock } from '../../core/clock.js';
import { MIGRATIONS, type Migration } from './migrations.js';
import { SQL } from './queries.js';

function appliedVersions(db: Database): Set<number> {
  return new Set((db.prepare(SQL.migrationsApplied).all() as { version: number }[]).map((r) => r.version));
}

function upToDate(db: Database, migrations: readonly Migration[]): boolean {
  if (db.prepare(SQL.migrationsTableExists).get() === undefined) return false;
  const applied = appliedVersions(db);
  return migrations.every((migration) => applied.has(migration.version));
}

export function migrate(db: Database, clock: Clock, migrations: readonly Migration[] = MIGRATIONS): void {
  if (upToDate(db, migrations)) return;
  // A table rebuild (migration 9) drops a table that others reference: foreign keys are off while migrations
  // run (the pragma has no effect inside a transaction, so before BEGIN) and checked before the commit.
  const foreignKeys = db.pragma('foreign_keys', { simple: true }) as number;
  db.pragma('foreign_keys = OFF');
  db.exec('BEGIN IMMEDIATE');
  try {
    db.exec(SQL.migrationsTable);
    const applied = appliedVersions(db);
    for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
      if (applied.has(migration.version)) continue;
      db.exec(migration.sql);
      db.prepare(SQL.migrationRecord).run(migration.version, migration.name, clock.now());
    }
    const violations = db.pragma('foreign_key_check') as unknown[];
    if (violations.length > 0) throw new Error(`the migrations left ${violations.length} foreign key violations`);
    db.exec('COMMIT');
  } catch (error) {
    if (db.inTransaction) db.exec('ROLLBACK');
    throw error;
  } finally {
    db.pragma(`foreign_keys = ${foreignKeys === 1 ? 'ON' : 'OFF'}`);
  }
}
