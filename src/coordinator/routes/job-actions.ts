/**
 * Routes about one job beyond reading it: its result (with checksum headers),
 * its attempt history, cancellation (owner or admin) and the admin's
 * reconcile of an `unknown` job, over the engine's functions (which scope
 * every lookup: another tenant's or user's job answers 404); the result's
 * HTTP form (checksum headers, 204, 304) is the route's.
 */

import { Type } from '@sinclair/typebox';
import { essenceOf, isMediaType } from '../../core/media-type.js';
import { AttemptList, CancelRequest, IdParams, Job, ReconcileRequest } from '../../protocol/schemas.js';
import { principalOf } from '../auth.js';
import { errorResponses, type CoordinatorApp } from '../route-context.js';
import type { EngineContext } from '../../engine/context.js';
import { cancelJob, reconcileJob } from '../../engine/job-actions.js';
import { jobAttempts, jobResult } from '../../engine/jobs.js';
import { emptyBodyAsObject } from './jobs.js';

/** `Repr-Digest` (RFC 9530) wants the raw digest in base64. */
export function reprDigest(checksumHex: string): string {
  return `sha-256=:${Buffer.from(checksumHex, 'hex').toString('base64')}:`;
}

/**
 * How a stored result is served. Its content type came from a worker: it is
 * never sniffed, and anything but JSON or plain text is a download in a
 * sandbox, so a result cannot run script in the coordinator's origin. A value
 * that is not a media type (stored by hand or before the check) is served as
 * bytes rather than failing the read.
 */
export function resultHeaders(contentType: string): Record<string, string> {
  const valid = isMediaType(contentType);
  const essence = valid ? essenceOf(contentType) : '';
  const inline = essence === 'application/json' || essence.endsWith('+json') || essence === 'text/plain';
  return {
    'content-type': valid ? contentType : 'application/octet-stream',
    'x-content-type-options': 'nosniff',
    ...(inline ? {} : { 'content-security-policy': 'sandbox', 'content-disposition': 'attachment' }),
  };
}

export function registerJobActionRoutes(app: CoordinatorApp, ctx: EngineContext): void {
  app.get(
    '/jobs/:id/result',
    {
      config: { roles: ['producer', 'admin'] },
      schema: {
        summary: 'The result of a succeeded job',
        description:
          'The stored bytes with their content type and X-Content-Type-Options: nosniff; anything but JSON or text/plain also with Content-Security-Policy: sandbox and Content-Disposition: attachment. ETag is the quoted SHA-256 (hex) and Repr-Digest the same digest in RFC 9530 form. 404 result_not_ready before success; 204 when the job succeeded without a result.',
        tags: ['jobs'],
        params: IdParams,
        headers: Type.Object({ 'if-none-match': Type.Optional(Type.String()) }),
        response: {
          200: { description: 'The result body, in its stored content type', content: { '*/*': { schema: Type.Unknown() } } },
          204: Type.Null({ description: 'Succeeded without a result' }),
          304: Type.Null({ description: 'Not modified (If-None-Match matched the ETag)' }),
          ...errorResponses(404),
        },
      },
    },
    async (request, reply) => {
      const result = await jobResult(ctx, principalOf(request), request.params.id);
      if (result === null) return reply.code(204).send(null);
      const etag = `"${result.checksum}"`;
      reply.header('etag', etag).header('repr-digest', reprDigest(result.checksum)).header('cache-control', 'private, immutable');
      const ifNoneMatch = request.headers['if-none-match'];
      if (typeof ifNoneMatch === 'string' && ifNoneMatch.split(',').some((tag) => tag.trim() === etag || tag.trim() === '*')) {
        return reply.code(304).send(null);
      }
      for (const [name, value] of Object.entries(resultHeaders(result.contentType))) reply.header(name, value);
      return reply.code(200).send(result.body);
    },
  );

  app.get(
    '/jobs/:id/attempts',
    {
      config: { roles: ['producer', 'admin'] },
      schema: {
        summary: 'The attempt history of a job, oldest first',
        tags: ['jobs'],
        params: IdParams,
        response: { 200: AttemptList, ...errorResponses(404) },
      },
    },
    async (request) => ({ attempts: await jobAttempts(ctx, principalOf(request), request.params.id) }),
  );

  app.post(
    '/jobs/:id/cancel',
    {
      config: { roles: ['producer', 'admin'] },
      preValidation: emptyBodyAsObject,
      schema: {
        summary: 'Cancel a job (owner or admin)',
        description:
          'A queued job becomes cancelled at once. A running job is marked (cancelRequested): its next renew answers 409 cancelled and the worker aborts the handler. A job that already ended answers 409 invalid_state.',
        tags: ['jobs'],
        params: IdParams,
        body: CancelRequest,
        response: { 200: Job, ...errorResponses(404, 409) },
      },
    },
    async (request) => cancelJob(ctx, request.log, principalOf(request), request.params.id),
  );

  app.post(
    '/jobs/:id/reconcile',
    {
      config: { roles: ['admin'] },
      schema: {
        summary: 'Resolve an unknown job (admin)',
        description:
          'succeeded or dead end the job; requeue puts it back in the queue with a fresh attempt budget. 409 not_unknown for a job in another state.',
        tags: ['jobs'],
        params: IdParams,
        body: ReconcileRequest,
        response: { 200: Job, ...errorResponses(404, 409) },
      },
    },
    async (request) => reconcileJob(ctx, request.log, principalOf(request), request.params.id, request.body.outcome),
  );
}
