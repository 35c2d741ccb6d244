/**
 * The bodies of the job resource: enqueue (single and batch), the job as
 * every route answers it, listings, reads, attempts, and the operator's
 * requeue, reconcile and cancel.
 */

import { Type, type Static } from '@sinclair/typebox';
import { ErrorDetail, FailureClassSchema, JobStatusSchema, KindName, NullableTimestamp, Timestamp } from './common.js';
import { DEDUPE_MODES } from '../core/dedupe.js';
import { LIMITS, STORABLE_KEY_PATTERN } from './limits.js';

/** A dedupe or unique key: the rules of an idempotency key. */
const EnqueueKey = Type.String({ minLength: 1, maxLength: LIMITS.dedupeKeyLength, pattern: STORABLE_KEY_PATTERN });

export const DedupeModeSchema = Type.Union(
  DEDUPE_MODES.map((mode) => Type.Literal(mode)),
  { description: 'drop: answer the existing job; replace: replace its payload; extend: replace it and push its runAfter to now + ttlMs (debounce)' },
);

export const DedupeSpec = Type.Object(
  {
    key: EnqueueKey,
    mode: DedupeModeSchema,
    ttlMs: Type.Integer({ minimum: 1, maximum: LIMITS.maxDedupeMs, description: 'How long after its enqueue (or its last extend) the job takes duplicates' }),
    maxDelayMs: Type.Optional(
      Type.Integer({ minimum: 1, maximum: LIMITS.maxDedupeMs, description: "extend never pushes runAfter past the job's creation plus this" }),
    ),
  },
  {
    additionalProperties: false,
    description:
      'While a job of the same kind with this key, enqueued by the same user, is queued or waiting and has never been leased, and its window is open, this request is folded into it (answered with deduplicated: true) instead of creating a job.',
  },
);
export type DedupeSpec = Static<typeof DedupeSpec>;

export const UniqueSpec = Type.Object(
  {
    key: EnqueueKey,
    forMs: Type.Integer({
      minimum: 0,
      maximum: LIMITS.maxUniqueForMs,
      description: 'How long after it finished (succeeded, cancelled, dead) the job still holds the key',
    }),
  },
  {
    additionalProperties: false,
    description:
      'Refuses the job with 409 duplicate_job (error.details.jobId names the existing one) while a job of the same kind with this key, enqueued by the same user, is unfinished or finished less than forMs ago.',
  },
);
export type UniqueSpec = Static<typeof UniqueSpec>;

export const EnqueueRequest = Type.Object(
  {
    kind: KindName,
    payload: Type.Unknown(),
    maxAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.maxAttempts })),
    runAfter: Type.Optional(Timestamp),
    priority: Type.Optional(Type.Integer({ minimum: -LIMITS.maxPriority, maximum: LIMITS.maxPriority })),
    deadlineMs: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.maxDeadlineMs })),
    dependsOn: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: LIMITS.jobIdLength }), {
        maxItems: LIMITS.maxDependsOn,
        uniqueItems: true,
        description:
          "Parent job ids of the caller's tenant (a producer's own jobs), each at most once: the job is waiting until all have succeeded, and dead with dependency_failed when one ends dead or cancelled. An id the caller cannot see answers 400 invalid_request.",
      }),
    ),
    concurrencyKey: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: LIMITS.concurrencyKeyLength,
        pattern: STORABLE_KEY_PATTERN,
        description: "At most one live lease per (kind, concurrencyKey) of the tenant; the key's jobs are leased one at a time in enqueue order.",
      }),
    ),
    dedupe: Type.Optional(DedupeSpec),
    unique: Type.Optional(UniqueSpec),
    group: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: LIMITS.groupLength,
        pattern: STORABLE_KEY_PATTERN,
        description:
          "The job's group within its kind (a customer id, say): the lease shares the kind's workers fairly among the groups with jobs waiting, by the kind's groups weights and limits (docs/FAIRNESS.md). Absent: the jobs without a group, which form one group.",
      }),
    ),
  },
  { additionalProperties: false },
);
export type EnqueueRequest = Static<typeof EnqueueRequest>;

export const Job = Type.Object({
  id: Type.String(),
  kind: Type.String(),
  status: JobStatusSchema,
  attempts: Type.Integer(),
  maxAttempts: Type.Integer(),
  priority: Type.Integer(),
  runAfter: Timestamp,
  deadlineAt: NullableTimestamp,
  createdAt: Timestamp,
  startedAt: NullableTimestamp,
  finishedAt: NullableTimestamp,
  lastError: Type.Union([
    Type.Object({
      code: Type.String({ description: "The code that ended the attempt: the worker's own for a fail, else the queue's" }),
      message: Type.String(),
      class: FailureClassSchema,
    }),
    Type.Null(),
  ]),
  result: Type.Unknown({ description: 'The JSON result once succeeded, else null' }),
  progress: Type.Unknown(),
  cancelRequested: Type.Boolean(),
  epoch: Type.Integer(),
  concurrencyKey: Type.Union([Type.String(), Type.Null()]),
  group: Type.Union([Type.String(), Type.Null()], { description: 'The group it was enqueued with; null without one' }),
  dependsOn: Type.Array(Type.String(), {
    maxItems: LIMITS.maxDependsOn,
    description: 'The parents it was enqueued with that are still stored, in enqueue order',
  }),
  children: Type.Array(Type.String(), {
    maxItems: LIMITS.maxListedChildren,
    description: 'The jobs that name it in dependsOn: the first 100, in enqueue order',
  }),
});
export type Job = Static<typeof Job>;

