/** The job's records and the enqueue and listing parameters of the storage seam; store.ts re-exports them. */

import type { DedupeRequest, UniqueRequest } from '../core/dedupe.js';
import type { FailureClass } from '../core/failure-classes.js';
import type { JobStatus } from '../core/states.js';

/** Who may see a job: a tenant, narrowed to one owner for producer keys. */
export interface JobScope {
  readonly tenant: string;
  /** Set for producers: only their own jobs exist for them. */
  readonly owner?: string;
}

export interface JobError {
  readonly code: string;
  readonly message: string;
}

/** A job's last error as stored: the code that ended the attempt, and the failure class the queue applied. */
export interface StoredJobError extends JobError {
  readonly class: FailureClass;
}

export interface Checkpoint {
  readonly step: number;
  readonly state: unknown;
}

export interface JobResult {
  readonly contentType: string;
  readonly body: Buffer;
  /** SHA-256 of body, lowercase hex. */
  readonly checksum: string;
}

export interface JobRecord {
  readonly id: string;
  readonly tenant: string;
  readonly owner: string;
  readonly kind: string;
  readonly payload: unknown;
  readonly status: JobStatus;
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly priority: number;
  readonly runAfter: number;
  readonly deadlineAt: number | null;
  readonly leaseOwner: string | null;
  readonly leaseExpiresAt: number | null;
  readonly epoch: number;
  readonly createdAt: number;
  /** When the first attempt started. */
  readonly startedAt: number | null;
  readonly finishedAt: number | null;
  readonly lastError: StoredJobError | null;
  readonly progress: unknown;
  readonly cancelRequested: boolean;
  readonly effectStartedAt: number | null;
  readonly checkpoint: Checkpoint | null;
  readonly result: JobResult | null;
  /** At most one live lease per (tenant, kind, concurrencyKey), leased in enqueue order; null for none. */
  readonly concurrencyKey: string | null;
  /** The job's group within its kind (docs/FAIRNESS.md): the lease shares the kind among its groups; null for none. */
  readonly group: string | null;
  /** The parents it was enqueued with that are still stored (retention may have deleted some), in enqueue order. */
  readonly dependsOn: readonly string[];
  /** The jobs that name it in dependsOn, the earliest MAX_LISTED_CHILDREN (core/dependencies.ts) of them. */
  readonly children: readonly string[];
}

export interface EnqueueParams {
  readonly tenant: string;
  readonly owner: string;
  readonly idempotencyKey: string;
  /** SHA-256 of the canonical request body; equal hashes mean the same request. */
  readonly requestHash: string;
  readonly kind: string;
  readonly payload: unknown;
  readonly maxAttempts: number;
  readonly priority: number;
  /** null: available now, by the store's clock. */
  readonly runAfter: number | null;
  /** Overall deadline measured from acceptance; null for none. */
  readonly deadlineMs: number | null;
  /** Bytes counted against the tenant's storage budget. */
  readonly payloadBytes: number;
  /** canonicalJson(payload), when the caller has computed it already (the coordinator does, for the size and the hash). */
  readonly payloadJson?: string;
  /**
   * Parent job ids (distinct, at most MAX_DEPENDS_ON): the job waits until all have succeeded, and ends dead with
   * dependency_failed when one ends dead or cancelled. A parent the scope below cannot see makes the store throw
   * LeaseholdError('invalid_request') and enqueue nothing (for a batch: nothing of the batch).
   */
  readonly dependsOn?: readonly string[];
  /** Producers see only their own jobs: their parents must be their own too. Absent: any job of the tenant. */
  readonly dependsOnOwner?: string;
  /** One live lease at a time per (tenant, kind, concurrencyKey), in enqueue order (core/dependencies.ts). */
  readonly concurrencyKey?: string | null;
  /** Its group within the kind (1 to GROUP_MAX_LENGTH characters, core/fair-share.ts); absent or null: the ungrouped group. */
  readonly group?: string | null;
  /**
   * Folds the request into the job of (tenant, owner, kind) that holds this key while that job takes duplicates
   * (core/dedupe.ts decideDedupe): outcome `deduplicated`. Otherwise the new job holds the key.
   */
  readonly dedupe?: DedupeRequest;
  /** Refuses the request while the job of (tenant, owner, kind) that holds this key keeps it (decideUnique): outcome `duplicate`. */
  readonly unique?: UniqueRequest;
}

export type EnqueueOutcome =
  | { readonly kind: 'created'; readonly job: JobRecord }
  | { readonly kind: 'replayed'; readonly job: JobRecord }
  /** The request was folded into `job`, the holder of its dedupe key, as it is after the fold. */
  | { readonly kind: 'deduplicated'; readonly job: JobRecord }
  /** Refused: `job` holds the request's unique key. */
  | { readonly kind: 'duplicate'; readonly job: JobRecord }
  | { readonly kind: 'conflict'; readonly existingJobId: string };

export interface JobListParams {
  readonly scope: JobScope;
  readonly status?: JobStatus;
  readonly kind?: string;
  readonly limit: number;
  /**
   * Opaque, from a previous page's nextCursor for the same scope and filters
   * (list-cursor.ts). Any other cursor makes jobList throw
   * LeaseholdError('invalid_request').
   */
  readonly cursor?: string;
}

/** What a listing says about a result: never its bytes. */
export interface ResultSummary {
  readonly contentType: string;
  readonly bytes: number;
}

/**
 * A job as a listing carries it: without its payload, checkpoint or result
 * bytes, so a page's size is bounded by its length and not by what the jobs
 * hold (the list queries do not read those columns).
 */
export type JobListItem = Omit<JobRecord, 'payload' | 'checkpoint' | 'result' | 'dependsOn' | 'children'> & { readonly result: ResultSummary | null };

export interface JobPage {
  readonly jobs: readonly JobListItem[];
  readonly nextCursor: string | null;
}
