/**
 * Errors with a stable code: the table of the codes a client can see (ERRORS),
 * the codes the queue stores on a job it ends (JOB_FAILURE_CODES), and
 * LeaseholdError, which carries a code, its status and a message.
 */

/**
 * Every error a client can see, one line each: its stable code, its HTTP
 * status, and the message it answers with wherever the thrower has nothing to
 * add (null: every thrower says what failed, such as which field, limit, role
 * or path, so there is no common one). docs/ERRORS.md documents each code; a
 * test fails when one is missing there. Codes and statuses are public API;
 * messages are for people, though clients read them too.
 */
export const ERRORS = {
  invalid_request: { status: 400, message: null },
  invalid_json: { status: 400, message: 'the request body is not valid JSON' },
  idempotency_key_required: { status: 400, message: 'the Idempotency-Key header is required' },
  unknown_kind: { status: 400, message: null },
  invalid_payload: { status: 400, message: null },
  unauthorized: { status: 401, message: null },
  forbidden: { status: 403, message: null },
  // A job's: the common case. A kind, a schedule or a route says which it is.
  not_found: { status: 404, message: 'job not found' },
  result_not_ready: { status: 404, message: null },
  method_not_allowed: { status: 405, message: null },
  idempotency_conflict: { status: 409, message: 'this Idempotency-Key was already used with a different request body' },
  // Its details name the existing job (error.details.jobId).
  duplicate_job: { status: 409, message: 'a job of this kind with this unique key is unfinished or finished within its forMs' },
  stale_lease: { status: 409, message: 'the lease token is not the current lease of this job (it expired or the job was leased again)' },
  not_dead: { status: 409, message: 'only a dead job can be requeued' },
  not_unknown: { status: 409, message: 'only a job in the unknown state can be reconciled' },
  cancelled: { status: 409, message: 'the job was cancelled' },
  deadline_exceeded: { status: 409, message: 'the job passed its deadline' },
  invalid_state: { status: 409, message: 'the job already ended and cannot be cancelled' },
  // A body over the coordinator's limit; a payload, progress, schema or checkpoint over its own says which.
  payload_too_large: { status: 413, message: 'the request body is larger than the limit' },
  unsupported_media_type: { status: 415, message: 'the request body must be JSON, sent with the header Content-Type: application/json' },
  too_many_requests: { status: 429, message: null },
  internal_error: { status: 500, message: 'internal error' },
  overloaded: { status: 503, message: null },
  store_unavailable: { status: 503, message: 'the job store is unavailable' },
} as const satisfies Readonly<Record<string, { readonly status: number; readonly message: string | null }>>;

export type ErrorCode = keyof typeof ERRORS;

/** Each code's HTTP status (the `status` column of ERRORS). */
export const ERROR_CODES: Readonly<Record<ErrorCode, number>> = Object.freeze(
  Object.fromEntries(Object.entries(ERRORS).map(([code, { status }]) => [code, status])) as Record<ErrorCode, number>,
);

/** The codes that have a message of their own in ERRORS: a LeaseholdError with one of them may leave its message out. */
export type CodeWithMessage = { [C in ErrorCode]: (typeof ERRORS)[C]['message'] extends string ? C : never }[ErrorCode];

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

/** Facts an error names beside its message (the `details` of the error body): duplicate_job names the existing job. */
export interface ErrorDetails {
  readonly jobId?: string;
}

export interface LeaseholdErrorOptions {
  readonly retryAfterSeconds?: number;
  readonly details?: ErrorDetails;
  readonly cause?: unknown;
}

export class LeaseholdError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Seconds a client should wait before trying again (503s). */
  readonly retryAfterSeconds: number | undefined;
  /** Sent as `error.details`; undefined for the codes that name nothing. */
  readonly details: ErrorDetails | undefined;

  /** Without a message, the code's own from ERRORS. */
  constructor(code: CodeWithMessage, message?: string, options?: LeaseholdErrorOptions);
  constructor(code: ErrorCode, message: string, options?: LeaseholdErrorOptions);
  constructor(code: ErrorCode, message?: string, options: LeaseholdErrorOptions = {}) {
    super(message ?? ERRORS[code].message ?? code, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'LeaseholdError';
    this.code = code;
    this.status = ERRORS[code].status;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.details = options.details;
  }
}

/** A unique key's refusal, naming the job that holds the key. */
export function duplicateJobError(jobId: string): LeaseholdError {
  return new LeaseholdError('duplicate_job', undefined, { details: { jobId } });
}

/** The store could not be reached or written: the request changed nothing and may be retried. */
export class StoreUnavailableError extends LeaseholdError {
  constructor(message: string = ERRORS.store_unavailable.message, cause?: unknown) {
    super('store_unavailable', message, { retryAfterSeconds: 1, cause });
    this.name = 'StoreUnavailableError';
  }
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(ERRORS, value);
}
