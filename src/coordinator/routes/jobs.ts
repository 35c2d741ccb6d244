/**
 * Producer-facing job routes: enqueue, read, list, and the admin's requeue,
 * over the engine's functions (engine/enqueue.ts, jobs.ts, job-actions.ts),
 * which scope every lookup to the caller.
 */

import { Type } from '@sinclair/typebox';
import { EnqueueRequest, EnqueueResponse, IdParams, Job, JobGetQuery, JobList, JobListQuery, LIMITS, RequeueRequest } from '../../protocol/schemas.js';
import { principalOf } from '../auth.js';
import type { EngineContext } from '../../engine/context.js';
import { enqueueAnswer, enqueueOne } from '../../engine/enqueue.js';
import { requeueJob } from '../../engine/job-actions.js';
import { getJob, listJobs, waitForJob } from '../../engine/jobs.js';
import { errorResponses, type CoordinatorApp } from '../route-context.js';

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
      if (outcome.kind === 'deduplicated') reply.header('deduplicated', 'true');
      return enqueueAnswer(outcome);
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
      const principal = principalOf(request);
      const waitMs = request.query.waitMs ?? 0;
      if (waitMs === 0) return getJob(ctx, principal, request.params.id);
      // A client that hangs up ends the wait.
      const controller = new AbortController();
      const onClose = (): void => controller.abort();
      reply.raw.once('close', onClose);
      try {
        return await waitForJob(ctx, principal, request.params.id, waitMs, controller.signal);
      } finally {
        reply.raw.off('close', onClose);
      }
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
    async (request) => listJobs(ctx, principalOf(request), request.query),
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
    async (request) => requeueJob(ctx, request.log, principalOf(request), request.params.id, request.body),
  );
}

/** Lets a POST whose body is entirely optional be sent without one. */
export async function emptyBodyAsObject(request: { body: unknown }): Promise<void> {
  if (request.body === undefined) request.body = {};
}
