/**
 * Client-side result types for answers that are more than a wire body
 * (headers folded in), and for the few bodies src/protocol does not name yet.
 * Wire bodies themselves are imported from src/protocol/schemas.ts.
 */

import type { EnqueueRequest, Job, KindDefinition } from '../protocol/schemas.js';

export interface EnqueueResult {
  readonly job: Job;
  /** True when the idempotency key matched an earlier identical request (no new job). */
  readonly replayed: boolean;
  /** The coordinator's suggested polling interval for this job. */
  readonly retryAfterSeconds: number | undefined;
}

export type EnqueueBatchItem = EnqueueRequest & { readonly idempotencyKey: string };

export interface EnqueueBatchItemResult {
  readonly idempotencyKey?: string;
  readonly status: number;
  readonly replayed?: boolean;
  readonly job?: Job;
  readonly error?: { readonly code: string; readonly message: string };
}

export interface EnqueueBatchResult {
  readonly results: EnqueueBatchItemResult[];
}

export type Kind = Required<Omit<KindDefinition, 'deadlineMs' | 'payloadSchema'>> & {
  readonly kind: string;
  readonly payloadSchema: unknown;
  readonly deadlineMs: number | null;
  readonly updatedAt: string;
};

export interface HealthStatus {
  readonly status: string;
  readonly [field: string]: unknown;
}

export interface JobResultBody {
  readonly contentType: string;
  readonly body: Buffer;
  /** SHA-256 of body, lowercase hex; verified against the coordinator's headers. */
  readonly checksum: string;
  /** The parsed value when the content type is JSON. */
  readonly value: unknown;
}

export type ReconcileOutcome = 'succeeded' | 'dead' | 'requeue';
