/**
 * Rows into the store's records, for the columns both backends name and type
 * alike. Each backend's rows.ts decodes what differs first (JSON kept as text
 * in SQLite and parsed by pg, booleans as 0/1 in SQLite, values PostgreSQL's
 * rows are checked for) and passes it in as `decoded`.
 */

import type { Role, JobStatus } from '../core/states.js';
import type { AttemptOutcome, JobSnapshot } from '../core/transitions.js';
import type { KindFlowState } from './flow-limits.js';
import { decodeGroupRules } from './group-lease.js';
import { storedJobError } from './stored-job-error.js';
import type { ApiKeyRecord, AttemptRecord, JobListItem, KindRecord, LeasedJob, ResultSummary } from './store.js';

export interface JobListColumns {
  readonly id: string;
  readonly tenant: string;
  readonly owner: string;
  readonly kind: string;
  readonly attempts: number;
  readonly max_attempts: number;
  readonly priority: number;
  readonly run_after: number;
  readonly deadline_at: number | null;
  readonly lease_owner: string | null;
  readonly lease_expires_at: number | null;
  readonly epoch: number;
  readonly created_at: number;
  readonly started_at: number | null;
  readonly finished_at: number | null;
  readonly last_error_code: string | null;
  readonly last_error_message: string | null;
  readonly last_error_class: string | null;
  readonly effect_started_at: number | null;
  readonly concurrency_key: string | null;
  /** '' for a job without a group (migration 16). */
  readonly group_key: string;
}

export function jobListItem(
  row: JobListColumns,
  decoded: { readonly status: JobStatus; readonly progress: unknown; readonly cancelRequested: boolean; readonly result: ResultSummary | null },
): JobListItem {
  return {
    id: row.id,
    tenant: row.tenant,
    owner: row.owner,
    kind: row.kind,
    status: decoded.status,
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
      status: decoded.status,
      attempts: row.attempts,
      maxAttempts: row.max_attempts,
    }),
    progress: decoded.progress,
    cancelRequested: decoded.cancelRequested,
    effectStartedAt: row.effect_started_at,
    result: decoded.result,
    concurrencyKey: row.concurrency_key,
    group: row.group_key === '' ? null : row.group_key,
  };
}

export interface SnapshotColumns {
  readonly attempts: number;
  readonly max_attempts: number;
  readonly lease_token: string | null;
  readonly lease_expires_at: number | null;
  readonly deadline_at: number | null;
  readonly effect_started_at: number | null;
}

export function jobSnapshot(
  row: SnapshotColumns,
  decoded: { readonly status: JobStatus; readonly cancelRequested: boolean; readonly lastOutcome: AttemptOutcome | null },
): JobSnapshot {
  return {
    status: decoded.status,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    leaseToken: row.lease_token,
    leaseExpiresAt: row.lease_expires_at,
    deadlineAt: row.deadline_at,
    effectStartedAt: row.effect_started_at,
    cancelRequested: decoded.cancelRequested,
    lastOutcome: decoded.lastOutcome,
  };
}

export interface LeasedColumns {
  readonly id: string;
  readonly kind: string;
  readonly attempts: number;
  readonly max_attempts: number;
  readonly epoch: number;
  readonly deadline_at: number | null;
  readonly run_after: number;
  /** '' for a job without a group (migration 16). */
  readonly group_key: string;
}

/** What a leased row holds in each backend's own form, decoded: the rest of a LeasedJob comes from LeasedColumns. */
export type LeasedDecoded = Pick<LeasedJob, 'payload' | 'token' | 'leaseExpiresAt' | 'checkpoint'>;

export function leasedJob(row: LeasedColumns, decoded: LeasedDecoded): LeasedJob {
  return {
    ...decoded,
    id: row.id,
    kind: row.kind,
    attempt: row.attempts,
    maxAttempts: row.max_attempts,
    epoch: row.epoch,
    deadlineAt: row.deadline_at,
    group: row.group_key === '' ? null : row.group_key,
    availableAt: row.run_after,
  };
}

export interface AttemptColumns {
  readonly attempt: number;
  readonly epoch: number;
  readonly worker_id: string;
  readonly started_at: number;
  readonly ended_at: number | null;
  readonly error_code: string | null;
}

export function attemptRecord(row: AttemptColumns, outcome: AttemptOutcome | null): AttemptRecord {
  return {
    attempt: row.attempt,
    epoch: row.epoch,
    workerId: row.worker_id,
    startedAt: row.started_at,
    endedAt: row.ended_at,
    outcome,
    errorCode: row.error_code,
  };
}

export interface ApiKeyColumns {
  readonly id: string;
  readonly tenant: string;
  readonly user_name: string;
  readonly key_hash: string;
  readonly created_at: number;
  readonly revoked_at: number | null;
}

export function apiKeyRecord(row: ApiKeyColumns, role: Role): ApiKeyRecord {
  return { id: row.id, tenant: row.tenant, user: row.user_name, role, keyHash: row.key_hash, createdAt: row.created_at, revokedAt: row.revoked_at };
}

export interface KindColumns {
  readonly tenant: string;
  readonly kind: string;
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
  /** 0/1 in SQLite, a boolean in PostgreSQL. */
  readonly paused: number | boolean;
  readonly max_concurrent: number | null;
  readonly rate_limit: number | null;
  readonly rate_per_ms: number | null;
  /** The kind's `groups` as stored (group-lease.ts encodeGroupRules); NULL for none. */
  readonly group_rules: unknown;
  readonly updated_at: number;
}

export function kindRecord(row: KindColumns, payloadSchema: unknown): KindRecord {
  return {
    tenant: row.tenant,
    kind: row.kind,
    payloadSchema,
    maxPayloadBytes: row.max_payload_bytes,
    maxAttempts: row.max_attempts,
    leaseMs: row.lease_ms,
    backoff: { baseMs: row.backoff_base_ms, maxMs: row.backoff_max_ms },
    deadlineMs: row.deadline_ms,
    maxResultBytes: row.max_result_bytes,
    maxCheckpointBytes: row.max_checkpoint_bytes,
    retention: { succeededMs: row.retention_succeeded_ms, cancelledMs: row.retention_cancelled_ms, deadMs: row.retention_dead_ms },
    paused: row.paused === true || row.paused === 1,
    maxConcurrent: row.max_concurrent,
    rate: row.rate_limit === null || row.rate_per_ms === null ? null : { limit: row.rate_limit, perMs: row.rate_per_ms },
    groups: decodeGroupRules(row.group_rules),
    updatedAt: row.updated_at,
  };
}

/** A restricted kind's rules and state as KIND_FLOW_STATE reads them (both backends). */
export interface KindFlowColumns {
  readonly kind: string;
  readonly paused: number | boolean;
  readonly max_concurrent: number | null;
  readonly rate_limit: number | null;
  readonly rate_per_ms: number | null;
  readonly running: number | string | null;
  readonly window_start: number | null;
  readonly window_count: number | null;
}

export function kindFlowState(row: KindFlowColumns): KindFlowState {
  return {
    kind: row.kind,
    paused: row.paused === true || row.paused === 1,
    maxConcurrent: row.max_concurrent,
    rate: row.rate_limit === null || row.rate_per_ms === null ? null : { limit: row.rate_limit, perMs: row.rate_per_ms },
    running: Number(row.running ?? 0),
    windowStart: row.window_start,
    windowCount: row.window_count ?? 0,
  };
}
