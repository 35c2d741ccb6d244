/**
 * The storage seam. Every backend (src/store/sqlite, src/store/postgres)
 * implements this interface and passes the conformance suite in
 * test/conformance. Methods are noun-first and take one params object.
 *
 * Expected outcomes (a stale token, an idempotency conflict, a missing job)
 * are returned as values, not thrown; the coordinator maps them to HTTP.
 * A backend throws StoreUnavailableError (core/errors) when it cannot reach or
 * write its database; every other driver error is a bug.
 *
 * Every method that changes state does so in one transaction, and resolves
 * only after that transaction is durable. All times are integer milliseconds
 * since the Unix epoch, by the store's own clock (the server's for PostgreSQL).
 */

import type { BackoffPolicy } from '../core/backoff.js';
import type { FailureClass } from '../core/failure-classes.js';
import type { JobStatus } from '../core/states.js';
import type { AttemptOutcome } from '../core/transitions.js';
import type { GroupStats } from './group-lease.js';
import type { NextDue, NextDueParams } from './next-due.js';
import type { JobPurgeCountParams, JobPurgeOutcome, JobPurgeParams } from './retention.js';
import type {
  ApiKeyInsertParams,
  ApiKeyRecord,
  KindPauseParams,
  KindRecord,
  KindUpsertParams,
  ScheduleDueParams,
  ScheduleListParams,
  ScheduleRecord,
  ScheduleUpsertOutcome,
  ScheduleUpsertParams,
} from './catalog-records.js';

export type StoreBackend = 'sqlite' | 'postgres';

export type {
  JobScope,
  JobError,
  StoredJobError,
  Checkpoint,
  JobResult,
  JobRecord,
  EnqueueParams,
  EnqueueOutcome,
  JobListParams,
  ResultSummary,
  JobListItem,
  JobPage,
} from './job-records.js';
import type { Checkpoint, EnqueueOutcome, EnqueueParams, JobError, JobListParams, JobPage, JobRecord, JobScope } from './job-records.js';

export interface LeaseParams {
  readonly tenant: string;
  readonly workerId: string;
  /** Only these kinds; all kinds when absent or empty. */
  readonly kinds?: readonly string[];
  readonly leaseMs: number;
  readonly max: number;
}

export interface LeasedJob {
  readonly id: string;
  readonly kind: string;
  readonly payload: unknown;
  /** 1-based number of this attempt (= attempts after the lease). */
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly epoch: number;
  readonly token: string;
  readonly leaseExpiresAt: number;
  readonly deadlineAt: number | null;
  readonly checkpoint: Checkpoint | null;
  /** The group it was enqueued with (docs/FAIRNESS.md), null without one. */
  readonly group: string | null;
  /** When the job became available for this attempt (its run-after time: acceptance, a delay or a retry's backoff). */
  readonly availableAt: number;
}

export interface RenewParams {
  readonly tenant: string;
  readonly id: string;
  readonly token: string;
  readonly leaseMs: number;
  /** Replaces the stored progress when present. */
  readonly progress?: unknown;
}

export type RenewOutcome =
  | { readonly kind: 'renewed'; readonly leaseExpiresAt: number }
  | { readonly kind: 'rejected'; readonly code: 'stale_lease' | 'cancelled' | 'deadline_exceeded' | 'not_found' };

export interface CompleteParams {
  readonly tenant: string;
  readonly id: string;
  readonly token: string;
  readonly result?: { readonly contentType: string; readonly body: Buffer };
  /** The kind's limit; a larger result makes the job dead with result_too_large. */
  readonly maxResultBytes?: number;
}

export type CompleteOutcome =
  | { readonly kind: 'completed'; readonly replayed: boolean }
  | { readonly kind: 'result_too_large' }
  | { readonly kind: 'rejected'; readonly code: 'stale_lease' | 'deadline_exceeded' | 'cancelled' | 'not_found' };

export interface FailParams {
  readonly tenant: string;
  readonly id: string;
  readonly token: string;
  readonly error: JobError;
  readonly retryable: boolean;
  readonly backoff: BackoffPolicy;
}

export type FailOutcome =
  | {
      readonly kind: 'failed';
      readonly status: 'queued' | 'dead' | 'cancelled' | 'unknown';
      readonly runAfter: number | null;
      readonly replayed: boolean;
      /** The failure class this fail stored (lease-endings.ts); null for a replay, which stored nothing. */
      readonly failureClass: FailureClass | null;
    }
  | { readonly kind: 'rejected'; readonly code: 'stale_lease' | 'not_found' };

