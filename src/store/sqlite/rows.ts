/**
 * Row shapes of the SQLite backend and their mapping to the store's records.
 * SQLite keeps times as integer milliseconds and JSON as canonical text.
 */

import { apiKeyRecord, attemptRecord, jobListItem, jobSnapshot, kindRecord, leasedJob } from '../row-records.js';
import type { ApiKeyColumns, AttemptColumns, KindColumns } from '../row-records.js';
import { JOB_STATUSES, type JobStatus, type Role } from '../../core/states.js';
import type { AttemptOutcome, JobSnapshot } from '../../core/transitions.js';
import type { ApiKeyRecord, AttemptRecord, JobListItem, JobRecord, KindRecord, LeasedJob, TenantStats } from '../store.js';
import type { CountedJob } from './counter-moves.js';
import type { StatsRows } from './stats-reader.js';

export interface JobRow {
  seq: number;
  id: string;
  tenant: string;
  owner: string;
  kind: string;
  payload: string;
  status: JobStatus;
  attempts: number;
  max_attempts: number;
  priority: number;
  run_after: number;
  deadline_at: number | null;
  deadline_ms: number | null;
  lease_owner: string | null;
  lease_expires_at: number | null;
  epoch: number;
  lease_token: string | null;
  last_outcome: AttemptOutcome | null;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  last_error_code: string | null;
  last_error_message: string | null;
  last_error_class: string | null;
  progress: string | null;
  cancel_requested: number;
  effect_started_at: number | null;
  checkpoint_step: number | null;
  checkpoint_state: string | null;
  request_hash: string;
  concurrency_key: string | null;
  /** The job's group, '' without one (migration 16). */
  group_key: string;
  pending_parents: number;
  has_children: number;
  /** JSON arrays of ids (queries.ts JOB_COLUMNS). */
  depends_on: string;
  children: string;
}

/** The columns of SQL.jobLock and SQL.jobsExpiredLeases (a running job's from its lease row, queries.ts LIVE_COLUMNS). */
export type SnapshotRow = Pick<
  JobRow,
  | 'seq'
  | 'tenant'
  | 'kind'
  | 'status'
  | 'attempts'
  | 'max_attempts'
  | 'priority'
  | 'run_after'
  | 'deadline_at'
  | 'lease_expires_at'
  | 'epoch'
  | 'lease_token'
  | 'lease_owner'
  | 'last_outcome'
  | 'cancel_requested'
  | 'effect_started_at'
  | 'concurrency_key'
  | 'group_key'
  | 'has_children'
  | 'created_at'
  | 'started_at'
  | 'finished_at'
> & {
  /** A running job's attempt start (its lease row's); null when it is not running (absent from JobRow's reads). */
  attempt_started_at?: number | null;
  /** A running job's lease group (job_leases.group_key): the group its end frees a slot of; null for a lease of the plain path. */
  lease_group?: string | null;
};

export interface JobWithResultRow extends JobRow {
  result_content_type: string | null;
  result_body: Buffer | null;
  result_checksum: string | null;
}

/** The columns of the list statements: no payload, checkpoint state or result body. */
export type JobListRow = Omit<JobRow, 'payload' | 'checkpoint_state' | 'pending_parents' | 'has_children' | 'depends_on' | 'children'> & {
  result_content_type: string | null;
  result_bytes: number | null;
};

/** A lease row as the lease statement returns it (queries.ts leaseInsert). */
export interface LeaseRow {
  seq: number;
  kind: string;
  priority: number;
  run_after: number;
  deadline_at: number | null;
  epoch: number;
  attempt: number;
  token: string;
  expires_at: number;
  /** The group the lease counts against (group-lease.ts); absent or null for the plain lease, whose ready rows have group_key ''. */
  group_key?: string | null;
}

/** A leased job's row (SQL.jobLeasedMany). */
export interface LeasedJobRow {
  seq: number;
  id: string;
  group_key: string;
  payload: string;
  max_attempts: number;
  checkpoint_step: number | null;
  checkpoint_state: string | null;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
}

