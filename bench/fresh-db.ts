/**
 * A fresh database for one benchmark or soak run: `sqlite` gives a new file in
 * a new temporary directory, a `postgres://` URL a new schema in that
 * database. `cleanup` removes it; `sizeBytes` is what it takes on disk (the
 * SQLite file plus its WAL, or the schema's tables with their indexes).
 */

import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshPostgresDb } from './postgres-db.js';

export interface FreshDatabase {
  readonly db: string;
  cleanup(): Promise<void>;
  sizeBytes(): Promise<number>;
  /** PostgreSQL without autovacuum: space of deleted rows is never reused (always false for SQLite). */
  autovacuumOff(): Promise<boolean>;
  /** PostgreSQL: VACUUM (ANALYZE) of the queue's tables, whatever autovacuum is set to (nothing for SQLite). */
  vacuum(): Promise<void>;
}

export async function freshDatabase(spec: string, name: string): Promise<FreshDatabase> {
  if (spec === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), `leasehold-${name}-`));
    const db = join(dir, `${name}.db`);
    const size = (path: string): number => statSync(path, { throwIfNoEntry: false })?.size ?? 0;
    return {
      db,
      cleanup: async () => rmSync(dir, { recursive: true, force: true }),
      sizeBytes: async () => size(db) + size(`${db}-wal`),
      autovacuumOff: async () => false,
      vacuum: async () => undefined,
    };
  }
  const fresh = await freshPostgresDb(spec);
  return { db: fresh.url, cleanup: fresh.drop, sizeBytes: fresh.sizeBytes, autovacuumOff: fresh.autovacuumOff, vacuum: fresh.vacuum };
}
