/**
 * Store records → wire bodies. The store speaks milliseconds and buffers; the
 * wire speaks RFC 3339 strings in UTC and JSON, in the shapes of
 * protocol/. Kept in one module so every route answers the same
 * job the same way.
 */

import { JOB_STATUSES } from '../core/states.js';
import { toRfc3339, toRfc3339OrNull } from '../core/clock.js';
import type { Attempt, Job, JobListItem as WireJobListItem, Kind, LeasedJob as WireLeasedJob, Stats } from '../protocol/schemas.js';
import { groupRulesConfig } from '../store/group-lease.js';
import type { AttemptRecord, JobListItem, JobRecord, JobResult, KindRecord, LeasedJob, TenantStats } from '../store/store.js';
import type { RetentionPeriods } from '../store/retention.js';

export const JSON_CONTENT_TYPE = 'application/json';

export function isJsonContentType(contentType: string): boolean {
  const base = contentType.split(';', 1)[0]?.trim().toLowerCase() ?? '';
  return base === JSON_CONTENT_TYPE || base.endsWith('+json');
}

/** The JSON result of a succeeded job, or null (no result, not succeeded yet, or a non-JSON result). */
export function jsonResultOf(record: Pick<JobRecord, 'status' | 'result'>): unknown {
  const result: JobResult | null = record.result;
  if (record.status !== 'succeeded' || result === null || !isJsonContentType(result.contentType)) return null;
  try {
    return JSON.parse(result.body.toString('utf8')) as unknown;
  } catch {
    return null;
  }
}

export function toWireJob(record: JobRecord): Job {
  return { ...wireJobFields(record), result: jsonResultOf(record), dependsOn: [...record.dependsOn], children: [...record.children] };
}

/** A job as a listing shows it: the result's content type and size only. */
export function toWireJobListItem(record: JobListItem): WireJobListItem {
  return { ...wireJobFields(record), result: record.result === null ? null : { contentType: record.result.contentType, bytes: record.result.bytes } };
}

function wireJobFields(record: Omit<JobListItem, 'result'>): Omit<Job, 'result' | 'dependsOn' | 'children'> {
  return {
    id: record.id,
    kind: record.kind,
    status: record.status,
    attempts: record.attempts,
    maxAttempts: record.maxAttempts,
    priority: record.priority,
    runAfter: toRfc3339(record.runAfter),
    deadlineAt: toRfc3339OrNull(record.deadlineAt),
    createdAt: toRfc3339(record.createdAt),
    startedAt: toRfc3339OrNull(record.startedAt),
    finishedAt: toRfc3339OrNull(record.finishedAt),
    lastError: record.lastError === null ? null : { code: record.lastError.code, message: record.lastError.message, class: record.lastError.class },
    progress: record.progress ?? null,
    cancelRequested: record.cancelRequested,
    epoch: record.epoch,
    concurrencyKey: record.concurrencyKey,
    group: record.group,
  };
}

export function toWireLeasedJob(job: LeasedJob): WireLeasedJob {
  return {
    id: job.id,
    kind: job.kind,
    payload: job.payload,
    attempt: job.attempt,
    maxAttempts: job.maxAttempts,
    epoch: job.epoch,
    token: job.token,
    leaseExpiresAt: toRfc3339(job.leaseExpiresAt),
    deadlineAt: toRfc3339OrNull(job.deadlineAt),
    checkpoint: job.checkpoint === null ? null : { step: job.checkpoint.step, state: job.checkpoint.state },
    group: job.group,
  };
}

export function toWireAttempt(attempt: AttemptRecord): Attempt {
  return {
    attempt: attempt.attempt,
    epoch: attempt.epoch,
    workerId: attempt.workerId,
    startedAt: toRfc3339(attempt.startedAt),
    endedAt: toRfc3339OrNull(attempt.endedAt),
    outcome: attempt.outcome,
    errorCode: attempt.errorCode,
  };
}

export function toWireStats(stats: TenantStats): Stats {
  const counts: Record<string, number> = {};
  for (const status of JOB_STATUSES) counts[status] = stats.counts[status] ?? 0;
  return {
    counts,
    meanWaitMs: stats.meanWaitMs,
    meanRunMs: stats.meanRunMs,
    meanAttemptRunMs: stats.meanAttemptRunMs,
    meanTimeToCompletionMs: stats.meanTimeToCompletionMs,
    leaseExpirations: stats.leaseExpirations,
    oldestAvailableAgeMs: stats.oldestAvailableAgeMs,
    storageBytes: stats.storageBytes,
  };
}

/** `defaults`: the coordinator's periods, in effect where the kind sets none. */
export function toWireKind(kind: KindRecord, defaults: RetentionPeriods): Kind {
  return {
    kind: kind.kind,
    payloadSchema: kind.payloadSchema ?? null,
    maxPayloadBytes: kind.maxPayloadBytes,
    maxAttempts: kind.maxAttempts,
    leaseMs: kind.leaseMs,
    backoff: { baseMs: kind.backoff.baseMs, maxMs: kind.backoff.maxMs },
    deadlineMs: kind.deadlineMs,
    maxResultBytes: kind.maxResultBytes,
    maxCheckpointBytes: kind.maxCheckpointBytes,
    retention: {
      succeededMs: kind.retention.succeededMs ?? defaults.succeededMs,
      cancelledMs: kind.retention.cancelledMs ?? defaults.cancelledMs,
      deadMs: kind.retention.deadMs ?? defaults.deadMs,
    },
    maxConcurrent: kind.maxConcurrent,
    rate: kind.rate === null ? null : { limit: kind.rate.limit, perMs: kind.rate.perMs },
    groups: kind.groups === null ? null : groupRulesConfig(kind.groups),
    paused: kind.paused,
    updatedAt: toRfc3339(kind.updatedAt),
  };
}
