/**
 * The asynchronous export contract: POST /exports (the owner's
 * Idempotency-Key; 202 + Location + Retry-After), GET /exports/{id} and
 * GET /exports/{id}/result. The export_requests row and the leasehold job are
 * written in one transaction of the API's own connection, so a 202 is sent
 * only after both are durable and a rolled-back request leaves neither.
 * Ownership is the export_requests row: another user's id answers 404, as an
 * id that does not exist does.
 */

import type { FastifyInstance, FastifyReply } from 'fastify';
import { LeaseholdError, type Queue } from '../../src/index.js';
import type { AppDb } from './db.js';
import {
  canonicalParameters,
  DEFAULT_EXPORT_SETTINGS,
  EXPORT_DEADLINE_MS,
  EXPORT_KIND,
  normalizeParameters,
  type ExportQueue,
  type ExportSettings,
} from './export-job.js';
import { sendError } from './http-errors.js';

export type ExportStatus = 'queued' | 'running' | 'succeeded' | 'failed';

export interface ExportView {
  readonly id: string;
  readonly status: ExportStatus;
  readonly attempts: number;
  /** The stable code that ended a failed export; null otherwise. */
  readonly errorCode: string | null;
}

type Job = Awaited<ReturnType<Queue['get']>>;

/** leasehold's terminal states other than success all mean "no more automatic attempts". */
export function viewOf(job: Job): ExportView {
  const status: ExportStatus = job.status === 'queued' || job.status === 'running' || job.status === 'succeeded' ? job.status : 'failed';
  return { id: job.id, status, attempts: job.attempts, errorCode: status === 'failed' ? (job.lastError?.code ?? job.status) : null };
}

const CLIENT_KEY = /^[A-Za-z0-9_.:-]{1,200}$/;

interface RequestRow {
  readonly job_id: string;
  readonly parameters_json: string;
}

type CreateOutcome = { readonly kind: 'created' | 'existing'; readonly jobId: string } | { readonly kind: 'conflict' };

export function registerExportRoutes(app: FastifyInstance, db: AppDb, queue: ExportQueue, settings: ExportSettings = DEFAULT_EXPORT_SETTINGS): void {
  const findByKey = db.prepare<[number, string], RequestRow>('SELECT job_id, parameters_json FROM export_requests WHERE owner_user_id = ? AND request_key = ?');
  const findOwned = db.prepare<[string, number], RequestRow>('SELECT job_id, parameters_json FROM export_requests WHERE job_id = ? AND owner_user_id = ?');
  const insertRequest = db.prepare<[string, number, string, string, string]>(
    'INSERT INTO export_requests (job_id, owner_user_id, request_key, parameters_json, created_at) VALUES (?, ?, ?, ?, ?)',
  );
  const retryAfter = String(settings.pollSeconds);

  const overloaded = (reply: FastifyReply, seconds: number): FastifyReply =>
    reply.header('retry-after', String(seconds)).code(503).send({ code: 'exports_overloaded', message: 'too many exports are pending; retry later' });

  app.post('/exports', async (request, reply) => {
    const header = request.headers['idempotency-key'];
    const key = Array.isArray(header) ? header[0] : header;
    if (key === undefined) return sendError(reply, 400, 'idempotency_key_required', 'the Idempotency-Key header is required');
    if (!CLIENT_KEY.test(key)) return sendError(reply, 400, 'invalid_idempotency_key', 'Idempotency-Key must be 1 to 200 characters of A-Z a-z 0-9 _ . : -');
    const checked = normalizeParameters(request.body);
    if (!checked.ok) return sendError(reply, 400, 'invalid_parameters', checked.message);
    const owner = request.user.id;
    const canonical = canonicalParameters(checked.parameters);

    // A replayed key is answered even under load; only new work is refused.
    if (findByKey.get(owner, key) === undefined) {
      const counts = (await queue.stats()).counts;
      const pending = (counts['queued'] ?? 0) + (counts['running'] ?? 0);
      if (pending >= settings.maxPendingExports) return overloaded(reply, settings.pollSeconds * 5);
    }

    let outcome: CreateOutcome;
    try {
      outcome = db.transaction((): CreateOutcome => {
        const existing = findByKey.get(owner, key);
        if (existing !== undefined) return existing.parameters_json === canonical ? { kind: 'existing', jobId: existing.job_id } : { kind: 'conflict' };
        const job = queue.enqueueInTransaction(db, {
          kind: EXPORT_KIND,
          payload: { ownerId: owner, ...checked.parameters },
          // Scoped by owner: two users' keys never meet in leasehold's tenant-wide key space.
          idempotencyKey: `u${owner}:${key}`,
          // Set on the job rather than read from the kind's rules, which only the worker registers.
          maxAttempts: settings.maxAttempts,
          deadlineMs: EXPORT_DEADLINE_MS,
        });
        insertRequest.run(job.id, owner, key, canonical, new Date().toISOString());
        return { kind: 'created', jobId: job.id };
      })();
    } catch (error) {
      if (error instanceof LeaseholdError && error.code === 'overloaded') return overloaded(reply, error.retryAfterSeconds ?? settings.pollSeconds * 5);
      // The queue's kind cache is reloading (e.g. right after a kind's rules changed): nothing was written.
      if (error instanceof LeaseholdError && error.code === 'store_unavailable') {
        return reply.header('retry-after', '1').code(503).send({ code: 'exports_unavailable', message: 'exports cannot be accepted right now; retry' });
      }
      throw error;
    }
    if (outcome.kind === 'conflict') return sendError(reply, 409, 'idempotency_conflict', 'this Idempotency-Key was already used with different parameters');
    const view = viewOf(await queue.get(outcome.jobId));
    return reply.code(202).header('location', `/exports/${outcome.jobId}`).header('retry-after', retryAfter).send(view);
  });

  /** The job when `id` is one of this user's exports; undefined answers 404. */
  const ownedJob = async (id: string, owner: number): Promise<Job | undefined> => (findOwned.get(id, owner) === undefined ? undefined : queue.get(id));

  app.get('/exports/:id', async (request, reply) => {
    const job = await ownedJob((request.params as { id: string }).id, request.user.id);
    if (job === undefined) return sendError(reply, 404, 'not_found', 'no such export');
    const view = viewOf(job);
    if (view.status === 'queued' || view.status === 'running') reply.header('retry-after', retryAfter);
    return view;
  });

  app.get('/exports/:id/result', async (request, reply) => {
    const id = (request.params as { id: string }).id;
    const job = await ownedJob(id, request.user.id);
    if (job === undefined) return sendError(reply, 404, 'not_found', 'no such export');
    const view = viewOf(job);
    if (view.status !== 'succeeded') {
      if (view.status !== 'failed') reply.header('retry-after', retryAfter);
      return reply.code(409).send({ code: 'export_not_ready', message: `the export is ${view.status}`, status: view.status, errorCode: view.errorCode });
    }
    // The client checks the stored SHA-256 before answering; the header carries it to this API's client.
    const result = await queue.result(id);
    return reply
      .header('content-type', result.contentType)
      .header('x-checksum-sha256', result.checksum)
      .header('content-disposition', 'attachment; filename="tasks.csv"')
      .send(result.body);
  });
}
