/** The client's public surface. */

export { LeaseholdClient, type LeaseholdClientOptions, type CallOptions } from './leasehold-client.js';
export { LeaseholdApiError, LeaseholdNetworkError, LeaseholdIntegrityError, isRetryableError } from './errors.js';
export type * from './types.js';
