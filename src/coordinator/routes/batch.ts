/**
 * POST /jobs/batch: up to 1,000 jobs, each with its own idempotency key,
 * committed in one transaction; the engine's enqueueMany judges each as POST
 * /jobs would and answers, in order, what that request would have answered.
 */

import { EnqueueBatchRequest, EnqueueBatchResponse } from '../../protocol/schemas.js';
import { principalOf } from '../auth.js';
import { enqueueMany } from '../../engine/enqueue-batch.js';
import { errorResponses, type CoordinatorApp } from '../route-context.js';
import type { EngineContext } from '../../engine/context.js';

export function registerBatchRoutes(app: CoordinatorApp, ctx: EngineContext): void {
  app.post(
    '/jobs/batch',
    {
      config: { roles: ['producer', 'admin'] },
      bodyLimit: ctx.config.batchBodyLimitBytes,
      schema: {
        summary: 'Enqueue many jobs in one transaction',
        description:
          'Each item carries its own idempotencyKey. results[i].status is what POST /jobs would have answered for item i: 202 (with replayed:true for a replay, deduplicated:true for a request folded into an existing job), or 400/409/413 with the error.',
        tags: ['jobs'],
        body: EnqueueBatchRequest,
        response: { 200: EnqueueBatchResponse, ...errorResponses(413) },
      },
    },
    async (request) => ({ results: await enqueueMany(ctx, principalOf(request), request.body.jobs) }),
  );
}
