/**
 * Rows as pg returns them (see JOB_COLUMNS in sql-fragments.ts) and their
 * conversion into the Store's records. pg parses `json` columns itself and
 * returns float8 as numbers, so the mapping is mostly renaming; it also checks
 * the values the schema constrains, so that a drifted schema fails loudly.
 */

import { apiKeyRecord, attemptRecord, jobListItem, jobSnapshot, kindRecord, leasedJob } from '../row-records.js';
import type { ApiKeyColumns, AttemptColumns, JobListColumns, KindColumns, SnapshotColumns } from '../row-records.js';
import { isJobStatus, isRole, JOB_STATUSES, type JobStatus, type Role } from '../../core/states.js';
import { ATTEMPT_OUTCOMES, type AttemptOutcome, type JobSnapshot } from '../../core/transitions.js';
import type { ApiKeyRecord, AttemptRecord, Checkpoint, JobListItem, JobRecord, JobResult, KindRecord, LeasedJob, TenantStats } from '../store.js';

/** The columns of JOB_COLUMNS; those both backends share are in row-records.ts. */
export interface JobRow extends JobListColumns, SnapshotColumns {
  readonly seq: number;
  readonly payload: unknown;
  readonly idempotency_key: string;
  readonly request_hash: string;
  readonly status: string;
  readonly last_outcome: string | null;
  readonly progress: unknown;
  readonly cancel_requested: boolean;
  readonly checkpoint_step: number | null;
  readonly checkpoint_state: unknown;
  readonly result_content_type?: string | null;
  readonly result_body?: Buffer | null;
  readonly result_checksum?: string | null;
  readonly pending_parents: number;
  readonly has_children: boolean;
  /** Read by JOB_RELATIONS only (single-job reads); absent elsewhere. */
  readonly depends_on?: readonly string[];
  readonly children?: readonly string[];
}

export function toStatus(value: string): JobStatus {
  if (!isJobStatus(value)) throw new Error('jobs.status holds a value outside JOB_STATUSES');
  return value;
}

export function toOutcome(value: string | null): AttemptOutcome | null {
  if (value === null) return null;
  if (!(ATTEMPT_OUTCOMES as readonly string[]).includes(value)) throw new Error('an attempt outcome outside ATTEMPT_OUTCOMES');
  return value as AttemptOutcome;
}

function toRole(value: string): Role {
  if (!isRole(value)) throw new Error('api_keys.role holds a value outside ROLES');
  return value;
}

function toCheckpoint(row: Pick<JobRow, 'checkpoint_step' | 'checkpoint_state'>): Checkpoint | null {
  return row.checkpoint_step === null ? null : { step: row.checkpoint_step, state: row.checkpoint_state };
}

function toResult(row: JobRow): JobResult | null {
  if (row.result_body === undefined || row.result_body === null) return null;
  return { contentType: row.result_content_type ?? 'application/octet-stream', body: row.result_body, checksum: row.result_checksum ?? '' };
}

/** The columns of the list query (LIST_COLUMNS): no payload, checkpoint state or result body. */
export type JobListRow = Omit<JobRow, 'payload' | 'checkpoint_state' | 'result_body' | 'result_checksum' | 'pending_parents' | 'has_children'> & {
  readonly result_bytes: number | null;
};

export function toJobRecord(row: JobRow): JobRecord {
  return {
    ...toJobListItem({ ...row, result_bytes: null }),
    payload: row.payload,
    checkpoint: toCheckpoint(row),
    result: toResult(row),
    dependsOn: row.depends_on ?? [],
    children: row.children ?? [],
  };
}

export function toJobListItem(row: JobListRow): JobListItem {
  const result =
    row.result_content_type === null || row.result_content_type === undefined || row.result_bytes === null
      ? null
      : { contentType: row.result_content_type, bytes: row.result_bytes };
  return jobListItem(row, { status: toStatus(row.status), progress: row.progress ?? null, cancelRequested: row.cancel_requested, result });
}

export function toSnapshot(row: JobRow): JobSnapshot {
  return jobSnapshot(row, { status: toStatus(row.status), cancelRequested: row.cancel_requested, lastOutcome: toOutcome(row.last_outcome) });
}

export function toLeasedJob(row: JobRow): LeasedJob {
  if (row.lease_token === null || row.lease_expires_at === null) throw new Error('a leased row without token or expiry');
  return leasedJob(row, { payload: row.payload, token: row.lease_token, leaseExpiresAt: row.lease_expires_at, checkpoint: toCheckpoint(row) });
}

export interface AttemptRow extends AttemptColumns {
  readonly outcome: string | null;
}

export function toAttemptRecord(row: AttemptRow): AttemptRecord {
  return attemptRecord(row, toOutcome(row.outcome));
}

export interface ApiKeyRow extends ApiKeyColumns {
  readonly role: string;
}

export function toApiKeyRecord(row: ApiKeyRow): ApiKeyRecord {
  return apiKeyRecord(row, toRole(row.role));
}

export interface KindRow extends KindColumns {
  readonly payload_schema: unknown;
}

export function toKindRecord(row: KindRow): KindRecord {
  return kindRecord(row, row.payload_schema ?? null);
}

/** The one row of C.STATS. */
export interface StatsRow {
  readonly counts: Record<string, number>;
  readonly mean_wait: number | null;
  readonly mean_run: number | null;
  readonly mean_completion: number | null;
  readonly mean_attempt_run: number | null;
  readonly oldest_age: number | null;
  readonly storage_bytes: number;
  readonly lease_expirations: number;
}

export function toTenantStats(row: StatsRow): TenantStats {
  const counts = Object.fromEntries(JOB_STATUSES.map((s) => [s, Number(row.counts[s] ?? 0)])) as Record<JobStatus, number>;
  return {
    counts,
    meanWaitMs: row.mean_wait,
    meanRunMs: row.mean_run,
    meanAttemptRunMs: row.mean_attempt_run,
    meanTimeToCompletionMs: row.mean_completion,
    leaseExpirations: row.lease_expirations,
    oldestAvailableAgeMs: row.oldest_age === null ? null : Math.max(0, row.oldest_age),
    storageBytes: row.storage_bytes,
  };
}