export interface TokenParams {
  readonly tenant: string;
  readonly id: string;
  readonly token: string;
}

export interface CheckpointParams extends TokenParams {
  readonly checkpoint: Checkpoint;
}

export type TokenOutcome =
  | { readonly kind: 'ok' }
  | { readonly kind: 'rejected'; readonly code: 'stale_lease' | 'cancelled' | 'deadline_exceeded' | 'not_found' };

export interface JobRef {
  readonly scope: JobScope;
  readonly id: string;
}

export interface RequeueParams extends JobRef {
  /** A fresh attempt budget; the job's current maxAttempts when absent. */
  readonly maxAttempts?: number;
}

export type RequeueOutcome = { readonly kind: 'requeued'; readonly job: JobRecord } | { readonly kind: 'rejected'; readonly code: 'not_dead' | 'not_found' };

export type ReconcileOutcomeName = 'succeeded' | 'dead' | 'requeue';

export interface ReconcileParams extends JobRef {
  readonly outcome: ReconcileOutcomeName;
}

export type ReconcileOutcome =
  | { readonly kind: 'reconciled'; readonly job: JobRecord }
  | { readonly kind: 'rejected'; readonly code: 'not_unknown' | 'not_found' };

export type CancelOutcome =
  | { readonly kind: 'cancelled'; readonly job: JobRecord }
  | { readonly kind: 'cancel_requested'; readonly job: JobRecord }
  | { readonly kind: 'rejected'; readonly code: 'invalid_state' | 'not_found' };

export interface AttemptRecord {
  readonly attempt: number;
  readonly epoch: number;
  readonly workerId: string;
  readonly startedAt: number;
  readonly endedAt: number | null;
  readonly outcome: AttemptOutcome | null;
  readonly errorCode: string | null;
}

export interface ReapOutcome {
  readonly requeued: number;
  readonly dead: number;
  readonly unknown: number;
  readonly cancelled: number;
  /** Queued jobs whose deadline passed. */
  readonly deadlineExpired: number;
}

export interface TenantStats {
  readonly counts: Readonly<Record<JobStatus, number>>;
  /** Mean of (startedAt - createdAt) over jobs that started; null when none. */
  readonly meanWaitMs: number | null;
  /** Mean of (finishedAt - startedAt) over succeeded jobs: first start to final finish, retries included; null when none. */
  readonly meanRunMs: number | null;
  /** Mean of (endedAt - startedAt) over ended attempts (lease to the end of that attempt); null when none. */
  readonly meanAttemptRunMs: number | null;
  /** Mean of (finishedAt - createdAt) over succeeded jobs (acceptance to success); null when none. */
  readonly meanTimeToCompletionMs: number | null;
  readonly leaseExpirations: number;
  /** Age of the oldest queued job whose runAfter has passed; null when none. */
  readonly oldestAvailableAgeMs: number | null;
  /** Payload, result, checkpoint state and progress bytes of jobs not yet deleted. */
  readonly storageBytes: number;
}

export * from './catalog-records.js';

/** A scheduler pass's enqueues of a schedule's due occurrences, with the row's next time (catalog-records.ts has the schedule). */
export interface ScheduleFireParams {
  readonly tenant: string;
  readonly name: string;
  /** The row's nextAt as the pass read it; another value means another pass handled it. */
  readonly expectedNextAt: number;
  readonly nextAt: number | null;
  /** The jobs of the occurrences this pass enqueues, oldest first; may be empty (skipped). */
  readonly jobs: readonly EnqueueParams[];
  /** The occurrence of the last of `jobs`; lastAt and lastJobId stay as they are when `jobs` is empty. */
  readonly lastAt: number | null;
}

/** The lease a parked poll takes a job with when an enqueue hands it one (jobEnqueueLeased). */
export interface HandoffLease {
  readonly workerId: string;
  readonly leaseMs: number;
}

export interface EnqueueLeasedOutcome {
  readonly outcome: EnqueueOutcome;
  readonly leased: LeasedJob | null;
}

export type ScheduleFireOutcome = { readonly kind: 'fired'; readonly outcomes: readonly EnqueueOutcome[] } | { readonly kind: 'stale' };

export { distinctAvailability, type Availability, type AvailabilityListener } from './availability.js';
import type { AvailabilityListener } from './availability.js';

/** What jobCompleteManyThenLease answers: the completions' outcomes in order, and the jobs leased after them. */
export interface CompleteThenLease {
  readonly outcomes: readonly CompleteOutcome[];
  readonly jobs: readonly LeasedJob[];
}

