/**
 * Admin routes for operating the queue, used by the dashboard and the CLI:
 * POST /jobs/bulk requeues, cancels or reconciles every job a filter selects,
 * up to a limit, in bounded batches (bulk-actions.ts) — with dryRun it only
 * counts, which is the figure a confirmation shows; GET /jobs/{id}/detail is
 * a job with its payload, checkpoint, result checksum and attempts.
 */

import { BulkRequest, BulkResponse, JobDetail } from '../../protocol/operator.js';
import { IdParams } from '../../protocol/schemas.js';
import { principalOf } from '../auth.js';
import { bulkAction } from '../../engine/operator.js';
import { errorResponses, type CoordinatorApp } from '../route-context.js';
import type { EngineContext } from '../../engine/context.js';
import { jobDetail } from '../../engine/jobs.js';

export function registerOperatorRoutes(app: CoordinatorApp, ctx: EngineContext): void {
  app.post(
    '/jobs/bulk',
    {
      config: { roles: ['admin'] },
      schema: {
        summary: 'Requeue, cancel or reconcile every job a filter selects (admin)',
        description:
          'filter takes the fields of GET /jobs (status, kind, errorCode, createdAfter, createdBefore). requeue applies to dead jobs, reconcile (with outcome) to unknown ones, cancel to queued and running ones; a filter status outside those answers 400. ' +
          'At most limit jobs (default 1000, at most 10000) are touched, newest first, each by the same guarded transition as the single-job route; matched counts the jobs selected, changed the ones that moved. dryRun counts without changing.',
        tags: ['jobs'],
        body: BulkRequest,
        response: { 200: BulkResponse, ...errorResponses() },
      },
    },
    async (request) => bulkAction(ctx, principalOf(request), request.body),
  );

  app.get(
    '/jobs/:id/detail',
    {
      config: { roles: ['admin'] },
      schema: {
        summary: 'A job with its payload, checkpoint, result checksum and attempts (admin)',
        tags: ['jobs'],
        params: IdParams,
        response: { 200: JobDetail, ...errorResponses(404) },
      },
    },
    async (request) => jobDetail(ctx, principalOf(request), request.params.id),
  );
}
