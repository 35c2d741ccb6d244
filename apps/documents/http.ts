/**
 * The review service's HTTP surface (Fastify; the factory never listens).
 * `POST /documents` stores the document and enqueues its review in one
 * SQLite transaction and answers 202 with the document's Location;
 * `GET /documents/{id}` shows the job's state, the steps taken, the refused
 * proposals and the draft note. The caller's tenant comes from its API key,
 * never from the body; another tenant's document answers 404 as a missing
 * one does. Nothing here sends email: the reviewer does that.
 */

import { createHash, randomBytes } from 'node:crypto';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyRequest } from 'fastify';
import { LeaseholdError, type Queue } from '../../src/index.js';
import type { DocumentRecords } from './records.js';
import { REVIEW_KIND, documentDigest, type ReviewInput, type ReviewResult } from './workflow.js';

export type ReviewKinds = { [REVIEW_KIND]: ReviewInput };

export interface DocumentsAppOptions {
  readonly queue: Queue<ReviewKinds>;
  readonly records: DocumentRecords;
  /** API key → tenant. */
  readonly apiKeys: ReadonlyMap<string, string>;
  /** Each review's deadline, the time budget of its steps. Default 60 s. */
  readonly timeBudgetMs?: number;
  /** Attempts per review. Default 3. */
  readonly maxAttempts?: number;
}

export const MAX_DOCUMENT_CHARS = 64 * 1024;

const SubmitBody = {
  type: 'object',
  additionalProperties: false,
  required: ['title', 'text'],
  properties: {
    title: { type: 'string', minLength: 1, maxLength: 200 },
    text: { type: 'string', minLength: 1, maxLength: MAX_DOCUMENT_CHARS },
  },
} as const;

class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export function buildDocumentsApp(options: DocumentsAppOptions): FastifyInstance {
  const { queue, records } = options;
  const tenants = new Map([...options.apiKeys].map(([key, tenant]) => [hashKey(key), tenant]));
  const app = Fastify({ logger: false, bodyLimit: MAX_DOCUMENT_CHARS * 4 + 4096 });

  const tenantOf = (request: FastifyRequest): string => {
    const header = request.headers.authorization;
    const tenant = header?.startsWith('Bearer ') === true ? tenants.get(hashKey(header.slice(7))) : undefined;
    if (tenant === undefined) throw new HttpError(401, 'unauthenticated', 'send Authorization: Bearer <api key>');
    return tenant;
  };

  app.setErrorHandler((error: FastifyError | HttpError | LeaseholdError, _request, reply) => {
    if (error instanceof HttpError) return reply.code(error.statusCode).send({ code: error.code, message: error.message });
    if (error instanceof LeaseholdError) {
      if (error.retryAfterSeconds !== undefined) void reply.header('retry-after', String(error.retryAfterSeconds));
      return reply.code(error.status).send({ code: error.code, message: error.message });
    }
    if ('validation' in error && error.validation !== undefined) return reply.code(400).send({ code: 'invalid_request', message: error.message });
    const status = typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
    return reply.code(status).send({ code: status === 500 ? 'internal_error' : 'invalid_request', message: status === 500 ? 'internal error' : error.message });
  });

  app.post<{ Body: { title: string; text: string } }>('/documents', { schema: { body: SubmitBody } }, async (request, reply) => {
    const tenant = tenantOf(request);
    const key = request.headers['idempotency-key'];
    if (key !== undefined && (typeof key !== 'string' || !/^[\x21-\x7e]{1,200}$/.test(key)))
      throw new HttpError(400, 'invalid_request', 'Idempotency-Key is 1 to 200 visible ASCII characters');
    // A replayed key names the same document, so the same text gives the same payload and the original job.
    const documentId = `doc_${key === undefined ? randomBytes(12).toString('base64url') : createHash('sha256').update(`${tenant}\n${key}`).digest('base64url').slice(0, 24)}`;
    const { title, text } = request.body;
    const input: ReviewInput = { tenant, documentId, sha256: documentDigest(title, text) };
    const job = records.db.transaction(() => {
      const enqueued = queue.enqueueInTransaction(records.db, {
        kind: REVIEW_KIND,
        payload: input,
        idempotencyKey: documentId,
        maxAttempts: options.maxAttempts ?? 3,
        deadlineMs: options.timeBudgetMs ?? 60_000,
      });
      records.insertDocument({ id: documentId, tenant, title, body: text, sha256: input.sha256, jobId: enqueued.id }, new Date());
      return enqueued;
    })();
    const location = `/documents/${documentId}`;
    return reply.code(202).header('location', location).send({ documentId, jobId: job.id, status: job.status, location });
  });

  app.get<{ Params: { id: string } }>('/documents/:id', async (request) => {
    const tenant = tenantOf(request);
    const doc = records.document(request.params.id);
    if (doc === undefined || doc.tenant !== tenant || doc.jobId === null) throw new HttpError(404, 'not_found', 'no such document');
    const job = await queue.get(doc.jobId);
    const result = job.status === 'succeeded' ? (job.result as ReviewResult | null) : null;
    return {
      documentId: doc.id,
      title: doc.title,
      job: {
        id: job.id,
        status: job.status,
        attempts: job.attempts,
        maxAttempts: job.maxAttempts,
        errorCode: job.lastError?.code ?? null,
        deadlineAt: job.deadlineAt,
      },
      steps: records
        .steps(job.id)
        .map((step) => ({ index: step.stepIndex, tool: step.tool, attempt: step.attempt, checkpointed: step.checkpointed, output: step.output })),
      rejections: records.rejections(job.id),
      reviewNote: result?.note ?? null,
    };
  });

  return app;
}
