/**
 * Ending an attempt: complete (single and batch) and fail. The lease token is
 * the authority: the calls are scoped by tenant only, and the store accepts
 * them only under the job's current, unexpired lease. Repeating a complete or
 * a fail with the same token answers as the first did and changes nothing.
 *
 * A JSON `result` is stored as application/json in its canonical form;
 * `resultBytes` (base64) is stored as the bytes with their content type. When a
 * result is larger than the job's kind allows, the job becomes dead with
 * `result_too_large`; the answer says so (status `dead`) instead of failing
 * the request, because the change is committed.
 */

import { canonicalJson } from '../../core/canonical-json.js';
import type { BackoffPolicy } from '../../core/backoff.js';
import { LeaseholdError } from '../../core/errors.js';
import { crashPoint } from '../../core/fault-points.js';
import { isJobId } from '../../core/ids.js';
import { isMediaType } from '../../core/media-type.js';
import {
  CompleteManyRequest,
  CompleteManyResponse,
  type CompleteManyResult,
  CompleteRequest,
  CompleteResponse,
  FailRequest,
  FailResponse,
  IdParams,
  type ResultBytes,
} from '../../protocol/schemas.js';
import { toRfc3339 } from '../../core/clock.js';
import type { CompleteOutcome, CompleteParams } from '../../store/store.js';
import { principalOf } from '../auth.js';
import { errorResponses, type CoordinatorApp, type RouteContext } from '../route-context.js';
import { JSON_CONTENT_TYPE } from '../wire.js';
import { explainRejection, rejection } from './rejections.js';

interface ResultInput {
  readonly contentType: string;
  readonly body: Buffer;
}

/** The result to store: JSON in canonical form, or bytes with their content type (an RFC 9110 media type). */
function resultInput(result: unknown, resultBytes: ResultBytes | undefined): ResultInput | undefined {
  if (resultBytes !== undefined) {
    if (result !== undefined) throw new LeaseholdError('invalid_request', 'body/result and body/resultBytes are exclusive');
    if (!isMediaType(resultBytes.contentType)) {
      throw new LeaseholdError('invalid_request', 'body/resultBytes/contentType must be an RFC 9110 media type (type/subtype; name=value, ASCII, no control characters)');
    }
    return { contentType: resultBytes.contentType, body: Buffer.from(resultBytes.base64, 'base64') };
  }
  return result === undefined ? undefined : { contentType: JSON_CONTENT_TYPE, body: Buffer.from(canonicalJson(result), 'utf8') };
}

/**
 * The result limit of the job's kind (the coordinator's defaultMaxResultBytes
 * for an unregistered kind), looked up only when it could matter: a result
 * within every limit needs no lookup of the job's kind.
 */
async function maxResultBytesFor(ctx: RouteContext, tenant: string, id: string, result: ResultInput | undefined): Promise<number | undefined> {
  if (result === undefined) return undefined;
  const kinds = await ctx.kinds.forTenant(tenant);
  const fallback = ctx.config.defaultMaxResultBytes;
  if (result.body.length <= Math.min(fallback, kinds.smallestMaxResultBytes ?? fallback)) return undefined;
  const job = isJobId(id) ? await ctx.store.jobGet({ scope: { tenant }, id }) : null;
  return job === null ? undefined : (kinds.byName.get(job.kind)?.record.maxResultBytes ?? fallback);
}

interface CompletionInput {
  readonly id: string;
  readonly token: string;
  readonly result?: unknown;
  readonly resultBytes?: ResultBytes;
}

async function completeParams(ctx: RouteContext, tenant: string, { id, token, result, resultBytes }: CompletionInput): Promise<CompleteParams> {
  const input = resultInput(result, resultBytes);
  const maxResultBytes = await maxResultBytesFor(ctx, tenant, id, input);
  return {
    tenant,
    id,
    token,
    ...(input === undefined ? {} : { result: input }),
    ...(maxResultBytes === undefined ? {} : { maxResultBytes }),
  };
}

async function backoffFor(ctx: RouteContext, tenant: string, id: string): Promise<BackoffPolicy> {
  const kinds = await ctx.kinds.forTenant(tenant);
  if (kinds.byName.size === 0) return ctx.config.defaultBackoff;
  const job = await ctx.store.jobGet({ scope: { tenant }, id });
  return (job === null ? undefined : kinds.byName.get(job.kind)?.record.backoff) ?? ctx.config.defaultBackoff;
}

