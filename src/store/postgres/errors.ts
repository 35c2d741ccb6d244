/**
 * Driver errors, translated at the store boundary. Anything that means "the
 * database cannot be reached or written right now" (connection loss, a server
 * shutting down or starting up, a timeout, a standby after failover) becomes
 * StoreUnavailableError, which callers answer with 503 and may retry. Anything
 * else is a bug in this backend: it is rethrown with a message that names only
 * the SQLSTATE, because PostgreSQL messages can quote identifiers and values
 * and must not reach a client.
 */

import { LeaseholdError, StoreUnavailableError } from '../../core/errors.js';

/** SQLSTATE classes and codes that mean "try again later", not "this request is wrong". */
const UNAVAILABLE_CLASSES = ['08', '53', '57', '58'];
const UNAVAILABLE_CODES = new Set([
  '25006', // read_only_sql_transaction: connected to a standby after a failover
  '40001', // serialization_failure (after our own retries)
  '40P01', // deadlock_detected (after our own retries)
  '55P03', // lock_not_available
]);

/** Node and pg client conditions that carry no SQLSTATE. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);
const NETWORK_MESSAGES = [
  /connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /query read timeout/i,
  /connection timeout/i,
  /client has encountered a connection error/i,
  /not queryable/i,
  /cannot use a pool after calling end/i,
  /client was closed/i,
];

function errorCode(error: unknown): string | undefined {
  if (error !== null && typeof error === 'object' && 'code' in error) {
    const code = (error as { code: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

/** SQLSTATE of a server error, if it is one. */
export function sqlState(error: unknown): string | undefined {
  const code = errorCode(error);
  return code !== undefined && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** Worth retrying the whole transaction at once (deadlock, serialization). */
export function isRetryableConflict(error: unknown): boolean {
  const state = sqlState(error);
  return state === '40001' || state === '40P01';
}

export function isUnavailable(error: unknown): boolean {
  if (error instanceof StoreUnavailableError) return true;
  const state = sqlState(error);
  if (state !== undefined) return UNAVAILABLE_CODES.has(state) || UNAVAILABLE_CLASSES.includes(state.slice(0, 2));
  const code = errorCode(error);
  if (code !== undefined && NETWORK_CODES.has(code)) return true;
  const message = error instanceof Error ? error.message : '';
  return NETWORK_MESSAGES.some((pattern) => pattern.test(message));
}

/** The error a caller of the store sees for `error`. */
export function translatePgError(error: unknown): Error {
  if (error instanceof LeaseholdError) return error;
  if (isUnavailable(error)) return new StoreUnavailableError('the PostgreSQL store is unavailable', error);
  const state = sqlState(error);
  const message = state === undefined ? 'unexpected PostgreSQL client error' : `unexpected PostgreSQL error (SQLSTATE ${state})`;
  return new Error(message, { cause: error });
}

/** Where a connection string points, as far as it says (libpq's defaults otherwise). */
export interface PgTarget {
  readonly host: string;
  readonly port: string;
  readonly database: string;
  readonly user: string;
  readonly schema: string;
}

export function pgTarget(connectionString: string, schema: string): PgTarget {
  const env = process.env;
  let url: URL | undefined;
  try {
    url = new URL(connectionString);
  } catch {
    url = undefined;
  }
  const user = decodeURIComponent(url?.username ?? '') || env['PGUSER'] || env['USER'] || 'postgres';
  return {
    host: (url?.hostname ?? '') || url?.searchParams.get('host') || env['PGHOST'] || 'localhost',
    port: (url?.port ?? '') || env['PGPORT'] || '5432',
    database: decodeURIComponent((url?.pathname ?? '').replace(/^\//, '')) || env['PGDATABASE'] || user,
    user,
    schema,
  };
}

/**
 * A failure to open the store that the user can fix: the database, role,
 * password, host, port or a privilege named in --db. `code` is stable
 * (pg_unknown_database, pg_unknown_role, pg_auth_failed, pg_unknown_host,
 * pg_permission_denied); the message says what
 * to change. Raised only while connecting (the CLI prints it); requests never
 * see it, so naming the host and database here reaches no client.
 */
export class PgConnectError extends Error {
  constructor(
    readonly code: string,
    message: string,
    cause: unknown,
  ) {
    super(message, { cause });
    this.name = 'PgConnectError';
  }
}

/**
 * Translates an error met while connecting and migrating. A server that cannot
 * be reached stays StoreUnavailableError (it may come back), now naming the
 * address; anything not listed falls back to translatePgError.
 */
export function translatePgConnectError(error: unknown, target: PgTarget): Error {
  const where = `${target.host}:${target.port}`;
  const state = sqlState(error);
  const code = errorCode(error);
  const serverMessage = error instanceof Error ? error.message : '';
  const fix = 'correct the connection string';
  switch (state) {
    case '3D000':
      return new PgConnectError(
        'pg_unknown_database',
        `PostgreSQL at ${where} has no database "${target.database}": create it (createdb -h ${target.host} -p ${target.port} ${target.database}) or name an existing one; ${fix}`,
        error,
      );
    case '28000':
      return /does not exist/i.test(serverMessage)
        ? new PgConnectError(
            'pg_unknown_role',
            `PostgreSQL at ${where} has no role "${target.user}": create it (createuser ${target.user}) or connect as an existing user; ${fix}`,
            error,
          )
        : new PgConnectError(
            'pg_auth_failed',
            `PostgreSQL at ${where} refused user "${target.user}" for database "${target.database}" (pg_hba.conf): allow it there or connect as another user; ${fix}`,
            error,
          );
    case '28P01':
      return new PgConnectError(
        'pg_auth_failed',
        `PostgreSQL at ${where} refused the password of user "${target.user}": correct the password in the URL (or $PGPASSWORD); ${fix}`,
        error,
      );
    case '42501':
      return new PgConnectError(
        'pg_permission_denied',
        `PostgreSQL user "${target.user}" may not create leasehold's tables in schema "${target.schema}" of database "${target.database}" (${firstLine(serverMessage)}): ` +
          `grant it (GRANT CREATE ON DATABASE ${target.database} TO ${target.user}) or connect as the schema's owner`,
        error,
      );
  }
  if (code === 'ENOTFOUND') {
    return new PgConnectError('pg_unknown_host', `cannot resolve the PostgreSQL host "${target.host}": correct the host name; ${fix}`, error);
  }
  // A server that is down or still starting may come back by itself: these stay store_unavailable, with the address.
  if (code === 'ECONNREFUSED') {
    return new StoreUnavailableError(`nothing accepts connections at ${where}: start PostgreSQL there or correct the host and port; ${fix}`, error);
  }
  if (code === 'EAI_AGAIN') {
    return new StoreUnavailableError(`cannot resolve the PostgreSQL host "${target.host}" (DNS did not answer): check DNS, or ${fix}`, error);
  }
  if (isUnavailable(error)) {
    return new StoreUnavailableError(`no answer from PostgreSQL at ${where}: check the host, the port and any firewall between; ${fix}`, error);
  }
  return translatePgError(error);
}

function firstLine(text: string): string {
  return (text.split('\n', 1)[0] ?? '').slice(0, 200);
}
