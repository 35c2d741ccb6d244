/**
 * The databases a library-mode test opens a Queue on: a fresh SQLite file,
 * and a fresh PostgreSQL schema when DATABASE_URL is set, each with its
 * cleanup. `label` names the temporary directory and the schema.
 */

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';

export interface QueueTarget {
  readonly name: 'sqlite' | 'postgres';
  /** A fresh database, and how to remove it. */
  create(): { readonly db: string; readonly cleanup: () => Promise<void> };
}

export function queueTargets(label: string): QueueTarget[] {
  const url = process.env['DATABASE_URL'] ?? '';
  const targets: QueueTarget[] = [
    {
      name: 'sqlite',
      create() {
        const dir = mkdtempSync(join(tmpdir(), `lh-${label}-`));
        return { db: join(dir, 'app.db'), cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
      },
    },
  ];
  if (url !== '') {
    targets.push({
      name: 'postgres',
      create() {
        const schema = `lh_test_${label.replaceAll('-', '_')}_${randomBytes(6).toString('hex')}`;
        const separator = url.includes('?') ? '&' : '?';
        return { db: `${url}${separator}schema=${schema}`, cleanup: () => PostgresStore.dropSchema({ connectionString: url, schema }) };
      },
    });
  }
  return targets;
}