/** Error messages are shown to operators: single-line, without control characters. */
export function sanitizeMessage(message: string | undefined): string {
  return (message ?? '').replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
}

export function registerCompletionRoutes(app: CoordinatorApp, ctx: RouteContext): void {
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
    async (request) => {
      const principal = principalOf(request);
      const id = request.params.id;
      if (!isJobId(id)) throw new LeaseholdError('not_found', 'job not found');
      const params = await completeParams(ctx, principal.tenant, { ...request.body, id });
      const outcome = await ctx.store.jobComplete(params);
      ctx.events.completed(request.log, principal.tenant, id, outcome, params.result?.body.length ?? 0);
      crashPoint('complete.after-commit');
      if (outcome.kind === 'rejected') throw await rejection(ctx, principal.tenant, id, outcome.code);
      return { id, status: outcome.kind === 'completed' ? ('succeeded' as const) : ('dead' as const) };
    },
  );

  app.post(
    '/complete',
    {
      config: { roles: ['worker', 'admin'] },
      bodyLimit: ctx.config.batchBodyLimitBytes,
      schema: {
        summary: 'Complete many jobs in one transaction',
        description:
          'Each item follows the rules of the single complete. Per item: status `succeeded`; `dead` with code result_too_large; or `rejected` with the code the single call would answer (stale_lease, deadline_exceeded, cancelled, not_found, invalid_request for a content type that is not an RFC 9110 media type).',
        tags: ['lease'],
        body: CompleteManyRequest,
        response: { 200: CompleteManyResponse, ...errorResponses(413) },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const all = request.body.completions;
      // An item whose content type is not a media type is refused alone, like an item with a stale token.
      const refused = new Set(all.filter((item) => item.resultBytes !== undefined && !isMediaType(item.resultBytes.contentType)));
      const items = all.filter((item) => !refused.has(item));
      const params = await Promise.all(items.map((item) => completeParams(ctx, principal.tenant, item)));
      const outcomes = await ctx.store.jobCompleteMany(params);
      params.forEach((item, index) => {
        const outcome = outcomes[index];
        if (outcome !== undefined) ctx.events.completed(request.log, principal.tenant, item.id, outcome, item.result?.body.length ?? 0);
      });
      crashPoint('complete.after-commit');
      const applied = new Map(items.map((item, index) => [item, batchItemResult(item.id, outcomes[index])]));
      const results = all.map((item): CompleteManyResult => applied.get(item) ?? { id: item.id, status: 'rejected', code: 'invalid_request' });
      for (const entry of results) {
        if (entry.code === 'stale_lease') entry.code = await explainRejection(ctx, principal.tenant, entry.id, 'stale_lease');
      }
      return { results };
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
    async (request) => {
      const principal = principalOf(request);
      const id = request.params.id;
      if (!isJobId(id)) throw new LeaseholdError('not_found', 'job not found');
      const body = request.body;
      const retryable = body.retryable ?? true;
      const outcome = await ctx.store.jobFail({
        tenant: principal.tenant,
        id,
        token: body.token,
        error: { code: body.error.code, message: sanitizeMessage(body.error.message) },
        retryable,
        backoff: await backoffFor(ctx, principal.tenant, id),
      });
      ctx.events.failed(request.log, principal.tenant, id, body.error.code, retryable, outcome);
      if (outcome.kind === 'rejected') throw await rejection(ctx, principal.tenant, id, outcome.code);
      return outcome.status === 'queued' && outcome.runAfter !== null
        ? { status: outcome.status, runAfter: toRfc3339(outcome.runAfter) }
        : { status: outcome.status };
    },
  );
}

function batchItemResult(id: string, outcome: CompleteOutcome | undefined): CompleteManyResult {
  if (outcome === undefined) return { id, status: 'rejected', code: 'internal_error' };
  if (outcome.kind === 'completed') return { id, status: 'succeeded' };
  if (outcome.kind === 'result_too_large') return { id, status: 'dead', code: 'result_too_large' };
  return { id, status: 'rejected', code: outcome.code };
}
