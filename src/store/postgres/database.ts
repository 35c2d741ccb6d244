/**
 * The connection pool of the PostgreSQL store and the two ways to use it: one
 * statement (its own transaction), or a function run between BEGIN and COMMIT
 * on one pooled connection. Both translate driver errors at this boundary
 * (errors.ts) and retry a deadlock or serialization failure a few times,
 * which is safe because the failed attempt was rolled back entirely.
 *
 * Every pooled connection starts with the store's schema as its search_path
 * and server-side timeouts, passed as startup options so they cost no extra
 * round trip.
 */

import pg from 'pg';
import { StoreUnavailableError } from '../../core/errors.js';
import { CURSOR_SECRET_NAME, newCursorSecret } from '../list-cursor.js';
import * as C from './catalog-queries.js';
import { isRetryableConflict, pgTarget, translatePgConnectError, translatePgError } from './errors.js';
import { assertSchemaName, migrate, type MigrationReport } from './migrate.js';
import { bind } from './sql-fragments.js';
import { warmConnections, warmUp } from './warm-up.js';

const CONFLICT_RETRIES = 3;

export interface PgDatabaseOptions {
  readonly connectionString: string;
  readonly schema: string;
  readonly poolSize: number;
  /** Connections the pool keeps open while idle (warm-up.ts); 0 when absent. */
  readonly minConnections?: number;
  /** Set synchronous_commit=on for our sessions (when the server's default is off). */
  readonly forceSynchronousCommit?: boolean;
}

/** A connection inside a transaction: queries only, no BEGIN/COMMIT of its own. */
export interface TxClient {
  query<R extends pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>;
}

/**
 * The planner settings of every store connection, as [name, value]; the plan tests run under the same.
 * - plan_cache_mode: generic plans. The store's named statements have the same shape every time, and the
 *   planner made a custom plan for each execution of the lease statement (1.1 ms of planning for 0.6 ms of
 *   execution here); the plan tests measure the generic plans.
 * - jit off: a generic plan's estimates for the skip scans of job_ready (recursive CTEs) pass jit_above_cost,
 *   and compiling the lease statement took 60-100 ms at each execution for a statement that runs in 0.1 ms.
 * - enable_seqscan off: a connection plans each statement once and keeps the plan until the table's
 *   statistics change, and a new queue's plans are made while its tables are nearly empty, where a sequential
 *   scan looks cheapest; every statement of the store has an index to go by, and with sequential scans
 *   priced out the plan made on an empty table is the one a large table needs, with no ANALYZE to wait for
 *   (test/store/postgres-statistics.test.ts). A statement with no index to use still scans the table.
 */
export const PLANNER_SETTINGS: readonly (readonly [string, string])[] = [
  ['plan_cache_mode', 'force_generic_plan'],
  ['jit', 'off'],
  ['enable_seqscan', 'off'],
];

export function clientConfig(options: Omit<PgDatabaseOptions, 'poolSize'>): pg.ClientConfig {
  return {
    connectionString: options.connectionString,
    // Names the schema too, so an operator (or a test) can tell the coordinators' connections apart.
    application_name: `leasehold:${options.schema}`.slice(0, 63),
    // The schema name is validated (migrate.ts), so it needs no quoting here.
    options:
      `-c search_path=${options.schema} -c statement_timeout=30000 -c idle_in_transaction_session_timeout=60000 ${PLANNER_SETTINGS.map(([name, value]) => `-c ${name}=${value}`).join(' ')}` +
      (options.forceSynchronousCommit === true ? ' -c synchronous_commit=on' : ''),
    connectionTimeoutMillis: 5_000,
    query_timeout: 35_000,
    keepAlive: true,
  };
}

export class PgDatabase {
  readonly pool: pg.Pool;
  private closed = false;
  /** When each call still waiting for a pooled connection started, oldest first (Map keeps insertion order). */
  private readonly acquiring = new Map<number, number>();
  private acquisitions = 0;

  constructor(options: PgDatabaseOptions) {
    this.pool = new pg.Pool({ ...clientConfig(options), max: options.poolSize, min: options.minConnections ?? 0, idleTimeoutMillis: 30_000 });
    // Without these, a connection that dies while idle, or between two queries
    // of a transaction, would emit an unhandled 'error' and end the process.
    // The failure reaches the caller through the next query instead.
    this.pool.on('error', () => undefined);
    this.pool.on('connect', (client) => client.on('error', () => undefined));
  }

  async query<R extends pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>> {
    for (let attempt = 1; ; attempt++) {
      if (this.closed) throw new StoreUnavailableError('the job store is closed');
      try {
        return await this.onClient((client) => client.query<R>(config));
      } catch (error) {
        if (isRetryableConflict(error) && attempt < CONFLICT_RETRIES) continue;
        throw translatePgError(error);
      }
    }
  }

