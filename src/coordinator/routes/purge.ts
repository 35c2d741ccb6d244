/**
 * POST /jobs/purge (admin): the engine's purgeFinished (engine/operator.ts),
 * at most PURGE_BATCHES_PER_REQUEST batches per request; `more: true` asks
 * the caller to send it again.
 */

import { PurgeRequest, PurgeResponse } from '../../protocol/retention.js';
import { principalOf } from '../auth.js';
import { PURGE_BATCHES_PER_REQUEST, purgeFinished } from '../../engine/operator.js';
import { errorResponses, type CoordinatorApp } from '../route-context.js';
import type { EngineContext } from '../../engine/context.js';

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
    async (request) => purgeFinished(ctx, principalOf(request), request.body),
  );
}
