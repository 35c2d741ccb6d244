/**
 * POST /jobs/purge (admin): deletes the tenant's finished jobs that finished
 * at least `olderThanMs` ago, whatever their kind's retention says, in the
 * coordinator's retention batches and at most MAX_PURGE_PER_REQUEST jobs per
 * request; `more: true` asks the caller to send it again (`leasehold purge`
 * does, showing progress). `dryRun` counts instead. `unknown` jobs are never
 * purged: they wait for an operator's reconcile.
 */

import { MAX_PURGE_PER_REQUEST, PurgeRequest, PurgeResponse } from '../../protocol/retention.js';
import { PURGEABLE_STATUSES } from '../../store/retention.js';
import { principalOf } from '../auth.js';
import { purgeJobs } from '../retention.js';
import { errorResponses, type CoordinatorApp, type RouteContext } from '../route-context.js';

export function registerPurgeRoutes(app: CoordinatorApp, ctx: RouteContext): void {
  app.post(
    '/jobs/purge',
    {
      config: { roles: ['admin'] },
      schema: {
        summary: "Delete the tenant's finished jobs older than a period",
        description: `Succeeded, cancelled and dead jobs (with their attempts and results), at most ${MAX_PURGE_PER_REQUEST} per request; repeat while more is true.`,
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
        maxJobs: MAX_PURGE_PER_REQUEST,
      });
    },
  );
}
