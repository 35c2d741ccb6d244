/**
 * Job states. Every state names who moves a job into it and out of it; the
 * transition functions in transitions.ts are the only place that decides a move.
 */

export const JOB_STATUSES = [
  /** Waiting to be leased. In: enqueue, retryable failure, lease expiry, requeue, reconcile(requeue), release of a waiting job. Out: lease, cancel, deadline. */
  'queued',
  /** Leased to exactly one worker under a fencing epoch and token. In: lease. Out: complete, fail, lease expiry, deadline. */
  'running',
  /** Terminal. The result (if any) is committed in the same transaction. In: complete, reconcile(succeeded). */
  'succeeded',
  /** Terminal until an operator requeues it. In: permanent failure, exhausted attempts, lease expiry on the last attempt, deadline. */
  'dead',
  /** A lease expired after the handler declared an external effect: never retried automatically. Out: reconcile. */
  'unknown',
  /** Terminal. In: cancel of a queued or waiting job, or a running job whose cancel was acknowledged. */
  'cancelled',
  /**
   * Not leasable yet: a parent (dependsOn) has not succeeded, or an earlier job of its concurrency key has not
   * finished (core/dependencies.ts). In: enqueue, requeue, reconcile(requeue). Out: release to queued (its last
   * parent succeeded and its key's turn came, in that transaction), dead with dependency_failed (a parent
   * ended dead or cancelled), cancel.
   */
  'waiting',
] as const;

export type JobStatus = (typeof JOB_STATUSES)[number];

export function isJobStatus(value: unknown): value is JobStatus {
  return typeof value === 'string' && (JOB_STATUSES as readonly string[]).includes(value);
}

/**
 * The finished states whose jobs retention and POST /jobs/purge delete (store/retention.ts). `unknown` is not
 * among them: such a job waits for an operator's reconcile however old it is.
 */
export const PURGEABLE_STATUSES = ['succeeded', 'cancelled', 'dead'] as const satisfies readonly JobStatus[];
export type PurgeableStatus = (typeof PURGEABLE_STATUSES)[number];

export function isPurgeableStatus(value: unknown): value is PurgeableStatus {
  return typeof value === 'string' && (PURGEABLE_STATUSES as readonly string[]).includes(value);
}

export const ROLES = ['producer', 'worker', 'admin'] as const;
export type Role = (typeof ROLES)[number];

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value);
}
