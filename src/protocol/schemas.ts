/**
 * The wire contract: one TypeBox schema per request and response body. The
 * coordinator validates with these and generates /openapi.json from them; the
 * client takes its types from them. Field names are public API.
 *
 * Timestamps on the wire are RFC 3339 strings in UTC; durations are integer
 * milliseconds named `…Ms`.
 */

import { Type, type Static } from '@sinclair/typebox';
import { FAILURE_CLASS_NAMES } from '../core/failure-classes.js';
import { JOB_STATUSES } from '../core/states.js';
import { KindRetention, KindRetentionDefinition } from './retention.js';

const Timestamp = Type.String({ format: 'date-time', description: 'RFC 3339, UTC' });
const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

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
  errorCodeLength: 128,
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
  /** Default body limit; kinds may set a lower payload limit. */
  bodyLimitBytes: 1024 * 1024,
  batchBodyLimitBytes: 16 * 1024 * 1024,
});

export const JobStatusSchema = Type.Union(JOB_STATUSES.map((s) => Type.Literal(s)));

export const FailureClassSchema = Type.Union(
  FAILURE_CLASS_NAMES.map((c) => Type.Literal(c)),
  { description: 'Which rule of the queue applied to the last error (docs/ERRORS.md, "Failure classes")' },
);

export const KindName = Type.String({ minLength: 1, maxLength: LIMITS.kindLength, pattern: '^[A-Za-z0-9][A-Za-z0-9._:-]*$' });

export const ErrorBody = Type.Object(
  {
    error: Type.Object({ code: Type.String(), message: Type.String() }, { additionalProperties: false }),
  },
  { additionalProperties: false, $id: 'ErrorBody' },
);
export type ErrorBody = Static<typeof ErrorBody>;

export const JobErrorBody = Type.Object(
  {
    code: Type.String({ minLength: 1, maxLength: LIMITS.errorCodeLength }),
    message: Type.Optional(Type.String({ maxLength: LIMITS.errorMessageLength })),
  },
  { additionalProperties: false },
);

export const EnqueueRequest = Type.Object(
  {
    kind: KindName,
    payload: Type.Unknown(),
    maxAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.maxAttempts })),
    runAfter: Type.Optional(Timestamp),
    priority: Type.Optional(Type.Integer({ minimum: -LIMITS.maxPriority, maximum: LIMITS.maxPriority })),
    deadlineMs: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.maxDeadlineMs })),
  },
  { additionalProperties: false },
);
export type EnqueueRequest = Static<typeof EnqueueRequest>;

export const ProgressSchema = Type.Unknown({ description: 'A small JSON value, e.g. {done, total}' });

export const CheckpointSchema = Type.Object(
  { step: Type.Integer({ minimum: 0, maximum: LIMITS.maxCheckpointStep }), state: Type.Unknown() },
  { additionalProperties: false },
);

export const Job = Type.Object(
  {
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
  },
  { $id: 'Job' },
);
export type Job = Static<typeof Job>;

/** What a listing says about a job's result: its content type and size, never its bytes (GET /jobs/{id}/result has those). */
export const ResultSummary = Type.Union([Type.Object({ contentType: Type.String(), bytes: Type.Integer() }), Type.Null()], {
  description: 'The stored result: its content type and size in bytes; null when there is none',
});

/** A job in a listing: the job's fields with a result summary instead of the result, so a page has a known upper size. */
export const JobListItem = Type.Object(
  { ...Type.Omit(Job, ['result']).properties, result: ResultSummary },
  { $id: 'JobListItem' },
);
export type JobListItem = Static<typeof JobListItem>;

export const JobList = Type.Object({ jobs: Type.Array(JobListItem), nextCursor: Type.Union([Type.String(), Type.Null()]) });
export type JobList = Static<typeof JobList>;

export const JobListQuery = Type.Object(
  {
    status: Type.Optional(JobStatusSchema),
    kind: Type.Optional(KindName),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.maxListLimit })),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);
export type JobListQuery = Static<typeof JobListQuery>;

export const JobGetQuery = Type.Object(
  {
    waitMs: Type.Optional(
      Type.Integer({ minimum: 0, maximum: LIMITS.maxWaitMs, description: 'Answer when the job reaches succeeded, dead, cancelled or unknown, or after this many ms' }),
    ),
  },
  { additionalProperties: false },
);
export type JobGetQuery = Static<typeof JobGetQuery>;

export const LeaseRequest = Type.Object(
  {
    workerId: Type.String({ minLength: 1, maxLength: LIMITS.workerIdLength }),
    kinds: Type.Optional(Type.Array(KindName, { maxItems: 100 })),
    leaseMs: Type.Optional(Type.Integer({ minimum: LIMITS.minLeaseMs, maximum: LIMITS.maxLeaseMs })),
    max: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.maxLeaseBatch })),
    waitMs: Type.Optional(Type.Integer({ minimum: 0, maximum: LIMITS.maxWaitMs })),
  },
  { additionalProperties: false },
);
export type LeaseRequest = Static<typeof LeaseRequest>;

