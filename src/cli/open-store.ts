/**
 * The composition root's one choice of backend: a `postgres://` or
 * `postgresql://` connection string opens the PostgreSQL store, anything else
 * is a SQLite file path. No other module names a concrete store.
 */

import { resolve } from 'node:path';
import type { Store } from '../store/store.js';

const POSTGRES_URL = /^postgres(ql)?:\/\//i;

export function isPostgresUrl(db: string): boolean {
  return POSTGRES_URL.test(db);
}

export interface OpenStoreOptions {
  /** SQLite only: how long a write waits for another process's write lock before it answers store_unavailable. */
  readonly sqliteBusyTimeoutMs?: number;
}

/** Loads only the backend it opens: the CLI starts faster, and a SQLite user never loads pg. */
export async function openStore(db: string, options: OpenStoreOptions = {}): Promise<Store> {
  if (isPostgresUrl(db)) {
    const { PostgresStore } = await import('../store/postgres/postgres-store.js');
    return PostgresStore.connect({ connectionString: db });
  }
  const { SqliteStore } = await import('../store/sqlite/sqlite-store.js');
  return SqliteStore.open({ path: resolve(db), ...(options.sqliteBusyTimeoutMs === undefined ? {} : { busyTimeoutMs: options.sqliteBusyTimeoutMs }) });
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
