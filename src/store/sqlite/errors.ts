/**
 * Driver errors, translated at the store boundary. SQLite result codes that
 * mean "the database cannot be reached or written right now" (busy, locked,
 * full, I/O, read-only, closed) become StoreUnavailableError, which callers
 * answer with 503 and may retry; any other driver error is a bug and passes
 * through unchanged.
 */

import { ERRORS, StoreUnavailableError } from '../../core/errors.js';

/** SQLite result codes that mean "cannot reach or write the database now", not a bug. */
const UNAVAILABLE_CODES = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|READONLY|CANTOPEN|PROTOCOL|NOMEM|CORRUPT|NOTADB|PERM)/;

export function isUnavailable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && UNAVAILABLE_CODES.test(code)) return true;
  return error instanceof TypeError && /database connection is not open/.test(error.message);
}

export function isBusy(error: unknown): boolean {
  return /^SQLITE_BUSY/.test(String((error as { code?: unknown } | null)?.code));
}

export function translate(error: unknown): unknown {
  if (error instanceof StoreUnavailableError) return error;
  if (isUnavailable(error) || (error instanceof Error && error.message === 'store is closed')) {
    return new StoreUnavailableError(ERRORS.store_unavailable.message, error);
  }
  return error;
}
