/**
 * Rows as pg returns them (see JOB_COLUMNS in sql-fragments.ts) and their
 * conversion into the Store's records. pg parses `json` columns itself and
 * returns float8 as numbers, so the mapping is mostly renaming; it also checks
 * the values the schema constrains, so that a drifted schema fails loudly.
 */

import { storedJobError } from '../stored-job-error.js';
import { isJobStatus, isRole, type JobStatus, type Role } from '../../core/states.js';
import { ATTEMPT_OUTCOMES, type AttemptOutcome, type JobSnapshot } from '../../core/transitions.js';
import type { ApiKeyRecord, AttemptRecord, Checkpoint, JobListItem, JobRecord, JobResult, KindRecord, LeasedJob } from '../store.js';

export interface JobRow {
  readonly id: string;
  readonly seq: number;
  readonly tenant: string;
  readonly owner: string;
  readonly kind: string;
  readonly payload: unknown;
  readonly idempotency_key: string;
  readonly request_hash: string;
  readonly status: string;
  readonly attempts: number;
  readonly max_attempts: number;
  readonly priority: number;
  readonly run_after: number;
  readonly deadline_at: number | null;
  readonly lease_owner: string | null;
  readonly lease_expires_at: number | null;
  readonly epoch: number;
  readonly lease_token: string | null;
  readonly last_outcome: string | null;
  readonly created_at: number;
  readonly started_at: number | null;
  readonly finished_at: number | null;
  readonly last_error_code: string | null;
  readonly last_error_message: string | null;
  readonly last_error_class: string | null;
  readonly progress: unknown;
  readonly cancel_requested: boolean;
  readonly effect_started_at: number | null;
  readonly checkpoint_step: number | null;
  readonly checkpoint_state: unknown;
  readonly result_content_type?: string | null;
  readonly result_body?: Buffer | null;
  readonly result_checksum?: string | null;
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
export type JobListRow = Omit<JobRow, 'payload' | 'checkpoint_state' | 'result_body' | 'result_checksum'> & { readonly result_bytes: number | null };

export function toJobRecord(row: JobRow): JobRecord {
  return { ...toJobListItem({ ...row, result_bytes: null }), payload: row.payload, checkpoint: toCheckpoint(row), result: toResult(row) };
}

export function toJobListItem(row: JobListRow): JobListItem {
  return {
    id: row.id,
    tenant: row.tenant,
    owner: row.owner,
    kind: row.kind,
    status: toStatus(row.status),
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    priority: row.priority,
    runAfter: row.run_after,
    deadlineAt: row.deadline_at,
    leaseOwner: row.lease_owner,
    leaseExpiresAt: row.lease_expires_at,
    epoch: row.epoch,
    createdAt: row.created_at,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    lastError: storedJobError({
      code: row.last_error_code,
      message: row.last_error_message,
      storedClass: row.last_error_class,
      status: toStatus(row.status),
      attempts: row.attempts,
      maxAttempts: row.max_attempts,
    }),
    progress: row.progress ?? null,
    cancelRequested: row.cancel_requested,
    effectStartedAt: row.effect_started_at,
    result:
      row.result_content_type === null || row.result_content_type === undefined || row.result_bytes === null
        ? null
        : { contentType: row.result_content_type, bytes: row.result_bytes },
  };
}

export function toSnapshot(row: JobRow): JobSnapshot {
  return {
    status: toStatus(row.status),
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    leaseToken: row.lease_token,
    leaseExpiresAt: row.lease_expires_at,
    deadlineAt: row.deadline_at,
    effectStartedAt: row.effect_started_at,
    cancelRequested: row.cancel_requested,
    lastOutcome: toOutcome(row.last_outcome),
  };
}

export function toLeasedJob(row: JobRow): LeasedJob {
  if (row.lease_token === null || row.lease_expires_at === null) throw new Error('a leased row without token or expiry');
  return {
    id: row.id,
    kind: row.kind,
    payload: row.payload,
    attempt: row.attempts,
    maxAttempts: row.max_attempts,
    epoch: row.epoch,
    token: row.lease_token,
    leaseExpiresAt: row.lease_expires_at,
    deadlineAt: row.deadline_at,
    checkpoint: toCheckpoint(row),
  };
}

export interface AttemptRow {
  readonly attempt: number;
  readonly epoch: number;
  readonly worker_id: string;
  readonly started_at: number;
  readonly ended_at: number | null;
  readonly outcome: string | null;
  readonly error_code: string | null;
}

export function toAttemptRecord(row: AttemptRow): AttemptRecord {
  return {
    attempt: row.attempt,
    epoch: row.epoch,
    workerId: row.worker_id,
    startedAt: row.started_at,
    endedAt: row.ended_at,
    outcome: toOutcome(row.outcome),
    errorCode: row.error_code,
  };
}

export interface ApiKeyRow {
  readonly id: string;
  readonly tenant: string;
  readonly user_name: string;
  readonly role: string;
  readonly key_hash: string;
  readonly created_at: number;
  readonly revoked_at: number | null;
}

export function toApiKeyRecord(row: ApiKeyRow): ApiKeyRecord {
  return {
    id: row.id,
    tenant: row.tenant,
    user: row.user_name,
    role: toRole(row.role),
    keyHash: row.key_hash,
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
  };
}

export interface KindRow {
  readonly tenant: string;
  readonly kind: string;
  readonly payload_schema: unknown;
  readonly max_payload_bytes: number;
  readonly max_attempts: number;
  readonly lease_ms: number;
  readonly backoff_base_ms: number;
  readonly backoff_max_ms: number;
  readonly deadline_ms: number | null;
  readonly max_result_bytes: number;
  readonly max_checkpoint_bytes: number;
  readonly retention_succeeded_ms: number | null;
  readonly retention_cancelled_ms: number | null;
  readonly retention_dead_ms: number | null;
  readonly updated_at: number;
}

export function toKindRecord(row: KindRow): KindRecord {
  return {
    tenant: row.tenant,
    kind: row.kind,
    payloadSchema: row.payload_schema ?? null,
    maxPayloadBytes: row.max_payload_bytes,
    maxAttempts: row.max_attempts,
    leaseMs: row.lease_ms,
    backoff: { baseMs: row.backoff_base_ms, maxMs: row.backoff_max_ms },
    deadlineMs: row.deadline_ms,
    maxResultBytes: row.max_result_bytes,
    maxCheckpointBytes: row.max_checkpoint_bytes,
    retention: { succeededMs: row.retention_succeeded_ms, cancelledMs: row.retention_cancelled_ms, deadMs: row.retention_dead_ms },
    updatedAt: row.updated_at,
  };
}