export interface ApiKeyRow extends ApiKeyColumns {
  readonly role: Role;
}

export interface KindRow extends KindColumns {
  readonly payload_schema: string | null;
}

export interface AttemptRow extends AttemptColumns {
  readonly outcome: AttemptOutcome | null;
}

function parseJsonOrNull(text: string | null): unknown {
  return text === null ? null : (JSON.parse(text) as unknown);
}

export function toSnapshot(row: SnapshotRow): JobSnapshot {
  return jobSnapshot(row, { status: row.status, cancelRequested: row.cancel_requested === 1, lastOutcome: row.last_outcome });
}

export function toJobRecord(row: JobWithResultRow): JobRecord {
  return {
    ...toJobListItem({ ...row, result_bytes: null }),
    payload: JSON.parse(row.payload) as unknown,
    checkpoint: row.checkpoint_step === null ? null : { step: row.checkpoint_step, state: parseJsonOrNull(row.checkpoint_state) },
    result:
      row.result_checksum === null || row.result_body === null || row.result_content_type === null
        ? null
        : { contentType: row.result_content_type, body: row.result_body, checksum: row.result_checksum },
    dependsOn: JSON.parse(row.depends_on) as string[],
    children: JSON.parse(row.children) as string[],
  };
}

export function toJobListItem(row: JobListRow): JobListItem {
  const result = row.result_content_type === null || row.result_bytes === null ? null : { contentType: row.result_content_type, bytes: row.result_bytes };
  return jobListItem(row, { status: row.status, progress: parseJsonOrNull(row.progress), cancelRequested: row.cancel_requested === 1, result });
}

export function toApiKeyRecord(row: ApiKeyRow): ApiKeyRecord {
  return apiKeyRecord(row, row.role);
}

export function toKindRecord(row: KindRow): KindRecord {
  return kindRecord(row, parseJsonOrNull(row.payload_schema));
}

export function toAttemptRecord(row: AttemptRow): AttemptRecord {
  return attemptRecord(row, row.outcome);
}

export function toLeasedJob(lease: LeaseRow, job: LeasedJobRow): LeasedJob {
  const checkpoint = job.checkpoint_step === null ? null : { step: job.checkpoint_step, state: parseJsonOrNull(job.checkpoint_state) };
  return leasedJob(
    { ...lease, id: job.id, group_key: job.group_key, attempts: lease.attempt, max_attempts: job.max_attempts },
    { payload: JSON.parse(job.payload) as unknown, token: lease.token, leaseExpiresAt: lease.expires_at, checkpoint },
  );
}

/** A job's row as the counter moves see it (counter-moves.ts), with the status it has (or, in `status`, reaches). */
export function countedJob(
  row: { readonly tenant: string; readonly kind: string; readonly created_at: number; readonly started_at: number | null; readonly finished_at: number | null },
  status: JobStatus,
): CountedJob {
  return { tenant: row.tenant, kind: row.kind, status, createdAt: row.created_at, startedAt: row.started_at, finishedAt: row.finished_at };
}

export function toTenantStats(rows: StatsRows, now: number): TenantStats {
  const counts = Object.fromEntries(JOB_STATUSES.map((s) => [s, 0])) as Record<JobStatus, number>;
  for (const row of rows.counts) counts[row.status as JobStatus] = row.n;
  const oldest = rows.oldest?.oldest ?? null;
  return {
    counts,
    meanWaitMs: rows.times?.mean_wait ?? null,
    meanRunMs: rows.times?.mean_run ?? null,
    meanAttemptRunMs: rows.attemptTimes?.mean_attempt_run ?? null,
    meanTimeToCompletionMs: rows.times?.mean_completion ?? null,
    leaseExpirations: rows.counters?.lease_expirations ?? 0,
    oldestAvailableAgeMs: oldest === null ? null : Math.max(0, now - oldest),
    storageBytes: rows.counters?.storage_bytes ?? 0,
  };
}
