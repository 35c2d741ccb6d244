/**
 * The bounds of the wire contract: lengths, counts, durations and sizes, and
 * what a key may hold, that the schemas in this folder enforce and that the
 * coordinator, the worker and the CLI check against. Plain values with no
 * schema library behind them, so a caller that needs only a bound does not
 * load the schemas.
 */

import { DEDUPE_KEY_MAX_LENGTH, MAX_DEDUPE_MS, MAX_UNIQUE_FOR_MS } from '../core/dedupe.js';
import { CONCURRENCY_KEY_MAX_LENGTH, MAX_DEPENDS_ON, MAX_LISTED_CHILDREN } from '../core/dependencies.js';
import {
  GROUP_MAX_LENGTH,
  MAX_GROUP_CONCURRENCY,
  MAX_GROUP_RATE_LIMIT,
  MAX_GROUP_RATE_PER_MS,
  MAX_GROUP_WEIGHT,
  MAX_GROUP_WEIGHTS,
  MIN_GROUP_WEIGHT,
} from '../core/fair-share.js';

export const LIMITS = Object.freeze({
  kindLength: 128,
  idempotencyKeyLength: 255,
  workerIdLength: 200,
  maxAttempts: 1000,
  maxPriority: 1_000_000,
  maxLeaseMs: 24 * 60 * 60_000,
  minLeaseMs: 100,
  maxWaitMs: 60_000,
  maxLeaseBatch: 1000,
  maxCompleteBatch: 1000,
  maxEnqueueBatch: 1000,
  maxListLimit: 1000,
  scheduleNameLength: 128,
  cronLength: 200,
  /** Missed occurrences one schedule may enqueue after downtime. */
  maxScheduleCatchUp: 100,
  errorCodeLength: 128,
  /** Parents one job may name in dependsOn (core/dependencies.ts). */
  maxDependsOn: MAX_DEPENDS_ON,
  /** Children a job's answer lists, the earliest enqueued. */
  maxListedChildren: MAX_LISTED_CHILDREN,
  /** A job id as the wire carries it (a UUID is 36). */
  jobIdLength: 64,
  concurrencyKeyLength: CONCURRENCY_KEY_MAX_LENGTH,
  /** A job's group name, and the kind's groups.* bounds (core/fair-share.ts). */
  groupLength: GROUP_MAX_LENGTH,
  maxGroupWeights: MAX_GROUP_WEIGHTS,
  minGroupWeight: MIN_GROUP_WEIGHT,
  maxGroupWeight: MAX_GROUP_WEIGHT,
  maxGroupConcurrency: MAX_GROUP_CONCURRENCY,
  maxGroupRateLimit: MAX_GROUP_RATE_LIMIT,
  maxGroupRatePerMs: MAX_GROUP_RATE_PER_MS,
  /** A dedupe or unique key (core/dedupe.ts). */
  dedupeKeyLength: DEDUPE_KEY_MAX_LENGTH,
  /** A dedupe window (ttlMs) and an extend's longest delay (maxDelayMs): 30 days. */
  maxDedupeMs: MAX_DEDUPE_MS,
  /** How long a finished job keeps its unique key (forMs): 365 days. */
  maxUniqueForMs: MAX_UNIQUE_FOR_MS,
  errorMessageLength: 4096,
  /** Checkpoint step indexes are 32-bit (PostgreSQL integer). */
  maxCheckpointStep: 2_147_483_647,
  /** A kind's backoff delays; within a 32-bit count of milliseconds. */
  maxBackoffMs: 7 * 24 * 60 * 60_000,
  /** A job's overall deadline, from enqueue or from its kind. */
  maxDeadlineMs: 365 * 24 * 60 * 60_000,
  /** A kind's result limit: no result can arrive in a larger body than the largest body limit. */
  maxResultBytes: 1024 ** 3,
  /** A kind's checkpoint state limit: a checkpoint arrives in one request body. */
  maxCheckpointBytes: 1024 ** 3,
  /** A kind's maxConcurrent and rate.limit; within a 32-bit integer column. */
  maxKindConcurrency: 1_000_000,
  maxKindRateLimit: 1_000_000,
  /** A kind's rate window: from a millisecond to a day. */
  maxKindRatePerMs: 24 * 60 * 60_000,
  /** Default body limit; kinds may set a lower payload limit. */
  bodyLimitBytes: 1024 * 1024,
  batchBodyLimitBytes: 16 * 1024 * 1024,
});

/**
 * What a key's text may hold (idempotency, concurrency, dedupe and unique keys): no NUL and
 * no unpaired surrogate. PostgreSQL text holds neither and keeps both as
 * U+FFFD, so two distinct keys would name one job (and the store, finding the
 * conflicting row under another spelling, failed with a 500). A JSON Schema
 * `pattern`, read with the `u` flag as Ajv reads it.
 */
export const STORABLE_KEY_PATTERN = '^[^\\u0000\\ud800-\\udfff]*$';
