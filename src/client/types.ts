/**
 * Client-side result types for answers that are more than a wire body
 * (headers folded in); the wire bodies a caller passes or reads are
 * re-exported from src/protocol so that users of the client need one import.
 */

import type { Job } from '../protocol/schemas.js';

export interface EnqueueResult {
  readonly job: Job;
  /** True when the idempotency key matched an earlier identical request (no new job). */
  readonly replayed: boolean;
  /** True when the request's dedupe key folded it into `job`, an existing job (no new job). */
  readonly deduplicated: boolean;
  /** The coordinator's suggested polling interval for this job. */
  readonly retryAfterSeconds: number | undefined;
}

export type {
  DedupeSpec,
  EnqueueBatchItem,
  EnqueueBatchResponse,
  EnqueueBatchResult,
  EnqueueResponse,
  ErrorDetails,
  HealthResponse,
  Kind,
  ReconcileOutcomeName,
  ResultBytes,
  UniqueSpec,
} from '../protocol/schemas.js';
export type { PurgeRequest, PurgeResponse } from '../protocol/retention.js';

export interface JobResultBody {
  readonly contentType: string;
  readonly body: Buffer;
  /** SHA-256 of body, lowercase hex; verified against the coordinator's headers. */
  readonly checksum: string;
  /** The parsed value when the content type is JSON. */
  readonly value: unknown;
}
