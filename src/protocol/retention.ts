/**
 * Wire schemas of retention: a kind's `retention` periods (PUT /kinds/{kind})
 * and POST /jobs/purge, the admin's purge by hand. Durations are integer
 * milliseconds; docs/design/kinds.md §12.1 (retention) describes what is deleted.
 */

import { Type, type Static } from '@sinclair/typebox';
import { PURGEABLE_STATUSES } from '../core/states.js';

/** Ten years: the longest retention period and the largest olderThanMs. */
export const MAX_RETENTION_MS = 10 * 365 * 24 * 60 * 60 * 1000;

const Period = Type.Integer({ minimum: 1, maximum: MAX_RETENTION_MS });

export const KindRetentionDefinition = Type.Object(
  { succeededMs: Type.Optional(Period), cancelledMs: Type.Optional(Period), deadMs: Type.Optional(Period) },
  { additionalProperties: false, description: "How long the kind's finished jobs are kept, per status; the coordinator's default where absent" },
);
export type KindRetentionDefinition = Static<typeof KindRetentionDefinition>;

export const KindRetention = Type.Object(
  { succeededMs: Type.Integer(), cancelledMs: Type.Integer(), deadMs: Type.Integer() },
  { description: "The periods in effect: the kind's own, or the coordinator's default" },
);

const PurgeableStatus = Type.Union(PURGEABLE_STATUSES.map((status) => Type.Literal(status)));

export const PurgeRequest = Type.Object(
  {
    olderThanMs: Type.Integer({ minimum: 0, maximum: MAX_RETENTION_MS, description: 'Jobs that finished at least this long ago' }),
    statuses: Type.Optional(
      Type.Array(PurgeableStatus, { minItems: 1, maxItems: PURGEABLE_STATUSES.length, uniqueItems: true, description: 'Default: all three' }),
    ),
    kind: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    dryRun: Type.Optional(Type.Boolean({ description: 'Count the jobs that would be deleted; delete nothing' })),
  },
  { additionalProperties: false },
);
export type PurgeRequest = Static<typeof PurgeRequest>;

export const PurgeResponse = Type.Object({
  deleted: Type.Integer({ description: 'Jobs deleted by this request (0 for a dry run)' }),
  matched: Type.Optional(Type.Integer({ description: 'Dry run: the jobs that would be deleted' })),
  more: Type.Boolean({ description: 'More jobs may match: send the request again' }),
});
export type PurgeResponse = Static<typeof PurgeResponse>;