/** What POST /jobs answers: the job, and `deduplicated: true` when the request was folded into an existing job. */
export const EnqueueResponse = Type.Object({
  ...Job.properties,
  deduplicated: Type.Optional(Type.Boolean({ description: 'Present (true) when a dedupe key folded the request into this existing job' })),
});
export type EnqueueResponse = Static<typeof EnqueueResponse>;

/** What a listing says about a job's result: its content type and size, never its bytes (GET /jobs/{id}/result has those). */
export const ResultSummary = Type.Union([Type.Object({ contentType: Type.String(), bytes: Type.Integer() }), Type.Null()], {
  description: 'The stored result: its content type and size in bytes; null when there is none',
});

/** A job in a listing: the job's fields with a result summary instead of the result, so a page has a known upper size. */
export const JobListItem = Type.Object({ ...Type.Omit(Job, ['result', 'dependsOn', 'children']).properties, result: ResultSummary });
export type JobListItem = Static<typeof JobListItem>;

export const JobList = Type.Object({ jobs: Type.Array(JobListItem), nextCursor: Type.Union([Type.String(), Type.Null()]) });
export type JobList = Static<typeof JobList>;

/**
 * What selects jobs: the query of GET /jobs (with limit and cursor) and the
 * `filter` of POST /jobs/bulk. The store selects by status and kind; the
 * coordinator applies the error code and the creation-time range to the rows
 * it reads (src/engine/job-filter.ts).
 */
export const JobFilterProperties = {
  status: Type.Optional(JobStatusSchema),
  kind: Type.Optional(KindName),
  errorCode: Type.Optional(Type.String({ minLength: 1, maxLength: LIMITS.errorCodeLength, description: "The code of the job's last error" })),
  createdAfter: Type.Optional(Type.String({ format: 'date-time', description: 'RFC 3339: only jobs created at or after this time' })),
  createdBefore: Type.Optional(Type.String({ format: 'date-time', description: 'RFC 3339: only jobs created before this time' })),
};

export const JobFilter = Type.Object(JobFilterProperties, { additionalProperties: false });
export type JobFilter = Static<typeof JobFilter>;

export const JobListQuery = Type.Object(
  {
    ...JobFilterProperties,
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.maxListLimit })),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);
export type JobListQuery = Static<typeof JobListQuery>;

export const JobGetQuery = Type.Object(
  {
    waitMs: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: LIMITS.maxWaitMs,
        description: 'Answer when the job reaches succeeded, dead, cancelled or unknown, or after this many ms',
      }),
    ),
  },
  { additionalProperties: false },
);
export type JobGetQuery = Static<typeof JobGetQuery>;

export const EnqueueBatchItem = Type.Object(
  {
    idempotencyKey: Type.String({ minLength: 1, maxLength: LIMITS.idempotencyKeyLength, pattern: STORABLE_KEY_PATTERN }),
    ...EnqueueRequest.properties,
  },
  { additionalProperties: false },
);
export type EnqueueBatchItem = Static<typeof EnqueueBatchItem>;

export const EnqueueBatchRequest = Type.Object(
  { jobs: Type.Array(EnqueueBatchItem, { minItems: 1, maxItems: LIMITS.maxEnqueueBatch }) },
  { additionalProperties: false },
);
export type EnqueueBatchRequest = Static<typeof EnqueueBatchRequest>;

/**
 * One entry per submitted job, in order. `status` is what a single POST /jobs
 * would have answered: 202 with the job (`replayed` for an idempotent replay,
 * `deduplicated` for a request folded into an existing job), or 400/409/413
 * with the error.
 */
export const EnqueueBatchResult = Type.Object({
  idempotencyKey: Type.String(),
  status: Type.Integer(),
  replayed: Type.Optional(Type.Boolean()),
  deduplicated: Type.Optional(Type.Boolean()),
  job: Type.Optional(Job),
  error: Type.Optional(ErrorDetail),
});
export type EnqueueBatchResult = Static<typeof EnqueueBatchResult>;

export const EnqueueBatchResponse = Type.Object({ results: Type.Array(EnqueueBatchResult) });
export type EnqueueBatchResponse = Static<typeof EnqueueBatchResponse>;

export const RequeueRequest = Type.Object(
  { maxAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.maxAttempts })) },
  { additionalProperties: false },
);
export type RequeueRequest = Static<typeof RequeueRequest>;

/** What an operator says became of a job in `unknown`: it succeeded, it is dead, or it runs again. */
export const ReconcileOutcomeName = Type.Union([Type.Literal('succeeded'), Type.Literal('dead'), Type.Literal('requeue')]);
export type ReconcileOutcomeName = Static<typeof ReconcileOutcomeName>;

export const ReconcileRequest = Type.Object({ outcome: ReconcileOutcomeName }, { additionalProperties: false });
export type ReconcileRequest = Static<typeof ReconcileRequest>;

/** POST /jobs/{id}/cancel takes an empty object (or no body). */
export const CancelRequest = Type.Object({}, { additionalProperties: false });
export type CancelRequest = Static<typeof CancelRequest>;

export const Attempt = Type.Object({
  attempt: Type.Integer(),
  epoch: Type.Integer(),
  workerId: Type.String(),
  startedAt: Timestamp,
  endedAt: NullableTimestamp,
  outcome: Type.Union([Type.String(), Type.Null()]),
  errorCode: Type.Union([Type.String(), Type.Null()]),
});
export type Attempt = Static<typeof Attempt>;

export const AttemptList = Type.Object({ attempts: Type.Array(Attempt) });
export type AttemptList = Static<typeof AttemptList>;
