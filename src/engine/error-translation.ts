/**
 * Anything an engine operation throws, as the LeaseholdError a caller
 * switches on: a LeaseholdError as it is, a store fault (its translated
 * error, or a driver error the store marked) store_unavailable with a retry
 * in a second, anything else internal_error. The HTTP front answers the same
 * codes (coordinator/error-handler.ts); a library Queue and its direct
 * workers throw them.
 */

import { LeaseholdError } from '../core/errors.js';

export function isStoreUnavailable(error: unknown): boolean {
  return error instanceof LeaseholdError
    ? error.code === 'store_unavailable'
    : error !== null && typeof error === 'object' && (error as { code?: unknown }).code === 'store_unavailable';
}

export function asLeaseholdError(error: unknown): LeaseholdError {
  if (error instanceof LeaseholdError) return error;
  if (isStoreUnavailable(error)) return new LeaseholdError('store_unavailable', undefined, { retryAfterSeconds: 1, cause: error });
  return new LeaseholdError('internal_error', undefined, { cause: error });
}
