/**
 * A fresh database for one benchmark or soak run: `sqlite` gives a new file in
 * a new temporary directory, a `postgres://` URL a new schema in that
 * database. `cleanup` removes it.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshPostgresDb } from './postgres-db.js';

export async function freshDatabase(spec: string, name: string): Promise<{ readonly db: string; cleanup(): Promise<void> }> {
  if (spec === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), `leasehold-${name}-`));
    return { db: join(dir, `${name}.db`), cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const fresh = await freshPostgresDb(spec);
  return { db: fresh.url, cleanup: fresh.drop };
}
