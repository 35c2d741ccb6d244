/**
 * The CLI's composition root: its one choice of backend. A `postgres://` or
 * `postgresql://` connection string opens the PostgreSQL store, anything else
 * is a SQLite file path (store/database-url.ts). The library's root,
 * src/queue/open-queue.ts, chooses the same way; no other module names a
 * concrete store.
 */

import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { isPostgresUrl } from '../store/database-url.js';
import type { Store } from '../store/store.js';
import { CliError } from './command.js';

export interface OpenStoreOptions {
  /** SQLite only: how long a write waits for another process's write lock before it answers store_unavailable. */
  readonly sqliteBusyTimeoutMs?: number;
  /**
   * SQLite only: refuse a file that does not exist (a typo in --db would
   * otherwise create a new, empty database). PostgreSQL databases are never
   * created: the server refuses an unknown one.
   */
  readonly mustExist?: boolean;
  /** PostgreSQL only: open half the pool at start, ready for the hot statements (a long-running `serve`). */
  readonly warm?: boolean;
}

/** True when `db` is a SQLite path whose file does not exist yet (it will be created on open). */
export function isNewSqliteFile(db: string): boolean {
  return !isPostgresUrl(db) && !existsSync(resolve(db));
}

/** Loads only the backend it opens: the CLI starts faster, and a SQLite user never loads pg. */
export async function openStore(db: string, options: OpenStoreOptions = {}): Promise<Store> {
  if (isPostgresUrl(db)) {
    const { PostgresStore } = await import('../store/postgres/postgres-store.js');
    return PostgresStore.connect({ connectionString: db, warm: options.warm === true });
  }
  return openSqliteStore(db, options);
}

/** A SQLite file, whatever the path looks like (`leasehold dev`). */
export async function openSqliteStore(path: string, options: OpenStoreOptions = {}): Promise<Store> {
  if (options.mustExist === true && !existsSync(resolve(path))) {
    throw new CliError(
      'database_not_found',
      `no database at ${resolve(path)}: check --db (or $LEASEHOLD_DB), or pass --create to create a new, empty one there`,
    );
  }
  const { SqliteStore } = await import('../store/sqlite/sqlite-store.js');
  return SqliteStore.open({ path: resolve(path), ...(options.sqliteBusyTimeoutMs === undefined ? {} : { busyTimeoutMs: options.sqliteBusyTimeoutMs }) });
}

/** Query parameters that carry a secret: libpq's `password` and `sslpassword`, and anything named like one. */
const SECRET_PARAMETER = /pass|secret|token|key|auth|cred/i;

/**
 * The database as it may be shown in logs: a connection string loses its
 * password, whether in the user info (`user:secret@`) or in the query string
 * (`?password=secret`, `?sslpassword=…`).
 */
export function describeDb(db: string): string {
  if (!isPostgresUrl(db)) return resolve(db);
  try {
    const url = new URL(db);
    if (url.password !== '') url.password = '***';
    for (const name of [...new Set(url.searchParams.keys())]) {
      if (SECRET_PARAMETER.test(name)) url.searchParams.set(name, '***');
    }
    return url.toString();
  } catch {
    return 'postgres://(unparseable connection string)';
  }
}
