/**
 * Producer-facing job routes: enqueue, read, list, and the admin's requeue.
 * Every lookup is scoped to the caller's tenant, and to the caller's own jobs
 * for producers, so another tenant's or user's job answers 404 exactly like
 * an id that never existed.
 */

import { Type } from '@sinclair/typebox';
import { LeaseholdError } from '../../core/errors.js';
import { isJobId } from '../../core/ids.js';
import { EnqueueRequest, EnqueueResponse, IdParams, Job, JobGetQuery, JobList, JobListQuery, LIMITS, RequeueRequest, WAIT_END_STATUSES } from '../../protocol/schemas.js';
import type { JobStatus } from '../../core/states.js';
import type { JobRecord, JobScope } from '../../store/store.js';
import { principalOf } from '../auth.js';
import { scopeOf } from '../../engine/principal.js';
import { enqueueOne } from '../../engine/enqueue.js';
import { listFilteredJobs } from '../../engine/job-filter.js';
import { errorResponses, type CoordinatorApp } from '../route-context.js';
import type { EngineContext } from '../../engine/context.js';
import { toWireJob, toWireJobListItem } from '../../engine/wire.js';

export const DEFAULT_LIST_LIMIT = 100;

/** The states `GET /jobs/{id}?waitMs` waits for (protocol/wait-ends.ts). */
const WAIT_ENDS: ReadonlySet<JobStatus> = new Set(WAIT_END_STATUSES);

/** Reads a job the caller may see, or answers 404. */
export async function getScopedJob(ctx: EngineContext, scope: JobScope, id: string): Promise<JobRecord> {
  const job = isJobId(id) ? await ctx.store.jobGet({ scope, id }) : null;
  if (job === null) throw new LeaseholdError('not_found');
  return job;
}

export function registerJobRoutes(app: CoordinatorApp, ctx: EngineContext): void {
  const retryAfter = String(ctx.config.pollIntervalSeconds);

  app.post(
    '/jobs',
    {
      config: { roles: ['producer', 'admin'] },
      schema: {
        summary: 'Enqueue a job',
        description:
          'Idempotent by the Idempotency-Key header: the same key with the same canonical body answers the existing job with Idempotent-Replayed: true; a different body answers 409 idempotency_conflict. ' +
          'A dedupe key folds the request into the job that holds it (202 with that job, Deduplicated: true and deduplicated: true in the body); ' +
          'a unique key refuses it while its holder keeps it (409 duplicate_job, error.details.jobId).',
        tags: ['jobs'],
        headers: Type.Object({ 'idempotency-key': Type.Optional(Type.String({ description: `Required; at most ${LIMITS.idempotencyKeyLength} characters` })) }),
        body: EnqueueRequest,
        response: { 202: EnqueueResponse, ...errorResponses(400, 409, 413, 415) },
      },
    },
    async (request, reply) => {
      const outcome = await enqueueOne(ctx, principalOf(request), request.body, request.headers['idempotency-key']);
      reply.code(202).header('location', `/jobs/${outcome.job.id}`).header('retry-after', retryAfter);
      if (outcome.kind === 'replayed') reply.header('idempotent-replayed', 'true');
      if (outcome.kind === 'deduplicated') {
        reply.header('deduplicated', 'true');
        return { ...toWireJob(outcome.job), deduplicated: true };
      }
      return toWireJob(outcome.job);
    },
  );

  app.get(
    '/jobs/:id',
    {
      config: { roles: ['producer', 'admin'] },
      schema: {
        summary: 'Read a job, or wait up to waitMs for it to finish',
        description:
          'With waitMs, answers as soon as the job is succeeded, dead, cancelled or unknown, or after waitMs with the job as it is then. ' +
          'More parked waits per tenant than the coordinator allows answer 503 overloaded.',
        tags: ['jobs'],
        params: IdParams,
        querystring: JobGetQuery,
        response: { 200: Job, ...errorResponses(404) },
      },
    },
    async (request, reply) => {
      const scope = scopeOf(principalOf(request));
      const id = request.params.id;
      const job = await getScopedJob(ctx, scope, id);
      const waitMs = request.query.waitMs ?? 0;
      if (waitMs === 0 || WAIT_ENDS.has(job.status)) return toWireJob(job);
      let latest = job;
      const controller = new AbortController();
      const onClose = (): void => controller.abort();
      reply.raw.once('close', onClose);
      try {
        await ctx.finishWaiters.wait(scope.tenant, id, waitMs, controller.signal, async () => {
          latest = await getScopedJob(ctx, scope, id);
          return WAIT_ENDS.has(latest.status);
        });
      } finally {
        reply.raw.off('close', onClose);
      }
      return toWireJob(WAIT_ENDS.has(latest.status) ? latest : await getScopedJob(ctx, scope, id));
    },
  );

  app.get(
    '/jobs',
    {
      config: { roles: ['producer', 'admin'] },
      schema: {
        summary: 'List jobs, newest first',
        description:
          'Each job carries a result summary {contentType, bytes} (or null), never the result itself; nextCursor is opaque and valid only with the same key and filters. ' +
          'status and kind select through the store; errorCode, createdAfter and createdBefore are applied to the rows read, at most 5000 per call, so a filtered page can hold fewer than limit jobs (even none) while nextCursor is not null.',
        tags: ['jobs'],
        querystring: JobListQuery,
        response: { 200: JobList, ...errorResponses() },
      },
    },
    async (request) => {
      const { limit, cursor, ...filter } = request.query;
      const page = await listFilteredJobs(ctx.store, { scope: scopeOf(principalOf(request)), filter, limit: limit ?? DEFAULT_LIST_LIMIT, cursor });
      return { jobs: page.jobs.map(toWireJobListItem), nextCursor: page.nextCursor };
    },
  );

  app.post(
    '/jobs/:id/requeue',
    {
      config: { roles: ['admin'] },
      preValidation: emptyBodyAsObject,
      schema: {
        summary: 'Requeue a dead job with a fresh attempt budget (admin)',
        tags: ['jobs'],
        params: IdParams,
        body: RequeueRequest,
        response: { 200: Job, ...errorResponses(404, 409) },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      if (!isJobId(request.params.id)) throw new LeaseholdError('not_found');
      const outcome = await ctx.store.jobRequeue({
        scope: scopeOf(principal),
        id: request.params.id,
        ...(request.body.maxAttempts === undefined ? {} : { maxAttempts: request.body.maxAttempts }),
      });
      if (outcome.kind === 'rejected') {
        throw new LeaseholdError(outcome.code);
      }
      ctx.events.requeued(request.log, principal.tenant, outcome.job);
      return toWireJob(outcome.job);
    },
  );
}

/** Lets a POST whose body is entirely optional be sent without one. */
export async function emptyBodyAsObject(request: { body: unknown }): Promise<void> {
  if (request.body === undefined) request.body = {};
}
