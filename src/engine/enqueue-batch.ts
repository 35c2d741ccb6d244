/**
 * Many jobs in one transaction (POST /jobs/batch, Queue.enqueueMany), each
 * with its own idempotency key. Each job is judged as a single enqueue would
 * judge it (kind, payload schema and size, idempotency), and the answer
 * lists, in order, what that single enqueue would have answered, with its
 * HTTP status. A job that fails its checks does not stop the others;
 * backpressure refuses the whole batch, since it applies to the request,
 * not to one job.
 */

import { LeaseholdError } from '../core/errors.js';
import type { EnqueueBatchItem, EnqueueBatchResult } from '../protocol/schemas.js';
import type { EnqueueParams } from '../store/store.js';
import type { EngineContext } from './context.js';
import { isRefused, prepareEnqueue, recordEnqueues, refusalOf } from './enqueue.js';
import type { Principal } from './principal.js';
import { toWireJob } from './wire.js';

export async function enqueueMany(ctx: EngineContext, principal: Principal, items: readonly EnqueueBatchItem[]): Promise<EnqueueBatchResult[]> {
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
    const stored = accepted.map((entry, position) => {
      const outcome = outcomes[position];
      if (outcome === undefined) throw new Error('the store answered fewer outcomes than jobs');
      return { params: entry.params, outcome };
    });
    recordEnqueues(ctx, principal.tenant, stored);
    for (const [position, { params, outcome }] of stored.entries()) {
      const index = accepted[position]?.index ?? position;
      const idempotencyKey = params.idempotencyKey;
      results[index] = isRefused(outcome)
        ? refused(idempotencyKey, refusalOf(outcome))
        : {
            idempotencyKey,
            status: 202,
            replayed: outcome.kind === 'replayed',
            ...(outcome.kind === 'deduplicated' ? { deduplicated: true } : {}),
            job: toWireJob(outcome.job),
          };
    }
  }
  return results.map((entry, index) => entry ?? refused(items[index]?.idempotencyKey ?? '', new LeaseholdError('internal_error')));
}

/** A job's entry with the error a single enqueue would have answered, and that answer's HTTP status. */
function refused(idempotencyKey: string, error: LeaseholdError): EnqueueBatchResult {
  return {
    idempotencyKey,
    status: error.status,
    error: { code: error.code, message: error.message, ...(error.details === undefined ? {} : { details: error.details }) },
  };
}
