/**
 * POST /jobs/purge (admin): deletes the tenant's finished jobs that finished
 * at least `olderThanMs` ago, whatever their kind's retention says, in the
 * coordinator's retention batches and at most PURGE_BATCHES_PER_REQUEST
 * batches per request (1,000 jobs by default), so no request runs long;
 * `more: true` asks the caller to send it again (`leasehold purge` does,
 * showing progress). `dryRun` counts instead. `unknown` jobs are never
 * purged: they wait for an operator's reconcile.
 */

import { PurgeRequest, PurgeResponse } from '../../protocol/retention.js';
import { PURGEABLE_STATUSES } from '../../store/retention.js';
import { principalOf } from '../auth.js';
import { purgeJobs } from '../../engine/retention.js';
import { errorResponses, type CoordinatorApp } from '../route-context.js';
import type { EngineContext } from '../../engine/context.js';

/** Batches of retentionBatchSize jobs one request deletes at most. */
export const PURGE_BATCHES_PER_REQUEST = 10;

export function registerPurgeRoutes(app: CoordinatorApp, ctx: EngineContext): void {
  app.post(
    '/jobs/purge',
    {
      config: { roles: ['admin'] },
      schema: {
        summary: "Delete the tenant's finished jobs older than a period",
        description: `Succeeded, cancelled and dead jobs (with their attempts and results), at most ${PURGE_BATCHES_PER_REQUEST} batches of the coordinator's retentionBatchSize per request; repeat while more is true.`,
        tags: ['admin'],
        body: PurgeRequest,
        response: { 200: PurgeResponse, ...errorResponses() },
      },
    },
    async (request) => {
      const tenant = principalOf(request).tenant;
      const body = request.body;
      const statuses = body.statuses ?? PURGEABLE_STATUSES;
      const filter = { tenant, kindRetention: false, ...(body.kind === undefined ? {} : { kind: body.kind }) };
      if (body.dryRun === true) {
        let matched = 0;
        for (const status of statuses) matched += await ctx.store.jobPurgeCount({ ...filter, status, olderThanMs: body.olderThanMs });
        return { deleted: 0, matched, more: false };
      }
      return purgeJobs(ctx.store, {
        ...filter,
        olderThanMs: () => body.olderThanMs,
        statuses,
        batchSize: ctx.config.retentionBatchSize,
        maxJobs: PURGE_BATCHES_PER_REQUEST * ctx.config.retentionBatchSize,
      });
    },
  );
}
