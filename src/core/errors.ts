/**
 * Every error a client can see has a stable code listed here, with its HTTP
 * status. docs/ERRORS.md documents each; a test fails when one is missing there.
 */

export const ERROR_CODES = {
  invalid_request: 400,
  invalid_json: 400,
  idempotency_key_required: 400,
  unknown_kind: 400,
  invalid_payload: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  result_not_ready: 404,
  method_not_allowed: 405,
  idempotency_conflict: 409,
  stale_lease: 409,
  not_dead: 409,
  not_unknown: 409,
  cancelled: 409,
  deadline_exceeded: 409,
  invalid_state: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  too_many_requests: 429,
  internal_error: 500,
  overloaded: 503,
  store_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

/**
 * Codes stored on a job as its last error when the queue itself ends an
 * attempt or a job. A worker's fail stores the worker's own code instead; the
 * failure class (failure-classes.ts) says which rule applied in both cases.
 */
export const JOB_FAILURE_CODES = {
  lease_expired: 'the lease expired before the worker completed or failed the job',
  deadline_exceeded: 'the job passed its overall deadline',
  result_too_large: "the result is larger than the kind's maxResultBytes",
  effect_unknown: 'the lease expired after the handler started an external effect; reconcile it',
  cancelled: 'cancelled by request',
  reconciled_dead: 'marked dead by an operator after reconciliation',
  dependency_failed: 'a job it depends on (dependsOn) ended dead or cancelled',
} as const;

export class LeaseholdError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Seconds a client should wait before trying again (503s). */
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message: string, options: { retryAfterSeconds?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'LeaseholdError';
    this.code = code;
    this.status = ERROR_CODES[code];
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/** The store could not be reached or written: the request changed nothing and may be retried. */
export class StoreUnavailableError extends LeaseholdError {
  constructor(message = 'the job store is unavailable', cause?: unknown) {
    super('store_unavailable', message, { retryAfterSeconds: 1, cause });
    this.name = 'StoreUnavailableError';
  }
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(ERROR_CODES, value);
}
