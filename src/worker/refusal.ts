/**
 * A call the coordinator (or, in a library, the store-backed transport) answered with a refusal: over
 * HTTP a LeaseholdApiError from the client, in process a LeaseholdError. Both carry the HTTP API's
 * status and code, so the worker decides on those alone, whichever way it leases.
 */

import { LeaseholdApiError } from '../client/errors.js';
import { LeaseholdError } from '../core/errors.js';

export type Refusal = LeaseholdApiError | LeaseholdError;

export function refusalOf(error: unknown): Refusal | undefined {
  return error instanceof LeaseholdApiError || error instanceof LeaseholdError ? error : undefined;
}
