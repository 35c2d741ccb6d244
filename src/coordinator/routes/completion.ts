/**
 * Ending an attempt: complete (single and batch) and fail. What each call
 * does is lease-protocol.ts (shared with the library's direct worker
 * transport): the lease token is the authority, a JSON `result` is stored as
 * application/json in its canonical form and `resultBytes` (base64) as the
 * bytes with their content type, and a result larger than the job's kind
 * allows makes the job dead with `result_too_large`, answered as status
 * `dead` instead of failing the request, because the change is committed.
 */

import { CompleteManyRequest, CompleteManyResponse, CompleteRequest, CompleteResponse, FailRequest, FailResponse, IdParams } from '../../protocol/schemas.js';
import { principalOf } from '../auth.js';
import { completeJob, completeJobs, completeJobsAndLease, failJob } from '../../engine/lease-protocol.js';
import { toWireLeasedJob } from '../../engine/wire.js';
import { errorResponses, type CoordinatorApp } from '../route-context.js';
import type { EngineContext } from '../../engine/context.js';

export function registerCompletionRoutes(app: CoordinatorApp, ctx: EngineContext): void {
  app.post(
    '/jobs/:id/complete',
    {
      config: { roles: ['worker', 'admin'] },
      schema: {
        summary: 'Complete a job with an optional result',
        description:
          'Commits the result and marks the job succeeded under the current lease. The same complete again answers 200 and changes nothing; a stale token answers 409 stale_lease.',
        tags: ['lease'],
        params: IdParams,
        body: CompleteRequest,
        response: { 200: CompleteResponse, ...errorResponses(404, 409) },
      },
    },
    async (request) => completeJob(ctx, request.log, principalOf(request).tenant, request.params.id, request.body),
  );

  app.post(
    '/complete',
    {
      config: { roles: ['worker', 'admin'] },
      bodyLimit: ctx.config.batchBodyLimitBytes,
      schema: {
        summary: 'Complete many jobs in one transaction',
        description:
          "Each item follows the rules of the single complete. Per item: status `succeeded`; `dead` with code result_too_large; or `rejected` with the code the single call would answer (stale_lease, deadline_exceeded, cancelled, not_found, invalid_request for a content type that is not an RFC 9110 media type). With `lease`, the worker's next jobs are leased after the completions commit and answered in `jobs` (never waiting; none when none is available): one round trip for a batch of completions and the next lease.",
        tags: ['lease'],
        body: CompleteManyRequest,
        response: { 200: CompleteManyResponse, ...errorResponses(413) },
      },
    },
    async (request) => {
      const tenant = principalOf(request).tenant;
      const { completions, lease } = request.body;
      if (lease === undefined) return { results: await completeJobs(ctx, request.log, tenant, completions) };
      const { results, jobs } = await completeJobsAndLease(ctx, request.log, tenant, completions, lease);
      return { results, jobs: jobs.map(toWireLeasedJob) };
    },
  );

  app.post(
    '/jobs/:id/fail',
    {
      config: { roles: ['worker', 'admin'] },
      schema: {
        summary: 'Fail an attempt',
        description:
          'Back to queued after exponential backoff with full jitter, or dead when attempts are exhausted or retryable is false. A stale token answers 409; repeating the call changes nothing.',
        tags: ['lease'],
        params: IdParams,
        body: FailRequest,
        response: { 200: FailResponse, ...errorResponses(404, 409) },
      },
    },
    async (request) => failJob(ctx, request.log, principalOf(request).tenant, request.params.id, request.body),
  );
}
