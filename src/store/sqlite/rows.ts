/**
 * Row shapes of the SQLite backend and their mapping to the store's records.
 * SQLite keeps times as integer milliseconds and JSON as canonical text.
 */

import { storedJobError } from '../stored-job-error.js';
import type { JobStatus, Role } from '../../core/states.js';
import type { AttemptOutcome, JobSnapshot } from '../../core/transitions.js';
import type { ApiKeyRecord, AttemptRecord, JobListItem, JobRecord, KindRecord } from '../store.js';

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
}

/** The columns of SQL.jobSnapshot and SQL.jobsExpiredLeases. */
export type SnapshotRow = Pick<
  JobRow,
  | 'seq'
  | 'tenant'
  | 'kind'
  | 'status'
  | 'attempts'
  | 'max_attempts'
  | 'run_after'
  | 'deadline_at'
  | 'lease_expires_at'
  | 'epoch'
  | 'lease_token'
  | 'last_outcome'
  | 'cancel_requested'
  | 'effect_started_at'
>;

export interface JobWithResultRow extends JobRow {
  result_content_type: string | null;
  result_body: Buffer | null;
  result_checksum: string | null;
}

/** The columns of the list statements: no payload, checkpoint state or result body. */
export type JobListRow = Omit<JobRow, 'payload' | 'checkpoint_state'> & { result_content_type: string | null; result_bytes: number | null };

export interface LeasedRow {
  seq: number;
  id: string;
  kind: string;
  payload: string;
  attempts: number;
  max_attempts: number;
  epoch: number;
  lease_token: string;
  lease_expires_at: number;
  deadline_at: number | null;
  checkpoint_step: number | null;
  checkpoint_state: string | null;
  priority: number;
  run_after: number;
}

export interface ApiKeyRow {
  id: string;
  tenant: string;
  user_name: string;
  role: Role;
  key_hash: string;
  created_at: number;
  revoked_at: number | null;
}

export interface KindRow {
  tenant: string;
  kind: string;
  payload_schema: string | null;
  max_payload_bytes: number;
  max_attempts: number;
  lease_ms: number;
  backoff_base_ms: number;
  backoff_max_ms: number;
  deadline_ms: number | null;
  max_result_bytes: number;
  max_checkpoint_bytes: number;
  retention_succeeded_ms: number | null;
  retention_cancelled_ms: number | null;
  retention_dead_ms: number | null;
  updated_at: number;
}

export interface AttemptRow {
  attempt: number;
  epoch: number;
  worker_id: string;
  started_at: number;
  ended_at: number | null;
  outcome: AttemptOutcome | null;
  error_code: string | null;
}

function parseJsonOrNull(text: string | null): unknown {
  return text === null ? null : (JSON.parse(text) as unknown);
}

export function toSnapshot(row: SnapshotRow): JobSnapshot {
  return {
    status: row.status,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    leaseToken: row.lease_token,
    leaseExpiresAt: row.lease_expires_at,
    deadlineAt: row.deadline_at,
    effectStartedAt: row.effect_started_at,
    cancelRequested: row.cancel_requested === 1,
    lastOutcome: row.last_outcome,
  };
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
  };
}

export function toJobListItem(row: JobListRow): JobListItem {
  return {
    id: row.id,
    tenant: row.tenant,
    owner: row.owner,
    kind: row.kind,
    status: row.status,
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
      status: row.status,
      attempts: row.attempts,
      maxAttempts: row.max_attempts,
    }),
    progress: parseJsonOrNull(row.progress),
    cancelRequested: row.cancel_requested === 1,
    effectStartedAt: row.effect_started_at,
    result: row.result_content_type === null || row.result_bytes === null ? null : { contentType: row.result_content_type, bytes: row.result_bytes },
  };
}

export function toApiKeyRecord(row: ApiKeyRow): ApiKeyRecord {
  return {
    id: row.id,
    tenant: row.tenant,
    user: row.user_name,
    role: row.role,
    keyHash: row.key_hash,
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
  };
}

export function toKindRecord(row: KindRow): KindRecord {
  return {
    tenant: row.tenant,
    kind: row.kind,
    payloadSchema: parseJsonOrNull(row.payload_schema),
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

export function toAttemptRecord(row: AttemptRow): AttemptRecord {
  return {
    attempt: row.attempt,
    epoch: row.epoch,
    workerId: row.worker_id,
    startedAt: row.started_at,
    endedAt: row.ended_at,
    outcome: row.outcome,
    errorCode: row.error_code,
  };
}