/** What jobLeaseWithNextDue answers. */
export interface LeaseWithNextDue {
  readonly jobs: readonly LeasedJob[];
  /** When fewer than `max` were leased: jobNextDue's answer after the lease. Absent when it leased `max`. */
  readonly nextDue?: NextDue | null;
}

export interface Store {
  readonly backend: StoreBackend;

  /** The store's clock: lease decisions and timestamps use this and nothing else. */
  now(): Promise<number>;
  /** Resolves when the database answers a trivial query. */
  ping(): Promise<void>;
  /** How long the oldest write still queued inside the store (not yet sent or begun) has waited, in ms; 0 with none. */
  queueWaitMs(): number;
  close(): Promise<void>;

  apiKeyInsert(params: ApiKeyInsertParams): Promise<ApiKeyRecord>;
  apiKeyFindByHash(keyHash: string): Promise<ApiKeyRecord | null>;
  apiKeyRevoke(params: { readonly id: string }): Promise<boolean>;
  /** The tenant's keys, oldest first (hashes included: callers show ids, users, roles and dates only). */
  apiKeyList(params: { readonly tenant: string }): Promise<readonly ApiKeyRecord[]>;

  kindUpsert(params: KindUpsertParams): Promise<KindRecord>;
  kindGet(params: { readonly tenant: string; readonly kind: string }): Promise<KindRecord | null>;
  kindList(params: { readonly tenant: string }): Promise<readonly KindRecord[]>;
  /**
   * Pauses or resumes a registered kind; null when the tenant has no such kind. A resume (and a kindUpsert,
   * which may lift a limit) announces the kind as available, so parked long polls lease at once.
   */
  kindSetPaused(params: KindPauseParams): Promise<KindRecord | null>;

  /** Recurring schedules (schedules.ts). */
  scheduleUpsert(params: ScheduleUpsertParams): Promise<ScheduleUpsertOutcome>;
  scheduleGet(params: { readonly tenant: string; readonly name: string }): Promise<ScheduleRecord | null>;
  /** By name; at most `limit`. */
  scheduleList(params: ScheduleListParams): Promise<readonly ScheduleRecord[]>;
  scheduleDelete(params: { readonly tenant: string; readonly name: string }): Promise<boolean>;
  /** Schedules of every tenant that are due, earliest first, at most `perTenant` of one tenant. */
  scheduleDue(params: ScheduleDueParams): Promise<readonly ScheduleRecord[]>;
  /** The earliest nextAt of every tenant's schedules; null when none. */
  scheduleEarliest(): Promise<number | null>;
  /** Enqueues a pass's jobs and moves the schedule on, in one transaction guarded by expectedNextAt. */
  scheduleFire(params: ScheduleFireParams): Promise<ScheduleFireOutcome>;