  async transaction<T>(work: (client: TxClient) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      if (this.closed) throw new StoreUnavailableError('the job store is closed');
      let client: pg.PoolClient;
      try {
        client = await this.acquire();
      } catch (error) {
        throw translatePgError(error);
      }
      let broken = false;
      try {
        await client.query('BEGIN');
        const value = await work(client);
        await client.query('COMMIT');
        return value;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {
          broken = true;
        });
        if (isRetryableConflict(error) && attempt < CONFLICT_RETRIES) continue;
        throw translatePgError(error);
      } finally {
        // A connection whose ROLLBACK failed is in an unknown state: drop it.
        client.release(broken ? true : undefined);
      }
    }
  }

  /** Runs `work` on one pooled connection outside a transaction (statements PostgreSQL refuses inside one, such as VACUUM). */
  async withClient<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    if (this.closed) throw new StoreUnavailableError('the job store is closed');
    try {
      return await this.onClient(work);
    } catch (error) {
      throw translatePgError(error);
    }
  }

  /** One pooled connection for `work`; errors pass untranslated (query retries conflicts on them). */
  private async onClient<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.acquire();
    let failed = false;
    try {
      return await work(client);
    } catch (error) {
      failed = true;
      throw error;
    } finally {
      // As pg's pool.query does: a connection whose work failed is not reused.
      client.release(failed ? true : undefined);
    }
  }

  /** How long the oldest call still waiting for a connection has waited, in ms (0 with none): admission's queueing delay. */
  oldestWaitMs(): number {
    for (const since of this.acquiring.values()) return performance.now() - since;
    return 0;
  }

  private async acquire(): Promise<pg.PoolClient> {
    const id = this.acquisitions++;
    this.acquiring.set(id, performance.now());
    try {
      return await this.pool.connect();
    } finally {
      this.acquiring.delete(id);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }
}

/** Reads and removes our own `schema` and `pool_size` parameters from a connection URL. */
export function splitConnectionString(value: string): { connectionString: string; schema?: string; poolSize?: number } {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return { connectionString: value }; // Not a URL (a libpq keyword string): pg reads it as it is.
  }
  const schema = url.searchParams.get('schema');
  const pool = url.searchParams.get('pool_size') ?? url.searchParams.get('poolSize');
  for (const name of ['schema', 'pool_size', 'poolSize']) url.searchParams.delete(name);
  return {
    connectionString: url.toString(),
    ...(schema === null ? {} : { schema }),
    ...(pool === null ? {} : { poolSize: Number(pool) }),
  };
}

export interface OpenDatabaseOptions {
  readonly connectionString: string;
  readonly poolSize?: number;
  readonly schema?: string;
  /** Open half the pool at once with its hot statements planned, and keep those connections (warm-up.ts). */
  readonly warm?: boolean;
}

export interface OpenedDatabase {
  readonly db: PgDatabase;
  /** Without our own query parameters (splitConnectionString). */
  readonly connectionString: string;
  readonly schema: string;
  readonly poolSize: number;
  /** Seals list cursors; one row of the schema, so every coordinator on it opens every other's cursors. */
  readonly cursorSecret: Buffer;
}

/** The pool on a migrated schema, with synchronous commits, and the schema's list cursor secret. */
export async function openDatabase(options: OpenDatabaseOptions): Promise<OpenedDatabase> {
  const fromUrl = splitConnectionString(options.connectionString);
  const connectionString = fromUrl.connectionString;
  const schema = options.schema ?? fromUrl.schema ?? 'public';
  assertSchemaName(schema);
  const poolSize = options.poolSize ?? fromUrl.poolSize ?? 10;
  if (!Number.isInteger(poolSize) || poolSize < 1) throw new Error('poolSize must be a positive integer');
  const minConnections = options.warm === true ? warmConnections(poolSize) : 0;
  let db = new PgDatabase({ connectionString, schema, poolSize, minConnections });
  try {
    const client = await db.pool.connect();
    let report: MigrationReport;
    try {
      report = await migrate(client, schema);
    } finally {
      client.release();
    }
    // A success answer must mean a durable commit, whatever the server's default.
    if (report.synchronousCommit === 'off') {
      await db.close();
      db = new PgDatabase({ connectionString, schema, poolSize, minConnections, forceSynchronousCommit: true });
    }
    await db.query(bind(C.SECRET_INSERT, [CURSOR_SECRET_NAME, newCursorSecret()]));
  } catch (error) {
    await db.close().catch(() => undefined);
    throw translatePgConnectError(error, pgTarget(connectionString, schema));
  }
  let cursorSecret: Buffer | undefined;
  try {
    cursorSecret = (await db.query<{ secret: Buffer }>(bind(C.SECRET_GET, [CURSOR_SECRET_NAME]))).rows[0]?.secret;
  } catch (error) {
    await db.close().catch(() => undefined);
    throw translatePgError(error);
  }
  if (cursorSecret === undefined) {
    await db.close();
    throw new Error('store_secrets has no list cursor secret after inserting one');
  }
  if (minConnections > 0) await warmUp(db.pool, minConnections);
  return { db, connectionString, schema, poolSize, cursorSecret };
}
