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
