/**
 * The task application's own tables in one SQLite file: users (an API key
 * each, stored hashed), tasks owned by a user, and export_requests, which
 * ties a leasehold job to its owner, the owner's idempotency key and the
 * export's canonical parameters. leasehold's tables live in the same file
 * (openQueue({ sqlite: db }) migrates them), so an export request and its job
 * commit in one transaction.
 */

import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';

export type AppDb = Database.Database;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS users (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  key_hash TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS tasks (
  id INTEGER PRIMARY KEY,
  user_id INTEGER NOT NULL REFERENCES users(id),
  title TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('open', 'done')),
  due_date TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_by_user ON tasks(user_id, id);
CREATE TABLE IF NOT EXISTS export_requests (
  job_id TEXT PRIMARY KEY,
  owner_user_id INTEGER NOT NULL REFERENCES users(id),
  request_key TEXT NOT NULL,
  parameters_json TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (owner_user_id, request_key)
);
`;

/** Opens (and creates) the application's file in WAL mode; the worker and the API open the same file. */
export function openAppDb(path: string, options: { readonly readonly?: boolean } = {}): AppDb {
  const db = new Database(path, { readonly: options.readonly ?? false });
  // Writers wait for each other rather than fail at once; a lock held longer than this is a transient failure.
  db.pragma('busy_timeout = 5000');
  if (options.readonly !== true) {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
    db.exec(SCHEMA);
  }
  return db;
}

export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export interface User {
  readonly id: number;
  readonly name: string;
}

export function userByKey(db: AppDb, key: string): User | undefined {
  return db.prepare<[string], User>('SELECT id, name FROM users WHERE key_hash = ?').get(hashKey(key));
}

export const TASK_STATUSES = ['open', 'done'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

export interface Task {
  readonly id: number;
  readonly title: string;
  readonly status: TaskStatus;
  readonly due_date: string | null;
  readonly created_at: string;
  readonly updated_at: string;
}

/** The columns an export writes, in order; both export paths read them with this one query. */
export const EXPORT_COLUMNS = ['id', 'title', 'status', 'due_date', 'created_at', 'updated_at'] as const;

/** Export filter: every task, or only one status. */
export type ExportStatusFilter = 'all' | TaskStatus;

/** One query for both paths: the owner's tasks in id order, walking the (user_id, id) index. */
export const EXPORT_SQL = `SELECT ${EXPORT_COLUMNS.join(', ')} FROM tasks WHERE user_id = @userId AND (@status = 'all' OR status = @status) ORDER BY id`;

export interface ExportQueryParams {
  readonly userId: number;
  readonly status: ExportStatusFilter;
}

export function exportQuery(db: AppDb): Database.Statement<[ExportQueryParams], Task> {
  return db.prepare<[ExportQueryParams], Task>(EXPORT_SQL);
}
