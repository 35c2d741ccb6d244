/**
 * The bodies of the kind registry: what an admin registers for a kind
 * (`PUT /kinds/{kind}`) and the kind as the coordinator answers it, every
 * default filled in.
 */

import { Type, type Static } from '@sinclair/typebox';
import { KindName, Timestamp } from './common.js';
import { LIMITS } from './limits.js';
import { KindRetention, KindRetentionDefinition } from './retention.js';

export const BackoffSchema = Type.Object(
  { baseMs: Type.Integer({ minimum: 1, maximum: LIMITS.maxBackoffMs }), maxMs: Type.Integer({ minimum: 1, maximum: LIMITS.maxBackoffMs }) },
  { additionalProperties: false },
);

/** Leases of the kind started per window of perMs (fixed windows, docs/design/kinds.md §12.2). */
export const KindRateSchema = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: LIMITS.maxKindRateLimit }),
    perMs: Type.Integer({ minimum: 1, maximum: LIMITS.maxKindRatePerMs }),
  },
  { additionalProperties: false },
);

/**
 * How the lease shares the kind among the groups of its jobs (docs/FAIRNESS.md): limits that apply to each group
 * separately, and weights by group name ("" weighs the jobs without a group; a group not named weighs 1).
 */
export const KindGroupsSchema = Type.Object(
  {
    maxConcurrent: Type.Optional(
      Type.Integer({ minimum: 1, maximum: LIMITS.maxGroupConcurrency, description: 'Leases of one group of the kind live at once' }),
    ),
    rate: Type.Optional(
      Type.Object(
        {
          limit: Type.Integer({ minimum: 1, maximum: LIMITS.maxGroupRateLimit }),
          perMs: Type.Integer({ minimum: 1, maximum: LIMITS.maxGroupRatePerMs }),
        },
        { additionalProperties: false, description: 'Leases of one group started per fixed window' },
      ),
    ),
    weights: Type.Optional(
      Type.Record(Type.String({ maxLength: LIMITS.groupLength }), Type.Number({ minimum: LIMITS.minGroupWeight, maximum: LIMITS.maxGroupWeight }), {
        maxProperties: LIMITS.maxGroupWeights,
        description: 'Each named group gets starts in proportion to its weight while groups wait',
      }),
    ),
  },
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
    maxConcurrent: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1, maximum: LIMITS.maxKindConcurrency }), Type.Null()], {
        description: 'Leases of the kind live at once across every worker and coordinator of the tenant; null or absent for no limit',
      }),
    ),
    rate: Type.Optional(Type.Union([KindRateSchema, Type.Null()], { description: 'Leases of the kind started per window; null or absent for no limit' })),
    groups: Type.Optional(
      Type.Union([KindGroupsSchema, Type.Null()], {
        description: 'How the lease shares the kind among the groups of its jobs; null or absent for no group limits or weights',
      }),
    ),
  },
  { additionalProperties: false },
);
export type KindDefinition = Static<typeof KindDefinition>;

export const KindParams = Type.Object({ kind: KindName });

/** POST /kinds/{kind}/pause and /resume take no fields (an empty body or {}). */
export const KindPauseRequest = Type.Object({}, { additionalProperties: false });
export type KindPauseRequest = Static<typeof KindPauseRequest>;
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
  maxConcurrent: Type.Union([Type.Integer(), Type.Null()]),
  rate: Type.Union([Type.Object({ limit: Type.Integer(), perMs: Type.Integer() }), Type.Null()]),
  groups: Type.Union([
    Type.Object({
      maxConcurrent: Type.Optional(Type.Integer()),
      rate: Type.Optional(Type.Object({ limit: Type.Integer(), perMs: Type.Integer() })),
      weights: Type.Optional(Type.Record(Type.String(), Type.Number())),
    }),
    Type.Null(),
  ]),
  paused: Type.Boolean({ description: 'A paused kind is never leased; its jobs still enqueue (POST /kinds/{kind}/pause, /resume)' }),
  updatedAt: Timestamp,
});
export type Kind = Static<typeof Kind>;

export const KindList = Type.Object({ kinds: Type.Array(Kind) });
export type KindList = Static<typeof KindList>;
