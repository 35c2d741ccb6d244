/**
 * Wire schemas for operators: the bulk action's request and answer (its
 * filter is GET /jobs's, JobFilter in jobs.ts) and the job page's detail.
 */

import { Type, type Static } from '@sinclair/typebox';
import { Attempt, Job, JobFilter } from './jobs.js';

export const OPERATOR_LIMITS = Object.freeze({
  /** Jobs one POST /jobs/bulk may change; a larger backlog takes several calls. */
  maxBulkLimit: 10_000,
  defaultBulkLimit: 1_000,
  /** Store rows one GET /jobs call reads to fill a filtered page before it answers with what it found. */
  maxListScan: 5_000,
});

export const BULK_ACTIONS = ['requeue', 'cancel', 'reconcile'] as const;
export type BulkAction = (typeof BULK_ACTIONS)[number];

export const BulkRequest = Type.Object(
  {
    action: Type.Union(BULK_ACTIONS.map((a) => Type.Literal(a))),
    /** reconcile only: what the unknown jobs become. */
    outcome: Type.Optional(Type.Union([Type.Literal('succeeded'), Type.Literal('dead'), Type.Literal('requeue')])),
    filter: JobFilter,
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: OPERATOR_LIMITS.maxBulkLimit,
        description: `At most this many jobs are touched (default ${OPERATOR_LIMITS.defaultBulkLimit})`,
      }),
    ),
    /** Count what the action would touch and change nothing: the confirmation's figure. */
    dryRun: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type BulkRequest = Static<typeof BulkRequest>;

export const BulkResponse = Type.Object({
  matched: Type.Integer({ description: 'Jobs the filter selected that the action applies to, up to limit' }),
  changed: Type.Integer({ description: 'Jobs the action moved (0 for a dry run); a job that moved meanwhile is matched but not changed' }),
});
export type BulkResponse = Static<typeof BulkResponse>;

/**
 * GET /jobs/{id}/detail (admin): what the dashboard's job page shows in one
 * answer — the job, its payload and checkpoint (which GET /jobs/{id} leaves
 * out), the stored result's summary with its checksum, and the attempts.
 */
export const JobDetail = Type.Object({
  job: Type.Object({ ...Job.properties }),
  payload: Type.Unknown(),
  checkpoint: Type.Union([Type.Object({ step: Type.Integer(), state: Type.Unknown() }), Type.Null()]),
  result: Type.Union([
    Type.Object({ contentType: Type.String(), bytes: Type.Integer(), checksum: Type.String({ description: 'SHA-256, lowercase hex' }) }),
    Type.Null(),
  ]),
  attempts: Type.Array(Attempt),
});
export type JobDetail = Static<typeof JobDetail>;
