/**
 * What a client call can fail with. The coordinator's `{error:{code,message}}`
 * answers become LeaseholdApiError; a request that never got an answer becomes
 * LeaseholdNetworkError, which callers may retry; a result whose bytes do not
 * match their checksum becomes LeaseholdIntegrityError. Messages name the
 * method and path only: API keys and lease tokens travel in headers and bodies
 * and never appear here.
 */

import type { ErrorDetails } from '../protocol/common.js';

export class LeaseholdApiError extends Error {
  readonly status: number;
  /** The coordinator's stable error code (see docs/design/http-api.md §16), or `http_<status>` when the body had none. */
  readonly code: string;
  /** From the Retry-After header, when the coordinator sent one (503s, enqueue). */
  readonly retryAfterSeconds: number | undefined;
  /** The error body's `details`, for the codes that name something (duplicate_job: `jobId`, the existing job). */
  readonly details: ErrorDetails | undefined;

  constructor(status: number, code: string, message: string, retryAfterSeconds: number | undefined, details?: ErrorDetails) {
    super(message);
    this.name = 'LeaseholdApiError';
    this.status = status;
    this.code = code;
    this.retryAfterSeconds = retryAfterSeconds;
    this.details = details;
  }

  /** 503 (overloaded, store_unavailable): nothing changed, the same request may be sent again later. */
  get retryable(): boolean {
    return this.status === 503;
  }
}

export class LeaseholdNetworkError extends Error {
  /** The socket-level cause, e.g. ECONNREFUSED or UND_ERR_SOCKET; never a secret. */
  readonly causeCode: string | undefined;
  readonly retryable = true;

  constructor(message: string, causeCode: string | undefined, cause: unknown) {
    super(message, { cause });
    this.name = 'LeaseholdNetworkError';
    this.causeCode = causeCode;
  }
}

export class LeaseholdIntegrityError extends Error {
  readonly code: 'checksum_mismatch' | 'checksum_missing';

  constructor(code: 'checksum_mismatch' | 'checksum_missing', message: string) {
    super(message);
    this.name = 'LeaseholdIntegrityError';
    this.code = code;
  }
}

/** Parses Retry-After: delta-seconds or an HTTP date (relative to `now`). */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined || raw === '') return undefined;
  if (/^\d+$/.test(raw.trim())) return Number(raw.trim());
  const at = Date.parse(raw);
  if (!Number.isFinite(at)) return undefined;
  return Math.max(0, Math.ceil((at - now) / 1000));
}

/** True for errors a caller may retry unchanged: lost connections and 503s. */
export function isRetryableError(error: unknown): boolean {
  if (error instanceof LeaseholdNetworkError) return true;
  return error instanceof LeaseholdApiError && error.retryable;
}
