/**
 * `openQueue`: the library's composition root. It opens the store the
 * options name (a SQLite file, by path or from the application's own
 * better-sqlite3 handle; a PostgreSQL database, by URL or from the
 * application's own pg Pool), runs the migrations, and returns a Queue for
 * one tenant. Like the CLI's open-store.ts, it is one of the two modules that
 * name a concrete backend, and it loads only the one it opens.
 */

import type { Database } from 'better-sqlite3';
import type pg from 'pg';
import { isPostgresUrl } from '../store/database-url.js';
import type { Store } from '../store/store.js';
import { Queue, type KindPayloads, type QueueSettings, type TransactionalEnqueue } from './queue.js';

export type OpenQueueOptions = QueueSettings &
  (
    | {
        /** A SQLite file path, or a `postgres://` URL (its `schema` parameter names the schema). */
        readonly db: string;
      }
    | {
        /** The application's own better-sqlite3 handle on a file: the queue's tables live in that file. */
        readonly sqlite: Database;
      }
    | {
        /** The application's own pg Pool: the queue opens its own connections with the same settings. */
        readonly pg: pg.Pool;
        /** Where the queue's tables live on PostgreSQL; default `leasehold`. */
        readonly schema?: string;
      }
  );

/** The connection string a pg Pool was made with (from `connectionString`, or its host, port, user and database). */
function connectionStringOf(pool: pg.Pool): string {
  const options = pool.options as pg.PoolConfig;
  if (typeof options.connectionString === 'string') return options.connectionString;
  const url = new URL('postgres://localhost');
  url.hostname = typeof options.host === 'string' ? options.host : 'localhost';
  if (options.port !== undefined) url.port = String(options.port);
  if (typeof options.user === 'string') url.username = options.user;
  if (typeof options.password === 'string') url.password = options.password;
  url.pathname = `/${typeof options.database === 'string' ? options.database : ''}`;
  return url.toString();
}

interface Opened {
  readonly store: Store;
  readonly transactional: TransactionalEnqueue;
}

async function openPostgres(connectionString: string, schema: string | undefined): Promise<Opened> {
  const { PostgresStore } = await import('../store/postgres/postgres-store.js');
  const store = await PostgresStore.connect({ connectionString, ...(schema === undefined ? {} : { schema }) });
  return { store, transactional: { pg: (client, params) => store.enqueueOnClient(client, params) } };
}

/**
 * How often a waiting library process reads SQLite's data_version (a counter in shared memory, not the jobs
 * table) when nothing else tells it to: the safety net behind the watch on the -wal file, which hears
 * another process's commit within a millisecond or two (sqlite/availability.ts).
 */
const CROSS_PROCESS_POLL_MS = 50;

async function openSqlite(path: string): Promise<Opened> {
  const { SqliteStore } = await import('../store/sqlite/sqlite-store.js');
  const store = SqliteStore.open({ path, crossProcessPollMs: CROSS_PROCESS_POLL_MS, watchWalFile: true });
  return { store, transactional: { sqlite: (db, params) => store.enqueueOnConnection(db, params) } };
}

export async function openQueue<Kinds extends KindPayloads = KindPayloads>(options: OpenQueueOptions): Promise<Queue<Kinds>> {
  let opened: Opened;
  if ('db' in options) {
    opened = isPostgresUrl(options.db) ? await openPostgres(options.db, undefined) : await openSqlite(options.db);
  } else if ('sqlite' in options) {
    if (options.sqlite.memory) throw new TypeError('openQueue needs a SQLite database in a file (the queue opens its own connections to it), not :memory:');
    opened = await openSqlite(options.sqlite.name);
  } else {
    opened = await openPostgres(connectionStringOf(options.pg), options.schema ?? 'leasehold');
  }
  const { store } = opened;
  try {
    return await Queue.over<Kinds>(store, options, () => store.close(), opened.transactional);
  } catch (error) {
    await store.close();
    throw error;
  }
}
