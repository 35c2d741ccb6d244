/**
 * The bodies of a worker's calls under a lease: lease, renew, complete (one
 * or many), fail, declare an effect, checkpoint. Every call after the lease
 * carries the lease's token; the coordinator refuses it once the lease has
 * passed to another attempt.
 */

import { Type, type Static } from '@sinclair/typebox';
import { JobStatusSchema, KindName, NullableTimestamp, Timestamp, Token } from './common.js';
import { LIMITS } from './limits.js';

export const ProgressSchema = Type.Unknown({ description: 'A small JSON value, e.g. {done, total}' });

export const CheckpointSchema = Type.Object(
  { step: Type.Integer({ minimum: 0, maximum: LIMITS.maxCheckpointStep }), state: Type.Unknown() },
  { additionalProperties: false },
);

export const JobErrorBody = Type.Object(
  {
    code: Type.String({ minLength: 1, maxLength: LIMITS.errorCodeLength }),
    message: Type.Optional(Type.String({ maxLength: LIMITS.errorMessageLength })),
  },
  { additionalProperties: false },
);

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
  group: Type.Union([Type.String(), Type.Null()], { description: 'The group it was enqueued with; null without one' }),
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

/**
 * A lease carried by a completion request: the worker's next jobs, leased right after the completions
 * commit, in the same request. It never waits (no `waitMs`): a worker that finds none leases on its own.
 */
export const CarriedLease = Type.Object(
  {
    workerId: LeaseRequest.properties.workerId,
    kinds: LeaseRequest.properties.kinds,
    leaseMs: LeaseRequest.properties.leaseMs,
    max: LeaseRequest.properties.max,
  },
  { additionalProperties: false },
);
export type CarriedLease = Static<typeof CarriedLease>;

export const CompleteManyRequest = Type.Object(
  {
    completions: Type.Array(Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }), ...CompleteRequest.properties }, { additionalProperties: false }), {
      minItems: 1,
      maxItems: LIMITS.maxCompleteBatch,
    }),
    lease: Type.Optional(CarriedLease),
  },
  { additionalProperties: false },
);
export type CompleteManyRequest = Static<typeof CompleteManyRequest>;

/** One entry per completion, in order: `succeeded`, `dead` (code result_too_large), or `rejected` with its code. */
export const CompleteManyResult = Type.Object({ id: Type.String(), status: Type.String(), code: Type.Optional(Type.String()) });
export type CompleteManyResult = Static<typeof CompleteManyResult>;

export const CompleteManyResponse = Type.Object({
  results: Type.Array(CompleteManyResult),
  jobs: Type.Optional(
    Type.Array(LeasedJob, {
      description: 'With `lease` in the request: the jobs leased after the completions committed (none when none was available, or when the lease failed)',
    }),
  ),
});
export type CompleteManyResponse = Static<typeof CompleteManyResponse>;

export const FailRequest = Type.Object({ token: Token, error: JobErrorBody, retryable: Type.Optional(Type.Boolean()) }, { additionalProperties: false });
export type FailRequest = Static<typeof FailRequest>;

export const FailResponse = Type.Object({
  status: Type.Union([Type.Literal('queued'), Type.Literal('dead'), Type.Literal('cancelled'), Type.Literal('unknown')]),
  runAfter: Type.Optional(Timestamp),
});
export type FailResponse = Static<typeof FailResponse>;

/** The body of calls that carry only the lease's token (effect). */
export const TokenRequest = Type.Object({ token: Token }, { additionalProperties: false });
export type TokenRequest = Static<typeof TokenRequest>;

export const CheckpointRequest = Type.Object({ token: Token, ...CheckpointSchema.properties }, { additionalProperties: false });
export type CheckpointRequest = Static<typeof CheckpointRequest>;
