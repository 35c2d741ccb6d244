/**
 * Opening the SQLite file: WAL with synchronous=FULL (a commit is on disk when
 * it returns), foreign keys, the lh_token() function the lease statements
 * draw tokens from, and the migrations; then the prepared statements, the
 * group-commit writer and the database's list cursor secret.
 */

import Database, { type Database as Db, type Statement } from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Clock } from '../../core/clock.js';
import { newLeaseToken } from '../../core/ids.js';
import { CURSOR_SECRET_NAME, newCursorSecret } from '../list-cursor.js';
import { isBusy, isUnavailable, translate } from './errors.js';
import { GroupCommit, type GroupCommitOptions } from './group-commit.js';
import { migrate } from './migrate.js';
import { SQL, type Statements } from './queries.js';

export interface DatabaseOptions {
  readonly path: string;
  readonly readonly: boolean;
  readonly busyTimeoutMs: number;
  readonly clock: Clock;
}

export function openDatabase(options: DatabaseOptions): Db {
  try {
    if (!options.readonly) mkdirSync(dirname(options.path), { recursive: true });
    const db = new Database(options.path, { readonly: options.readonly });
    db.pragma(`busy_timeout = ${options.busyTimeoutMs}`);
    if (!options.readonly) {
      // A new database returns the pages retention frees to the file system (retention.ts); only settable before any table exists.
      if (db.prepare('SELECT count(*) AS n FROM sqlite_master').pluck().get() === 0) db.pragma('auto_vacuum = INCREMENTAL');
      db.pragma('journal_mode = WAL');
      // FULL: the WAL is fsynced at every commit, so an acknowledged write survives power loss.
      db.pragma('synchronous = FULL');
    }
    db.pragma('foreign_keys = ON');
    // Statement journals in memory: a statement with a trigger (the result guard of migration 1) or one that
    // changes several rows opens one, and in a file it costs a dozen page writes. They hold only the pages one statement touches.
    db.pragma('temp_store = MEMORY');
    db.function('lh_token', { deterministic: false }, () => newLeaseToken());
    if (!options.readonly) migrate(db, options.clock);
    return db;
  } catch (error) {
    throw translate(error);
  }
}

/**
 * The statements of SQL on someone else's connection to the store's file (an application's own handle),
 * each prepared the first time it is used, so only what is used is prepared there.
 */
export function lazyStatements(db: Db): Statements {
  const prepared = new Map<string, Statement>();
  return new Proxy({} as Statements, {
    get(_target, name) {
      if (typeof name !== 'string' || !Object.hasOwn(SQL, name)) return undefined;
      let statement = prepared.get(name);
      if (statement === undefined) {
        statement = db.prepare(SQL[name as keyof typeof SQL]);
        prepared.set(name, statement);
      }
      return statement;
    },
  });
}

export function prepareStatements(db: Db): Statements {
  return Object.fromEntries(Object.entries(SQL).map(([name, text]) => [name, db.prepare(text)])) as unknown as Statements;
}

export function groupCommitWriter(
  db: Db,
  clock: Clock,
  busyTimeoutMs: number,
  deferred: NonNullable<GroupCommitOptions['deferred']>,
  afterCommit?: () => void,
): GroupCommit {
  const waitNot = db.prepare('PRAGMA busy_timeout = 0');
  const waitAgain = db.prepare(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
  return new GroupCommit({
    db,
    ...(afterCommit === undefined ? {} : { afterCommit }),
    deferred,
    now: () => clock.now(),
    translateError: translate,
    isFatal: isUnavailable,
    // The wait for another process's write lock happens between tries, off the event loop; reads keep the busy timeout.
    beginWithoutWaiting: () => {
      waitNot.get();
      try {
        db.exec('BEGIN IMMEDIATE');
      } finally {
        waitAgain.get();
      }
    },
    isBusy,
    lockWaitMs: busyTimeoutMs,
  });
}

/** The database's cursor secret, created by the first store to open it (a read-only store that finds none seals for itself). */
export function loadCursorSecret(db: Db, st: Statements): Buffer {
  const get = (): Buffer | undefined => (st.secretGet.get(CURSOR_SECRET_NAME) as { secret: Buffer } | undefined)?.secret;
  const found = get();
  if (found !== undefined) return found;
  if (db.readonly) return newCursorSecret();
  st.secretInsert.run(CURSOR_SECRET_NAME, newCursorSecret());
  return get() ?? newCursorSecret();
}
