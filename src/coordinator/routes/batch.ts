/**
 * POST /jobs/batch: up to 1,000 jobs, each with its own idempotency key,
 * committed in one transaction. Each job is judged as a single POST /jobs
 * would judge it (kind, payload schema and size, idempotency), and the answer
 * lists, in order, what that single request would have answered. A job that
 * fails its checks does not stop the others; backpressure refuses the whole
 * batch, since it applies to the request, not to one job.
 */

import { LeaseholdError } from '../../core/errors.js';
import { EnqueueBatchRequest, EnqueueBatchResponse, type EnqueueBatchResult } from '../../protocol/schemas.js';
import type { EnqueueParams } from '../../store/store.js';
import { principalOf } from '../auth.js';
import { errorDetail, toHttpError } from '../error-handler.js';
import { isRefused, prepareEnqueue, refusalOf } from '../../engine/enqueue.js';
import { errorResponses, type CoordinatorApp } from '../route-context.js';
import type { EngineContext } from '../../engine/context.js';
import { toWireJob } from '../../engine/wire.js';

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
    async (request) => {
      const principal = principalOf(request);
      const items = request.body.jobs;
      const results: (EnqueueBatchResult | undefined)[] = new Array(items.length);
      const accepted: { readonly index: number; readonly params: EnqueueParams }[] = [];
      for (const [index, item] of items.entries()) {
        const { idempotencyKey, ...job } = item;
        try {
          accepted.push({ index, params: await prepareEnqueue(ctx, principal, job, idempotencyKey) });
        } catch (error) {
          if (!(error instanceof LeaseholdError) || error.status >= 500) throw error;
          results[index] = refused(idempotencyKey, error);
        }
      }
      if (accepted.length > 0) {
        const bytes = accepted.reduce((sum, entry) => sum + entry.params.payloadBytes, 0);
        await ctx.backpressure.check(principal.tenant, accepted.length, bytes);
        const outcomes = await ctx.store.jobEnqueueMany(accepted.map((entry) => entry.params));
        let created = 0;
        let createdBytes = 0;
        for (const [position, entry] of accepted.entries()) {
          const outcome = outcomes[position];
          const idempotencyKey = entry.params.idempotencyKey;
          if (outcome === undefined) throw new Error('the store answered fewer outcomes than jobs');
          if (isRefused(outcome)) {
            results[entry.index] = refused(idempotencyKey, refusalOf(outcome));
          } else {
            ctx.events.enqueued(principal.tenant, outcome, entry.params.payloadBytes);
            if (outcome.kind === 'created') {
              created += 1;
              createdBytes += entry.params.payloadBytes;
            }
            results[entry.index] = {
              idempotencyKey,
              status: 202,
              replayed: outcome.kind === 'replayed',
              ...(outcome.kind === 'deduplicated' ? { deduplicated: true } : {}),
              job: toWireJob(outcome.job),
            };
          }
        }
        ctx.backpressure.recordAccepted(principal.tenant, created, createdBytes);
      }
      return { results: results.map((entry, index) => entry ?? refused(items[index]?.idempotencyKey ?? '', new LeaseholdError('internal_error'))) };
    },
  );
}

/** A job's entry with the error a single POST /jobs would have answered. */
function refused(idempotencyKey: string, error: LeaseholdError): EnqueueBatchResult {
  const answer = toHttpError(error);
  return { idempotencyKey, status: answer.status, error: errorDetail(answer) };
}
