/**
 * The wire contract: one TypeBox schema per request and response body, each
 * defined once in the module for its resource, and re-exported here so that
 * a caller needs one import. The coordinator validates with these and
 * generates /openapi.json from them; the client and the worker take their
 * types from them. Field names are public API.
 *
 * Timestamps on the wire are RFC 3339 strings in UTC; durations are integer
 * milliseconds named `…Ms`.
 */

export * from './limits.js';
export * from './common.js';
export * from './jobs.js';
export * from './leases.js';
export * from './kinds.js';
export * from './system.js';
export * from './wait-ends.js';
export * from './operator.js';
export * from './retention.js';
export * from './schedules.js';