export const LeasedJob = Type.Object({
  id: Type.String(),
  kind: Type.String(),
  payload: Type.Unknown(),
  attempt: Type.Integer(),
  maxAttempts: Type.Integer(),
  epoch: Type.Integer(),
  token: Type.String(),
  leaseExpiresAt: Timestamp,
  deadlineAt: NullableTimestamp,
  checkpoint: Type.Union([CheckpointSchema, Type.Null()]),
});
export type LeasedJob = Static<typeof LeasedJob>;

export const LeaseResponse = Type.Object({
  jobs: Type.Array(LeasedJob),
  waitedMs: Type.Integer({
    minimum: 0,
    description:
      'How long the coordinator held the request before it leased these jobs (a long poll). A worker adds it to the time it sent the request to place the start of the lease on its own clock; without it, a long wait would look like lost lease time.',
  }),
});
export type LeaseResponse = Static<typeof LeaseResponse>;

const Token = Type.String({ minLength: 1, maxLength: 200 });

export const RenewRequest = Type.Object(
  {
    token: Token,
    leaseMs: Type.Optional(Type.Integer({ minimum: LIMITS.minLeaseMs, maximum: LIMITS.maxLeaseMs })),
    progress: Type.Optional(ProgressSchema),
  },
  { additionalProperties: false },
);
export type RenewRequest = Static<typeof RenewRequest>;

export const RenewResponse = Type.Object({ leaseExpiresAt: Timestamp });
export type RenewResponse = Static<typeof RenewResponse>;

/** A result that is not JSON: bytes (base64 on the wire) with their content type. Exclusive with `result`. */
export const ResultBytes = Type.Object(
  {
    // Checked as an RFC 9110 media type by the coordinator (core/media-type.ts), per item in a batch.
    contentType: Type.String({ minLength: 1, maxLength: 255, description: 'An RFC 9110 media type, e.g. text/csv; charset=utf-8' }),
    base64: Type.String({ pattern: '^[A-Za-z0-9+/]*={0,2}$' }),
  },
  { additionalProperties: false },
);
export type ResultBytes = Static<typeof ResultBytes>;

export const CompleteRequest = Type.Object(
  { token: Token, result: Type.Optional(Type.Unknown()), resultBytes: Type.Optional(ResultBytes) },
  { additionalProperties: false },
);
export type CompleteRequest = Static<typeof CompleteRequest>;

export const CompleteResponse = Type.Object({ id: Type.String(), status: JobStatusSchema });
export type CompleteResponse = Static<typeof CompleteResponse>;

export const CompleteManyRequest = Type.Object(
  {
    completions: Type.Array(
      Type.Object(
        { id: Type.String({ minLength: 1, maxLength: 64 }), token: Token, result: Type.Optional(Type.Unknown()), resultBytes: Type.Optional(ResultBytes) },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: LIMITS.maxCompleteBatch },
    ),
  },
  { additionalProperties: false },
);
export type CompleteManyRequest = Static<typeof CompleteManyRequest>;

export const CompleteManyResponse = Type.Object({
  results: Type.Array(Type.Object({ id: Type.String(), status: Type.String(), code: Type.Optional(Type.String()) })),
});
export type CompleteManyResponse = Static<typeof CompleteManyResponse>;

export const FailRequest = Type.Object(
  { token: Token, error: JobErrorBody, retryable: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
export type FailRequest = Static<typeof FailRequest>;

export const FailResponse = Type.Object({
  status: Type.Union([Type.Literal('queued'), Type.Literal('dead'), Type.Literal('cancelled'), Type.Literal('unknown')]),
  runAfter: Type.Optional(Timestamp),
});
export type FailResponse = Static<typeof FailResponse>;

export const TokenRequest = Type.Object({ token: Token }, { additionalProperties: false });
export type TokenRequest = Static<typeof TokenRequest>;

export const CheckpointRequest = Type.Object(
  { token: Token, step: Type.Integer({ minimum: 0, maximum: LIMITS.maxCheckpointStep }), state: Type.Unknown() },
  { additionalProperties: false },
);
export type CheckpointRequest = Static<typeof CheckpointRequest>;

export const RequeueRequest = Type.Object(
  { maxAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.maxAttempts })) },
  { additionalProperties: false },
);
export type RequeueRequest = Static<typeof RequeueRequest>;

export const ReconcileRequest = Type.Object(
  { outcome: Type.Union([Type.Literal('succeeded'), Type.Literal('dead'), Type.Literal('requeue')]) },
  { additionalProperties: false },
);
export type ReconcileRequest = Static<typeof ReconcileRequest>;