  jobEnqueue(params: EnqueueParams): Promise<EnqueueOutcome>;
  /**
   * jobEnqueue, and for a job that may be handed to a parked poll (mayHandOff in enqueue-paths.ts: no delay, group,
   * parents or keys) whose kind is neither paused, limited nor grouped, its lease to `lease` in the same
   * transaction, so the poll needs no lease of its own (docs/design/lease-protocol.md, handing a job to a
   * parked poll). `leased` is null when nothing was leased (the job was queued, or not created); a job left
   * queued is announced as jobEnqueue's are. Optional: a store without it is only ever asked to jobEnqueue.
   */
  jobEnqueueLeased?(params: EnqueueParams, lease: HandoffLease): Promise<EnqueueLeasedOutcome>;
  /** All in one transaction; outcomes in the order of params. */
  jobEnqueueMany(params: readonly EnqueueParams[]): Promise<readonly EnqueueOutcome[]>;
  jobGet(params: JobRef): Promise<JobRecord | null>;
  jobList(params: JobListParams): Promise<JobPage>;
  /**
   * Leases up to `max` available jobs in one transaction, first applying any due lease expiries. Jobs of a
   * paused kind are never leased, and a kind with maxConcurrent or rate gets no more than its limits allow
   * (src/store/flow-limits.ts), decided inside that transaction.
   */
  jobLease(params: LeaseParams): Promise<readonly LeasedJob[]>;
  /**
   * jobLease, and when it took fewer than `max`, what jobNextDue answers for the same tenant and kinds right
   * after it: so a long poll that found nothing parks on one store call (PostgreSQL answers both in one statement).
   */
  jobLeaseWithNextDue(params: LeaseParams): Promise<LeaseWithNextDue>;
  jobRenew(params: RenewParams): Promise<RenewOutcome>;
  jobComplete(params: CompleteParams): Promise<CompleteOutcome>;
  /** All in one transaction; outcomes in the order of params. */
  jobCompleteMany(params: readonly CompleteParams[]): Promise<readonly CompleteOutcome[]>;
  /**
   * jobCompleteMany, then jobLease for `lease` after the completions, so a slot they free counts (a worker's
   * completions carrying its next lease). SQLite: one write transaction, one commit. PostgreSQL: the two
   * statements one after the other, each its own commit (one transaction would cost two more round trips to
   * save one WAL flush).
   */
  jobCompleteManyThenLease(completions: readonly CompleteParams[], lease: LeaseParams): Promise<CompleteThenLease>;
  jobFail(params: FailParams): Promise<FailOutcome>;
  jobCheckpoint(params: CheckpointParams): Promise<TokenOutcome>;
  jobMarkEffectStarted(params: TokenParams): Promise<TokenOutcome>;
  jobRequeue(params: RequeueParams): Promise<RequeueOutcome>;
  jobCancel(params: JobRef): Promise<CancelOutcome>;
  jobReconcile(params: ReconcileParams): Promise<ReconcileOutcome>;
  jobAttempts(params: JobRef): Promise<readonly AttemptRecord[] | null>;
  /** Applies due lease expiries and deadlines across all tenants. */
  jobReapExpired(): Promise<ReapOutcome>;
  /**
   * When the tenant's next delayed job or retry of these kinds is due, or a rate-limited kind's window admits
   * its jobs again; `slotHeld` when jobs wait for a maxConcurrent slot (a job of the tenant finishing may free
   * one). Paused kinds' jobs are not counted. null when nothing is queued that a lease could take.
   */
  jobNextDue(params: NextDueParams): Promise<NextDue | null>;
  /** Deletes up to `limit` finished jobs past their retention, with attempts and results, in one transaction. */
  jobPurge(params: JobPurgeParams): Promise<JobPurgeOutcome>;
  /** How many jobs jobPurge would delete without a limit (a dry run). */
  jobPurgeCount(params: JobPurgeCountParams): Promise<number>;
  /**
   * Makes the space of deleted and rewritten rows reusable where the database
   * does not do it by itself; called after each retention run. PostgreSQL:
   * VACUUM of the queue's tables when the server's autovacuum is off. SQLite:
   * nothing (each purge batch returns its free pages, src/store/sqlite/retention.ts).
   * True when it did something.
   */
  reclaimSpace(): Promise<boolean>;
  stats(params: { readonly tenant: string }): Promise<TenantStats>;
  /** The tenant's groups with the most jobs waiting or running, at most `limit`, and the rest summed (GET /metrics). */
  groupStats(params: { readonly tenant: string; readonly limit: number }): Promise<GroupStats>;
  /** Bytes the store holds by the database's own bookkeeping, no scan (SQLite: the file's pages; PostgreSQL: its schema's tables, indexes and TOAST). */
  databaseSize(): Promise<number>;

  /**
   * Calls `listener` when jobs may have become available: an enqueue, retry,
   * requeue, reconcile or lease expiry (possibly by another process) that has
   * committed or, in the same process on SQLite, an enqueue queued for the
   * next group commit. In the latter case a write the listener asks for at
   * once is ordered after it, so a lease sees the job. The listener hears the
   * (tenant, kind) of the available job, once per distinct pair of a write, or
   * `null` when the store cannot say (a commit by another SQLite process, a
   * LISTEN that just took effect): then every waiter should look. Listeners
   * must not read the store to decide; they lease. Returns an unsubscribe.
   */
  watchAvailable(listener: AvailabilityListener): () => void;

  /**
   * Calls `listener` after a job has reached a terminal state (succeeded,
   * dead, cancelled, unknown) and that change has committed: with the job's
   * tenant and id when this store knows it, or with null when jobs may have
   * finished without it knowing which (the reaper's batches, another process's
   * commit): then look again at every job you wait for. Other coordinators'
   * completions arrive too (PostgreSQL NOTIFY, SQLite's data_version); returns an unsubscribe.
   */
  watchFinished(listener: FinishedListener): () => void;
}

export interface FinishedJob {
  readonly tenant: string;
  readonly id: string;
}
export type FinishedListener = (job: FinishedJob | null) => void;