export const Attempt = Type.Object({
  attempt: Type.Integer(),
  epoch: Type.Integer(),
  workerId: Type.String(),
  startedAt: Timestamp,
  endedAt: NullableTimestamp,
  outcome: Type.Union([Type.String(), Type.Null()]),
  errorCode: Type.Union([Type.String(), Type.Null()]),
});
export const AttemptList = Type.Object({ attempts: Type.Array(Attempt) });
export type AttemptList = Static<typeof AttemptList>;

export const Stats = Type.Object({
  counts: Type.Record(Type.String(), Type.Integer()),
  meanWaitMs: Type.Union([Type.Number(), Type.Null()]),
  meanRunMs: Type.Union([Type.Number(), Type.Null()], { description: "Succeeded jobs: first start to final finish, retries and time between attempts included" }),
  meanAttemptRunMs: Type.Union([Type.Number(), Type.Null()], { description: 'Ended attempts: lease to the end of that attempt' }),
  meanTimeToCompletionMs: Type.Union([Type.Number(), Type.Null()], { description: 'Succeeded jobs: acceptance to success' }),
  leaseExpirations: Type.Integer(),
  oldestAvailableAgeMs: Type.Union([Type.Integer(), Type.Null()]),
  storageBytes: Type.Integer(),
});
export type Stats = Static<typeof Stats>;

export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
export type IdParams = Static<typeof IdParams>;

export const BackoffSchema = Type.Object(
  { baseMs: Type.Integer({ minimum: 1, maximum: LIMITS.maxBackoffMs }), maxMs: Type.Integer({ minimum: 1, maximum: LIMITS.maxBackoffMs }) },
  { additionalProperties: false },
);

export const KindDefinition = Type.Object(
  {
    payloadSchema: Type.Optional(Type.Unknown()),
    maxPayloadBytes: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.bodyLimitBytes })),
    maxAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.maxAttempts })),
    leaseMs: Type.Optional(Type.Integer({ minimum: LIMITS.minLeaseMs, maximum: LIMITS.maxLeaseMs })),
    backoff: Type.Optional(BackoffSchema),
    deadlineMs: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: LIMITS.maxDeadlineMs }), Type.Null()])),
    maxResultBytes: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.maxResultBytes })),
    maxCheckpointBytes: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.maxCheckpointBytes })),
    retention: Type.Optional(KindRetentionDefinition),
  },
  { additionalProperties: false },
);
export type KindDefinition = Static<typeof KindDefinition>;

export const KindParams = Type.Object({ kind: KindName });
export type KindParams = Static<typeof KindParams>;

/** A registered kind as GET /kinds and PUT /kinds/{kind} answer it, every default filled in. */
export const Kind = Type.Object({
  kind: Type.String(),
  payloadSchema: Type.Unknown({ description: 'JSON Schema the payload must match; null for any payload' }),
  maxPayloadBytes: Type.Integer(),
  maxAttempts: Type.Integer(),
  leaseMs: Type.Integer(),
  backoff: Type.Object({ baseMs: Type.Integer(), maxMs: Type.Integer() }),
  deadlineMs: Type.Union([Type.Integer(), Type.Null()]),
  maxResultBytes: Type.Integer(),
  maxCheckpointBytes: Type.Integer(),
  retention: KindRetention,
  updatedAt: Timestamp,
});
export type Kind = Static<typeof Kind>;

export const KindList = Type.Object({ kinds: Type.Array(Kind) });
export type KindList = Static<typeof KindList>;

export const EnqueueBatchItem = Type.Object(
  {
    // No NUL or unpaired surrogates: PostgreSQL keeps both as U+FFFD, so two distinct keys would name one job.
    idempotencyKey: Type.String({ minLength: 1, maxLength: LIMITS.idempotencyKeyLength, pattern: '^[^\\u0000\\ud800-\\udfff]*$' }),
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
 * would have answered: 202 with the job (`replayed` for an idempotent replay),
 * or 400/409/413 with the error.
 */
export const EnqueueBatchResult = Type.Object({
  idempotencyKey: Type.String(),
  status: Type.Integer(),
  replayed: Type.Optional(Type.Boolean()),
  job: Type.Optional(Job),
  error: Type.Optional(Type.Object({ code: Type.String(), message: Type.String() })),
});
export type EnqueueBatchResult = Static<typeof EnqueueBatchResult>;

export const EnqueueBatchResponse = Type.Object({ results: Type.Array(EnqueueBatchResult) });
export type EnqueueBatchResponse = Static<typeof EnqueueBatchResponse>;

/** The answer of calls that only acknowledge (effect, checkpoint). */
export const OkResponse = Type.Object({ ok: Type.Literal(true) });
export type OkResponse = Static<typeof OkResponse>;

export const HealthResponse = Type.Object({ status: Type.Literal('ok'), backend: Type.String() });
export type HealthResponse = Static<typeof HealthResponse>;
